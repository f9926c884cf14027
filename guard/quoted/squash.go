package quoted

import (
	"regexp"
	"strings"
)

// An override spelled so that its words do not read as words: letters
// spaced or split by punctuation ("i g n o r e", "ign.ore"), written
// backwards, or in ROT13. The text's letters are run together (i and l as
// one letter, as in key) and matched against the strongest phrases; the
// text is then withheld, not defused: where the phrase starts and ends
// cannot be told.
var squashedPhrase = regexp.MustCompile(
	`(?:ignor|disregard|forget|overrid|bypass|negiect|abandon|discard|dismiss|disobey)(?:e|es|ed|ing|s)?` +
		`(?:aii|any|every|the|your|my|of|these|those|previous|prior|above|earier|earlier|preceding|system|originai|initiai|existing|safety)*` +
		`(?:instructions?|prompts?|guideiines?|directives?|guardraiis?)` +
		`|(?:ignor|disregard|forget|overrid|bypass)(?:e|es|ed|ing|s)?(?:aii|any|every|the|of)*(?:your|previous|prior|above|earier|earlier|preceding|system|originai)(?:previous|prior|above|earier|earlier|preceding|system|originai)*ruies` +
		`|youare(?:now)?(?:root|admin|administrator|superuser|sudo|god|unrestricted|jaiibroken|unfiitered|uncensored)` +
		`|(?:decode|base64)(?:it|this|the|text|string|beiow)*(?:and|then)(?:foiiow|execute|obey|run)` +
		`|systemprompt(?:is|are)?overrid`)

// squashedLits are the words one of which every match of squashedPhrase
// holds (with i for l): a text without any cannot match.
var squashedLits = []string{"ignor", "disregard", "forget", "overrid", "bypass", "negiect", "abandon", "discard", "dismiss", "disobey", "youare", "decode", "base64", "systemprompt"}

// mayHold reports whether s holds one of squashedLits.
func mayHold(s string) bool {
	for _, l := range squashedLits {
		if strings.Contains(s, l) {
			return true
		}
	}
	return false
}

// hiddenPhrase reports whether the letters of a folded text, run
// together, reversed or in ROT13, hold an override.
func hiddenPhrase(folded string) bool {
	b := make([]byte, 0, len(folded))
	for i := 0; i < len(folded); i++ {
		c := folded[i]
		switch {
		case c == 'l':
			b = append(b, 'i')
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			b = append(b, c)
		}
	}
	if len(b) < 8 {
		return false
	}
	s := string(b)
	if mayHold(s) && squashedPhrase.MatchString(s) {
		return true
	}
	// Backwards and in ROT13, i and l are two letters again: run the
	// original letters.
	raw := make([]byte, 0, len(folded))
	for i := 0; i < len(folded); i++ {
		if c := folded[i]; 'a' <= c && c <= 'z' {
			raw = append(raw, c)
		}
	}
	rev := make([]byte, len(raw))
	rot := make([]byte, len(raw))
	for i, c := range raw {
		rev[len(raw)-1-i] = c
		rot[i] = 'a' + (c-'a'+13)%26
	}
	for _, t := range []string{key(string(rev)), key(string(rot))} {
		if mayHold(t) && squashedPhrase.MatchString(t) {
			return true
		}
	}
	return false
}
