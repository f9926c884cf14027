package guard

import (
	"regexp"
	rxsyntax "regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The regexes of a pattern are long alternations matched case-insensitively;
// running them over every message is slow. A prefilter skips a pattern when
// the message contains none of the literals any match must contain. It is
// exact when lowering the message's ASCII letters finds every
// case-insensitive match of an ASCII literal (see foldASCII); other
// messages always run the regexes.

// requiredLiterals returns lower-case literals such that every match of
// expr contains at least one of them, or nil when no such set is known.
func requiredLiterals(expr string) []string {
	re, err := rxsyntax.Parse(expr, rxsyntax.Perl)
	if err != nil {
		return nil
	}
	lits := literalsOf(re.Simplify(), false)
	for _, l := range lits {
		if l == "" || !isASCII(l) {
			return nil
		}
	}
	return lits
}

// exactLiterals returns literals such that every match of expr contains
// at least one of them as it is (no case folded), or nil when no such set
// is known. A part of expr matched case-insensitively requires nothing.
func exactLiterals(expr string) []string {
	re, err := rxsyntax.Parse(expr, rxsyntax.Perl)
	if err != nil {
		return nil
	}
	return literalsOf(re.Simplify(), true)
}

// literalsOf returns a set of literals one of which every match of re
// contains, or nil: lower-cased, or, when exact, as they are (a literal
// matched case-insensitively then requires nothing).
func literalsOf(re *rxsyntax.Regexp, exact bool) []string {
	switch re.Op {
	case rxsyntax.OpLiteral:
		if exact {
			// The regexp package reads a byte that does not begin
			// valid UTF-8 as U+FFFD: a text can match that rune
			// without holding it.
			if re.Flags&rxsyntax.FoldCase != 0 || slices.Contains(re.Rune, utf8.RuneError) {
				return nil
			}
			return []string{string(re.Rune)}
		}
		// Only ASCII runes: lowering one beyond it can give ASCII (the
		// dotted capital I gives i), which a text holding that rune
		// does not hold.
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf {
				return nil
			}
		}
		return []string{lowerRunes(re.Rune)}
	case rxsyntax.OpCapture:
		return literalsOf(re.Sub[0], exact)
	case rxsyntax.OpPlus:
		return literalsOf(re.Sub[0], exact)
	case rxsyntax.OpRepeat:
		if re.Min >= 1 {
			return literalsOf(re.Sub[0], exact)
		}
	case rxsyntax.OpConcat:
		// Any child's set is a valid requirement: keep the most selective,
		// the one whose shortest literal is longest.
		var best []string
		for _, sub := range re.Sub {
			if l := literalsOf(sub, exact); l != nil && shortest(l) > shortest(best) {
				best = l
			}
		}
		return best
	case rxsyntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			l := literalsOf(sub, exact)
			if l == nil {
				return nil
			}
			all = append(all, l...)
		}
		return all
	}
	return nil
}

func lowerRunes(rs []rune) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func shortest(lits []string) int {
	if len(lits) == 0 {
		return 0
	}
	n := len(lits[0])
	for _, l := range lits[1:] {
		n = min(n, len(l))
	}
	return n
}

// oneLine reports whether every match of expr lies within one line of the
// text it is found in, whatever the text around it: no part of expr
// matches a newline, and it is anchored to no end of the text (^ and $
// are allowed in multi-line mode, where they match at a line's ends). A
// text then matches expr exactly when one of its lines does.
func oneLine(expr string) bool {
	re, err := rxsyntax.Parse(expr, rxsyntax.Perl)
	return err == nil && inLine(re)
}

func inLine(re *rxsyntax.Regexp) bool {
	switch re.Op {
	case rxsyntax.OpBeginText, rxsyntax.OpEndText, rxsyntax.OpAnyChar:
		return false
	case rxsyntax.OpLiteral:
		// A newline folds to no other rune.
		if slices.Contains(re.Rune, '\n') {
			return false
		}
	case rxsyntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return false
			}
		}
	}
	for _, sub := range re.Sub {
		if !inLine(sub) {
			return false
		}
	}
	return true
}

// maxLinesRun bounds the lines matchLines runs a regex on one by one;
// past it, the regex runs on the whole text once.
const maxLinesRun = 16

// matchLines reports whether re, a oneLine regex every match of which
// holds one of lits, matches f's text. The regex runs only on the lines
// that hold one of lits, each at most once: the cost of a long output is
// that of the lines that may match, not of its length.
func matchLines(re *regexp.Regexp, f *folded, lits []string) bool {
	var run [maxLinesRun]int // starts of the lines run
	n := 0
	text, lower := f.text, f.lower
	for _, l := range lits {
		if !f.pairs.MayHold(l) {
			continue
		}
		for from := 0; from < len(lower); {
			i := strings.Index(lower[from:], l)
			if i < 0 {
				break
			}
			i += from
			start := strings.LastIndexByte(text[:i], '\n') + 1
			end := len(text)
			if j := strings.IndexByte(text[i:], '\n'); j >= 0 {
				end = i + j
			}
			from = end + 1
			if slices.Contains(run[:n], start) {
				continue
			}
			if n == len(run) {
				return re.MatchString(text)
			}
			run[n] = start
			n++
			if re.MatchString(text[start:end]) {
				return true
			}
		}
	}
	return false
}

func containsAny(s string, lits []string) bool {
	if lits == nil {
		return true
	}
	for _, l := range lits {
		if strings.Contains(s, l) {
			return true
		}
	}
	return false
}

// foldASCII returns s with its ASCII capitals lowered, byte for byte, and
// whether a case-insensitive match of an ASCII literal in s is a match of
// the lower-case literal in what it returns. It is unless s holds one of
// the two runes outside ASCII that fold to an ASCII letter: the Kelvin
// sign (k) and the long s (s).
func foldASCII(s string) (string, bool) {
	upper, other := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		upper = upper || 'A' <= c && c <= 'Z'
		other = other || c >= utf8.RuneSelf
	}
	if other && holdsFoldingRune(s) {
		return "", false
	}
	if !upper {
		return s, true
	}
	b := []byte(s)
	for i, c := range b {
		b[i] = lowerASCII(c)
	}
	return string(b), true
}

// foldsIntoASCII reports whether s holds one of the two runes outside
// ASCII that fold to an ASCII letter: the Kelvin sign (k) and the long s
// (s).
func foldsIntoASCII(s string) bool {
	return !isASCII(s) && holdsFoldingRune(s)
}

func holdsFoldingRune(s string) bool {
	return strings.Contains(s, "\u212a") || strings.Contains(s, "\u017f")
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
