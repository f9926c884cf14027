package guard

import (
	"regexp"
	"slices"
	"strings"
	"testing"
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
	}
	for _, tc := range tests {
		got := requiredLiterals(tc.expr)
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("requiredLiterals(%q) = %q, want %q", tc.expr, got, want)
		}
	}
}

// The prefilter never changes a classification.
func TestPrefilterIsExact(t *testing.T) {
	g := mustGuard(t, DefaultConfig())
	for _, tc := range errorCorpus {
		got := g.classify(tc.typ, tc.status, tc.message)
		want := classifyWithoutPrefilter(g, tc.typ, tc.status, tc.message)
		if got.pat != want {
			t.Errorf("%s: prefiltered %d, full %d", tc.name, got.pat, want)
		}
	}
	for _, r := range redactions {
		if r.lits == nil {
			t.Errorf("redaction %q has no prefilter", r.name)
		}
	}
	for _, p := range g.patterns {
		if p.lits == nil {
			t.Errorf("pattern %q has no prefilter", p.name)
		}
	}
}

func classifyWithoutPrefilter(g *Guard, typ string, status int, message string) int32 {
	for i, p := range g.patterns {
		if status != 0 && slices.Contains(p.statuses, status) || slices.ContainsFunc(p.types, func(s string) bool { return strings.EqualFold(s, typ) }) {
			return int32(i)
		}
	}
	text := patternText(message)
	for i, p := range g.patterns {
		if p.re != nil && p.re.MatchString(text) && (p.exclude == nil || !p.exclude.MatchString(text)) {
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
