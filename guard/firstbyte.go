package guard

import (
	resyntax "regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// A tool rule's regex is tried on the first line and on each of the last
// lines of every new tool output, most of which match no rule. Most rules
// are anchored at the start of the line and can only begin with a few
// bytes ("Traceback", "Error:", "npm ERR!"...): firstBytes works out which,
// from the regex's syntax tree, so that a line starting with another byte
// is rejected without running the regex.

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) union(o byteSet) {
	s[0], s[1], s[2], s[3] = s[0]|o[0], s[1]|o[1], s[2]|o[2], s[3]|o[3]
}

// addRange adds the bytes the runes lo..hi can begin with. UTF-8 keeps
// the order of runes, so the non-ASCII ones begin with the bytes from the
// first byte of the lowest to that of the highest. The regexp package reads
// a byte that does not begin valid UTF-8 as U+FFFD: a range holding it can
// begin with any byte above 0x7f.
func (s *byteSet) addRange(lo, hi int) {
	for r := lo; r <= hi && r <= 0x7f; r++ {
		s.add(byte(r))
	}
	if lo <= utf8.RuneError && utf8.RuneError <= hi {
		for b := 0x80; b <= 0xff; b++ {
			s.add(byte(b))
		}
	} else if hi > 0x7f {
		var buf [utf8.UTFMax]byte
		utf8.EncodeRune(buf[:], rune(max(lo, 0x80)))
		from := buf[0]
		utf8.EncodeRune(buf[:], rune(min(hi, utf8.MaxRune)))
		for b := int(from); b <= int(buf[0]); b++ {
			s.add(byte(b))
		}
	}
}

func everyByte() (s byteSet) {
	for i := range s {
		s[i] = ^uint64(0)
	}
	return s
}

// firstBytes returns the bytes a match of the anchored regex expr can
// begin with. ok is false when that is not known: the regex is not
// anchored at the start of the text, or it can match the empty string.
func firstBytes(expr string) (set byteSet, ok bool) {
	re, err := resyntax.Parse(expr, resyntax.Perl)
	if err != nil || re.Op != resyntax.OpConcat || len(re.Sub) == 0 || re.Sub[0].Op != resyntax.OpBeginText {
		return byteSet{}, false
	}
	set, nullable := first(re)
	return set, !nullable
}

// first returns the bytes a match of re can begin with, and whether re can
// match the empty string. Zero-width assertions are taken as always true,
// which only makes the set larger than it needs to be.
func first(re *resyntax.Regexp) (set byteSet, nullable bool) {
	fold := re.Flags&resyntax.FoldCase != 0
	switch re.Op {
	case resyntax.OpNoMatch:
		return set, false
	case resyntax.OpEmptyMatch, resyntax.OpBeginLine, resyntax.OpEndLine, resyntax.OpBeginText,
		resyntax.OpEndText, resyntax.OpWordBoundary, resyntax.OpNoWordBoundary:
		return set, true
	case resyntax.OpLiteral:
		if len(re.Rune) == 0 {
			return set, true
		}
		addRune(&set, re.Rune[0], fold)
		return set, false
	case resyntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			set.addRange(int(re.Rune[i]), int(re.Rune[i+1]))
			if fold {
				for r := re.Rune[i]; r <= re.Rune[i+1] && r <= 0x7f; r++ {
					addRune(&set, r, true)
				}
			}
		}
		return set, false
	case resyntax.OpAnyChar, resyntax.OpAnyCharNotNL:
		return everyByte(), false
	case resyntax.OpCapture, resyntax.OpPlus:
		return first(re.Sub[0])
	case resyntax.OpStar, resyntax.OpQuest:
		set, _ = first(re.Sub[0])
		return set, true
	case resyntax.OpRepeat:
		set, nullable = first(re.Sub[0])
		return set, nullable || re.Min == 0
	case resyntax.OpConcat:
		for _, sub := range re.Sub {
			s, n := first(sub)
			set.union(s)
			if !n {
				return set, false
			}
		}
		return set, true
	case resyntax.OpAlternate:
		for _, sub := range re.Sub {
			s, n := first(sub)
			set.union(s)
			nullable = nullable || n
		}
		return set, nullable
	}
	return everyByte(), true // an operator not handled here: no filter
}

// addRune adds the first byte of r's UTF-8 encoding, and of its other
// cases when fold is set.
func addRune(set *byteSet, r rune, fold bool) {
	var buf [utf8.UTFMax]byte
	add := func(r rune) {
		utf8.EncodeRune(buf[:], r)
		set.add(buf[0])
	}
	add(r)
	if fold {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			add(f)
		}
	}
}
