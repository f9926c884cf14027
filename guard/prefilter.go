package guard

import (
	rxsyntax "regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The regexes of a pattern are long alternations matched case-insensitively;
// running them over every message is slow. A prefilter skips a pattern when
// the message contains none of the literals any match must contain. It is
// exact for ASCII messages (where lower-casing and case folding agree);
// other messages always run the regexes.

// requiredLiterals returns lower-case literals such that every match of
// expr contains at least one of them, or nil when no such set is known.
func requiredLiterals(expr string) []string {
	re, err := rxsyntax.Parse(expr, rxsyntax.Perl)
	if err != nil {
		return nil
	}
	lits := literalsOf(re.Simplify())
	for _, l := range lits {
		if l == "" || !isASCII(l) {
			return nil
		}
	}
	return lits
}

// literalsOf returns a set of literals one of which every match of re
// contains, or nil.
func literalsOf(re *rxsyntax.Regexp) []string {
	switch re.Op {
	case rxsyntax.OpLiteral:
		return []string{lowerRunes(re.Rune)}
	case rxsyntax.OpCapture:
		return literalsOf(re.Sub[0])
	case rxsyntax.OpPlus:
		return literalsOf(re.Sub[0])
	case rxsyntax.OpRepeat:
		if re.Min >= 1 {
			return literalsOf(re.Sub[0])
		}
	case rxsyntax.OpConcat:
		// Any child's set is a valid requirement: keep the most selective,
		// the one whose shortest literal is longest.
		var best []string
		for _, sub := range re.Sub {
			if l := literalsOf(sub); l != nil && shortest(l) > shortest(best) {
				best = l
			}
		}
		return best
	case rxsyntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			l := literalsOf(sub)
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

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
