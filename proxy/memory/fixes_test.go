package memory

import (
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/store"
)

func TestFixKey(t *testing.T) {
	tests := []struct {
		name, pattern, fingerprint, tool, want string
	}{
		{"named pattern", "SYNTAX COMPLIANCE ERROR", "0123456789abcdef", "run_tests", "p:run_tests|SYNTAX COMPLIANCE ERROR"},
		{"named pattern without fingerprint", "API RATE LIMIT TRIGGER", "", "fetch", "p:fetch|API RATE LIMIT TRIGGER"},
		{"repeated error", guard.RepeatedPattern, "0123456789abcdef", "shell", "f:shell|0123456789abcdef"},
		{"no pattern", "", "fedcba9876543210", "shell", "f:shell|fedcba9876543210"},
		{"other tool", "SYNTAX COMPLIANCE ERROR", "", "lint", "p:lint|SYNTAX COMPLIANCE ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fixKey(tt.pattern, tt.fingerprint, tt.tool); got != tt.want {
				t.Fatalf("fixKey(%q, %q, %q) = %q, want %q", tt.pattern, tt.fingerprint, tt.tool, got, tt.want)
			}
		})
	}
	// The same failure of two tools, and the two kinds of key, never meet.
	keys := map[string]bool{}
	for _, k := range []string{
		fixKey("P", "0123456789abcdef", "a"), fixKey("P", "0123456789abcdef", "b"),
		fixKey(guard.RepeatedPattern, "0123456789abcdef", "a"), fixKey(guard.RepeatedPattern, "0123456789abcdef", "b"),
	} {
		if keys[k] {
			t.Fatalf("key %q made twice", k)
		}
		keys[k] = true
	}
}

func TestMatchFixes(t *testing.T) {
	at := func(min int) time.Time { return time.Date(2026, 1, 1, 0, min, 0, 0, time.UTC) }
	fx := func(id, pattern, fp string, min int) store.Fix {
		return store.Fix{ID: id, Pattern: pattern, Fingerprint: fp, Tool: "t", Updated: at(min)}
	}
	const syntax, rate = "SYNTAX COMPLIANCE ERROR", "API RATE LIMIT TRIGGER"
	fixes := []store.Fix{
		fx("a", syntax, "fp1", 1),
		fx("b", guard.RepeatedPattern, "fp2", 5),
		fx("c", syntax, "fp3", 3),
		fx("d", rate, "fp1", 2),
		fx("e", guard.RepeatedPattern, "fp1", 4),
		fx("f", syntax, "fp4", 3), // the same Updated as c: the higher ID first
		fx("a", syntax, "fp1", 1), // listed twice: returned once
	}
	tests := []struct {
		name, pattern, fingerprint, want string
	}{
		{"fingerprint first, then pattern, each newest first", syntax, "fp1", "e,d,a,f,c"},
		{"pattern only", syntax, "", "f,c,a"},
		{"pattern and an unknown fingerprint", syntax, "nope", "f,c,a"},
		{"repeated error matches on fingerprint only", guard.RepeatedPattern, "fp2", "b"},
		{"repeated error never on the label alone", guard.RepeatedPattern, "", ""},
		{"no pattern, fingerprint", "", "fp1", "e,d,a"},
		{"nothing", "", "", ""},
		{"unknown pattern", "OTHER", "fp9", ""},
		{"fingerprint of a fix of the same pattern listed once", rate, "fp1", "e,d,a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			for _, f := range MatchFixes(fixes, tt.pattern, tt.fingerprint) {
				ids = append(ids, f.ID)
			}
			if got := strings.Join(ids, ","); got != tt.want {
				t.Fatalf("MatchFixes(%q, %q) = %s, want %s", tt.pattern, tt.fingerprint, got, tt.want)
			}
		})
	}
	if got := MatchFixes(nil, syntax, "fp1"); len(got) != 0 {
		t.Fatalf("MatchFixes(nil) = %v", got)
	}
}
