package quoted

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// form is a text as the rules judge it: each rune folded to what it looks
// like, and where each byte of the fold came from.
//
// A rune folds to the lower case of its compatibility decomposition (the
// mapping NFKC applies: full-width, mathematical, circled and other
// compatibility letters become plain ones) with combining marks dropped,
// each letter then mapped through the confusables table of UTS #39 (Greek,
// Cyrillic and other lookalikes of Latin letters). As in the UTS #39
// skeleton, the digits 0 and 1 fold to "o" and "l"; the rules spell
// their words with i and l alike. The symbols leetspeak writes for letters
// fold to them before a letter or digit (! @ $), or between two letters
// (3 4 5 7). White space folds to one space and '_'
// to a space, so identifiers read as words. Invisible characters (format
// characters such as zero-width spaces and joiners, bidi controls, word
// joiners, the Unicode tag characters; fillers that print nothing) fold to
// nothing, and one that stands between two letters or digits is
// remembered: text that hides characters inside its words cannot be judged
// by what it shows.
type form struct {
	text string
	// from[i] and to[i] are the bytes of the source rune that folded
	// byte i of text came from.
	from, to []int32
	// hidden is set when an invisible character stood inside a word.
	hidden bool
}

// foldText returns the form of s.
func foldText(s string) form {
	var f form
	b := make([]byte, 0, len(s))
	f.from = make([]int32, 0, len(s))
	f.to = make([]int32, 0, len(s))
	emit := func(c byte, i, j int) {
		b = append(b, c)
		f.from = append(f.from, int32(i))
		f.to = append(f.to, int32(j))
	}
	lastWord := false // the last rune that showed something was a letter or digit
	hiddenSince := false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		j := i + n
		if r < utf8.RuneSelf {
			c := foldASCII(byte(r))
			// Leetspeak's letters inside a word: "!gn0re", "@ll", "in$truct".
			if leet := leetLetters[byte(r)]; leet != 0 && j < len(s) && isWordASCII(s[j]) &&
				(r < '0' || r > '9' || i > 0 && isLetterASCII(s[i-1]) && isLetterASCII(s[j])) {
				c = leet
			}
			word := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
			if hiddenSince && lastWord && word {
				f.hidden = true
			}
			hiddenSince = false
			lastWord = word
			emit(c, i, j)
			i = j
			continue
		}
		if invisible(r) {
			hiddenSince = true
			i = j
			continue
		}
		if unicode.IsSpace(r) {
			hiddenSince, lastWord = false, false
			emit(' ', i, j)
			i = j
			continue
		}
		shown := false
		for _, d := range foldRune(r) {
			shown = true
			if d < utf8.RuneSelf {
				c := foldASCII(byte(d))
				word := 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
				if hiddenSince && lastWord && word {
					f.hidden = true
				}
				lastWord = word
				emit(c, i, j)
				continue
			}
			if !unicode.IsLetter(d) && !unicode.IsDigit(d) {
				// Punctuation and symbols: dashes, quotes, the rest a space.
				c := byte(' ')
				switch {
				case d == '\u2018' || d == '\u2019' || d == '\u02bc' || d == '\u2032':
					c = '\''
				case unicode.Is(unicode.Pd, d):
					c = '-'
				case unicode.Is(unicode.Pi, d) || unicode.Is(unicode.Pf, d):
					c = '"'
				case d == '\u3002' || d == '\uff61':
					c = '.'
				}
				lastWord = false
				emit(c, i, j)
				continue
			}
			if hiddenSince && lastWord {
				f.hidden = true
			}
			lastWord = true
			var enc [utf8.UTFMax]byte
			for _, c := range enc[:utf8.EncodeRune(enc[:], d)] {
				emit(c, i, j)
			}
		}
		if shown {
			hiddenSince = false
		}
		i = j
	}
	f.text = string(b)
	return f
}

// leetLetters are the symbols leetspeak writes for letters (0: none); a
// table, as it is read for every byte of a quoted text.
var leetLetters = [256]byte{'!': 'i', '@': 'a', '$': 's', '3': 'e', '4': 'a', '5': 's', '7': 't'}

func isLetterASCII(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isWordASCII(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// foldASCII folds an ASCII byte: letters to lower case, 0 and 1 to "o"
// and "l", '_' and white space to a space.
func foldASCII(c byte) byte {
	switch {
	case 'A' <= c && c <= 'Z':
		return c + 'a' - 'A'
	case c == '0':
		return 'o'
	case c == '1':
		return 'l'
	case c == '_' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
		return ' '
	}
	return c
}

// foldRune returns what a non-ASCII rune folds to, ASCII bytes not yet
// folded (nothing for a combining mark).
func foldRune(r rune) []rune {
	if c, ok := lookalike(r); ok {
		return []rune{rune(c)}
	}
	if unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) {
		return nil
	}
	var out []rune
	for _, d := range norm.NFKD.String(string(r)) {
		switch {
		case unicode.Is(unicode.Mn, d):
			continue
		case d < utf8.RuneSelf:
			out = append(out, d)
			continue
		}
		d = unicode.ToLower(d)
		if c, ok := lookalike(d); ok {
			d = rune(c)
		}
		out = append(out, d)
	}
	return out
}

// lookalike returns the Latin letter or digit r reads as, from the
// confusables table, then the table of lookalikes; for a capital letter
// not in them, that of its small letter.
func lookalike(r rune) (byte, bool) {
	if c, ok := enclosed(r); ok {
		return c, true
	}
	if c, ok := confusables[r]; ok {
		return c, true
	}
	if c, ok := lookalikes[r]; ok {
		return c, true
	}
	if l := unicode.ToLower(r); l != r {
		if c, ok := confusables[l]; ok {
			return c, true
		}
		if c, ok := lookalikes[l]; ok {
			return c, true
		}
	}
	return 0, false
}

// enclosed returns the letter of the negative circled and negative
// squared Latin capital letters (🅐, 🅰): they read as their letter, and
// have no compatibility decomposition for NFKC to fold.
func enclosed(r rune) (byte, bool) {
	switch {
	case 0x1f150 <= r && r <= 0x1f169: // NEGATIVE CIRCLED LATIN CAPITAL LETTER A..Z
		return byte('a' + r - 0x1f150), true
	case 0x1f170 <= r && r <= 0x1f189: // NEGATIVE SQUARED LATIN CAPITAL LETTER A..Z
		return byte('a' + r - 0x1f170), true
	}
	return 0, false
}

// invisible reports whether r prints nothing: a format character (Cf: zero
// width space, joiners, bidi controls, soft hyphen, tags), a variation
// selector or the combining grapheme joiner, or a filler (Hangul fillers,
// the braille blank).
func invisible(r rune) bool {
	switch {
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Variation_Selector, r):
		return true
	}
	switch r {
	case '\u034f', '\u115f', '\u1160', '\u2800', '\u3164', '\uffa0', '\u180e', '\u200b', '\u2060', '\ufeff':
		return true
	}
	return false
}
