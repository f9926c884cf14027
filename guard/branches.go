package guard

import (
	"regexp"
	rxsyntax "regexp/syntax"
	"strings"
	"sync"

	"github.com/scarproxy/scarproxy/guard/internal/bytepair"
)

// A pattern's regex is a long alternation. The prefilter (see
// requiredLiterals) lets the whole regex run when any of its branches'
// literals is in a message, a common word among them (" failed",
// "status") is enough, and the whole alternation then runs over the whole
// text, several µs per line of it. matcher splits the regex into its
// branches, each with the literals every match of it contains, and runs
// only the branches whose literals the message holds, on the lines that
// hold them when no match of the branch crosses a line (see oneLine).
// What matches is what the whole regex matches: the branches are the
// regex's own (its alternations distributed over what surrounds them).

// matcher matches a pattern's regex.
type matcher struct {
	whole *regexp.Regexp // the regex as configured
	parts []branch       // the branches with literals; nil: whole is the one branch
	rest  *regexp.Regexp // the branches with no literal known, joined; nil: none
	one   branch         // whole as a branch, when parts is nil
}

// branch is a regex, its required literals (nil: unknown) and whether
// each of its matches lies within a line.
type branch struct {
	re      *regexp.Regexp
	lits    []string
	oneLine bool
}

// maxBranches bounds the branches a regex is split into; a regex with
// more runs whole.
const maxBranches = 256

// matchers holds the matchers compiled, by regex: a matcher is read
// only, and a configuration reloaded or a test's new Guard compiles the
// same regexes (the built-ins' take tens of milliseconds to split).
var matchers sync.Map // string -> *matcher; as many as the configurations loaded name

// matcherOf returns the matcher of expr, a valid regex.
func matcherOf(expr string) *matcher {
	if m, ok := matchers.Load(expr); ok {
		return m.(*matcher)
	}
	m := newMatcher(expr)
	got, _ := matchers.LoadOrStore(expr, &m)
	return got.(*matcher)
}

// newMatcher compiles expr, a valid regex.
func newMatcher(expr string) matcher {
	m := matcher{whole: regexp.MustCompile(expr)}
	m.one = branch{re: m.whole, lits: requiredLiterals(expr), oneLine: oneLine(expr)}
	re, err := rxsyntax.Parse(expr, rxsyntax.Perl)
	if err != nil {
		return m
	}
	subs := branchesOf(re)
	if len(subs) < 2 {
		return m
	}
	var parts []branch
	var rest []string
	for _, sub := range subs {
		src := sub.String()
		b, err := regexp.Compile(src)
		if err != nil {
			return m // not expected: String reparses
		}
		// Parsed again: the parser factored the branch's literals apart
		// (`\bTS1011|\bTS1109` into `\bTS1(?:011|109)`); its own text has
		// them whole.
		lits := requiredLiterals(src)
		if lits == nil {
			rest = append(rest, src)
			continue
		}
		parts = append(parts, branch{re: b, lits: lits, oneLine: inLine(sub)})
	}
	if len(parts) == 0 {
		return m
	}
	m.parts = parts
	if len(rest) > 0 {
		m.rest = regexp.MustCompile(strings.Join(rest, "|"))
	}
	return m
}

// branchesOf returns regexes one of which matches where re does, and
// only there; nil when re is not an alternation (or has too many
// branches). Captures are dropped: only whether it matches counts.
func branchesOf(re *rxsyntax.Regexp) []*rxsyntax.Regexp {
	switch re.Op {
	case rxsyntax.OpCapture:
		return branchesOf(re.Sub[0])
	case rxsyntax.OpAlternate:
		var out []*rxsyntax.Regexp
		for _, sub := range re.Sub {
			if bs := branchesOf(sub); bs != nil {
				out = append(out, bs...)
			} else {
				out = append(out, sub)
			}
			if len(out) > maxBranches {
				return nil
			}
		}
		return out
	case rxsyntax.OpConcat:
		// A concatenation around one alternation is the alternation of
		// the concatenations (the parser factors common prefixes out of
		// alternations: `\bfoo|\bbar` is parsed as `\b(?:foo|bar)`).
		at := -1
		var bs []*rxsyntax.Regexp
		for i, sub := range re.Sub {
			if b := branchesOf(sub); b != nil {
				if at >= 0 {
					return nil
				}
				at, bs = i, b
			}
		}
		if at < 0 {
			return nil
		}
		out := make([]*rxsyntax.Regexp, len(bs))
		for k, b := range bs {
			c := &rxsyntax.Regexp{Op: rxsyntax.OpConcat, Flags: re.Flags}
			c.Sub = append(append(append(c.Sub0[:0], re.Sub[:at]...), b), re.Sub[at+1:]...)
			out[k] = c
		}
		return out
	}
	return nil
}

// folded is a text as the literals are looked for in it.
type folded struct {
	text, lower string       // lower: text with its ASCII letters lowered
	ok          bool         // literals are found in lower exactly (see foldASCII)
	pairs       bytepair.Set // of lower: most literals of most patterns are not in a message
}

// fold sets f to text.
func (f *folded) fold(text string) {
	f.text = text
	f.lower, f.ok = foldASCII(text)
	if f.ok {
		f.pairs.AddText(f.lower)
	}
}

// holds reports whether f's lower text holds one of lits.
func (f *folded) holds(lits []string) bool {
	for _, l := range lits {
		if f.pairs.MayHold(l) && strings.Contains(f.lower, l) {
			return true
		}
	}
	return false
}

// match reports whether the regex matches f's text.
func (m *matcher) match(f *folded) bool {
	if !f.ok {
		return m.whole.MatchString(f.text)
	}
	if m.parts == nil {
		return m.one.match(f)
	}
	for i := range m.parts {
		if m.parts[i].match(f) {
			return true
		}
	}
	return m.rest != nil && m.rest.MatchString(f.text)
}

// match reports whether b matches f's text (f.ok).
func (b *branch) match(f *folded) bool {
	switch {
	case b.lits == nil:
		return b.re.MatchString(f.text)
	case b.oneLine:
		return matchLines(b.re, f, b.lits)
	default:
		return f.holds(b.lits) && b.re.MatchString(f.text)
	}
}
