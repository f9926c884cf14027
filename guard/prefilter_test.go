package guard

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

func TestRequiredLiterals(t *testing.T) {
	tests := []struct {
		expr string
		want []string // nil: no prefilter
	}{
		{`(?i)Rate Limit`, []string{"rate limit"}},
		{`foo|bar`, []string{"foo", "bar"}},
		{`\bfoo\d+bar\b`, []string{"foo"}},
		{`x\d+longer`, []string{"longer"}},
		{`(?:ab)+`, []string{"ab"}},
		{`foo|\d+`, nil},
		{`a*`, nil},
		{`(?:foo)?bar`, []string{"bar"}},
		{`caf\x{e9}`, nil},
		{`\x{130}stanbul`, nil},
		{`(?i)x\x{130}|zz`, nil},
		{`(?i)\x{130}zin reddedildi|engel`, nil},
		{`(?i)(?:\x{130}zin )?reddedildi`, []string{"reddedildi"}},
	}
	for _, tc := range tests {
		checkLiterals(t, "requiredLiterals", requiredLiterals, tc.expr, tc.want)
	}
}

// checkLiterals compares, as sets, the literals f finds in expr with want.
func checkLiterals(t *testing.T, name string, f func(string) []string, expr string, want []string) {
	t.Helper()
	got := f(expr)
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s(%q) = %q, want %q", name, expr, got, want)
	}
}

func TestExactLiterals(t *testing.T) {
	tests := []struct {
		expr string
		want []string // nil: none known
	}{
		{`Rate Limit`, []string{"Rate Limit"}},
		{`(?i)Rate Limit`, nil},
		{`(?i:rate) limit`, []string{" limit"}},
		{`^(?:FAIL|[Ee]rror)\b`, []string{"FAIL", "rror"}},
		{`caf\x{e9}`, []string{"caf\u00e9"}},
		{`a\x{fffd}b`, nil},
		{`x|\d+`, nil},
	}
	for _, tc := range tests {
		checkLiterals(t, "exactLiterals", exactLiterals, tc.expr, tc.want)
	}
}

// The prefilter and the branches never change a classification: on the
// error corpus, and on every tool output and error text of testdata, whole
// and cut to each of its lines (a line holding a literal, the text around
// it not).
func TestPrefilterIsExact(t *testing.T) {
	g := mustGuard(t, DefaultConfig())
	check := func(name, typ string, status int, message string) {
		t.Helper()
		got := g.classify(typ, status, message)
		want := classifyWithoutPrefilter(g, typ, status, message)
		if got.pat != want {
			t.Errorf("%s: prefiltered %d, full %d", name, got.pat, want)
		}
	}
	for _, tc := range errorCorpus {
		check(tc.name, tc.typ, tc.status, tc.message)
	}
	// Every text and every line of it, each distinct one once (the
	// first place it was seen names it).
	files, _ := filepath.Glob("testdata/*.txtar")
	type text struct{ name, data string }
	var texts []text
	seen := map[string]bool{}
	add := func(name, data string) {
		if !seen[data] {
			seen[data] = true
			texts = append(texts, text{name, data})
		}
	}
	n := 0
	for _, f := range files {
		for _, out := range parseTxtar(t, f) {
			add(f+": "+out.name, out.data)
			for i, line := range strings.Split(out.data, "\n") {
				add(fmt.Sprintf("%s: %s: line %d", f, out.name, i+1), line)
			}
			n++
		}
	}
	eachInParallel(len(texts), func(k int) {
		check(texts[k].name, store.TypeToolError, 0, texts[k].data)
	})
	if n < 2000 {
		t.Fatalf("%d texts in testdata, want the corpora's 2,000 or more", n)
	}
	for _, r := range redactions {
		if r.lits == nil {
			t.Errorf("redaction %q has no prefilter", r.name)
		}
	}
	for _, p := range g.patterns {
		if p.re == nil {
			continue
		}
		if p.re.parts == nil || p.re.rest != nil {
			t.Errorf("pattern %q: %d branches with literals, rest %v", p.name, len(p.re.parts), p.re.rest)
		}
	}
}

// The branches of a builtin are its alternatives: each pattern has as
// many as alt was given, or more (an alternative with alternations of its
// own at its edges).
func TestBranchesOfBuiltins(t *testing.T) {
	for _, b := range builtins {
		if b.Regex == "" {
			continue
		}
		m := newMatcher("(?i)" + b.Regex)
		if alts := strings.Count(b.Regex, "|") + 1; len(m.parts) < 2 || len(m.parts) > alts {
			t.Errorf("%s: %d branches from %d alternatives (at most)", b.Name, len(m.parts), alts)
		}
	}
}

// A matcher matches what its regex matches.
func FuzzMatcher(f *testing.F) {
	f.Add(`(?i)\b(?:rate limit|quota) exceeded|\bstatus (?:429|503)\b`, "line one\nHTTP status 429 returned\n")
	f.Add(`(?m)^ERROR: x|(?:a|b)c$`, "ok\nbc\nERROR: x")
	f.Add(`foo\s+bar|baz`, "foo\n bar")
	f.Add(`^foo|bar$`, "x\nfoo\nbar\ny")
	f.Add(`\Bfoo|(?s:a.b)`, "a\nb")
	f.Add(`(?i)\bmask|sK`, "\u212aelvin mas\u212a ✓ \u017fK")
	f.Add(`(?i)failed|ERROR`, "✗ Build FAILED → see log")
	f.Add(`(?i)x\x{130}|zz`, "x\u0130")
	f.Add(`\x{130}stanbul|nope`, "\u0130stanbul")
	for _, p := range builtins {
		f.Add("(?i)"+p.Regex, "Traceback:\n  x\nSyntaxError: Unexpected token\nrate limit exceeded")
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		re, err := regexp.Compile(expr)
		if err != nil {
			return
		}
		m := newMatcher(expr)
		var f folded
		f.fold(text)
		if got, want := m.match(&f), re.MatchString(text); got != want {
			t.Fatalf("%q on %q: matcher %v, regex %v (%d branches)", expr, text, got, want, len(m.parts))
		}
	})
}

func classifyWithoutPrefilter(g *Guard, typ string, status int, message string) int32 {
	for i, p := range g.patterns {
		if status != 0 && slices.Contains(p.statuses, status) || slices.ContainsFunc(p.types, func(s string) bool { return strings.EqualFold(s, typ) }) {
			return int32(i)
		}
	}
	text := patternText(message)
	for i, p := range g.patterns {
		if p.re != nil && p.re.whole.MatchString(text) && (p.exclude == nil || !p.exclude.MatchString(text)) {
			return int32(i)
		}
	}
	return -1
}

func FuzzRequiredLiterals(f *testing.F) {
	f.Add(`(?i)rate[ _-]?limits?\s+(?:reached|exceeded)`, "Rate Limit reached")
	f.Add(`\bfoo|bar\d`, "xbar1")
	for _, p := range builtins {
		f.Add("(?i)"+p.Regex, "SyntaxError: Unexpected token")
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		re, err := regexp.Compile(expr)
		if err != nil || !isASCII(text) || !re.MatchString(text) {
			return
		}
		if lits := requiredLiterals(expr); !containsAny(strings.ToLower(text), lits) {
			t.Fatalf("%q matches %q but the prefilter %q rejects it", expr, text, lits)
		}
	})
}

func FuzzExactLiterals(f *testing.F) {
	f.Add(`^(?:FAIL|[Ee]rror)\b`, "Error: x")
	f.Add(`(?i:exit) code (\d+)`, "EXIT code 1")
	for _, r := range toolRules {
		if r.re != nil {
			f.Add(r.re.String(), "Traceback (most recent call last):")
		}
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		re, err := regexp.Compile(expr)
		if err != nil || !re.MatchString(text) {
			return
		}
		if lits := exactLiterals(expr); !containsAny(text, lits) {
			t.Fatalf("%q matches %q but the prefilter %q rejects it", expr, text, lits)
		}
	})
}
