package guard

import (
	"reflect"
	"testing"
)

func TestPatternsAsConfigured(t *testing.T) {
	extra := PatternConfig{Name: "FLAKY NETWORK", Regex: `ECONNRESET|socket hang up`, Types: []string{"network_error"}, Fix: "Retry once, then report."}
	g, err := New(Config{
		Patterns:        []PatternConfig{extra, {Name: "request timeout expired", Fix: "Shorter requests."}},
		DisableBuiltins: []string{"BANNED CALL EXHAUSTION"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := g.Patterns()
	if len(got) != len(builtins) { // one added, one disabled
		t.Fatalf("%d patterns, want %d", len(got), len(builtins))
	}
	if !reflect.DeepEqual(got[0], extra) || IsBuiltin(got[0].Name) {
		t.Fatalf("first pattern %+v, want the configured one", got[0])
	}
	for _, p := range got {
		switch p.Name {
		case "BANNED CALL EXHAUSTION":
			t.Fatal("a disabled built-in is listed")
		case "REQUEST TIMEOUT EXPIRED":
			if p.Fix != "Shorter requests." || p.Regex == "" || !IsBuiltin(p.Name) {
				t.Fatalf("overridden built-in: %+v", p)
			}
		}
		if len(p.Regex) > 4 && p.Regex[:4] == "(?i)" {
			t.Fatalf("%s: regex %q carries the flag the guard adds", p.Name, p.Regex)
		}
	}
	// What is listed classifies as the guard does.
	if name, ok := g.Classify("tool_error", 0, "read ECONNRESET"); !ok || name != "FLAKY NETWORK" {
		t.Fatalf("Classify = %q, %v", name, ok)
	}
	got[0].Types[0] = "changed"
	if g.Patterns()[0].Types[0] != "network_error" {
		t.Fatal("Patterns shares its slices with the guard")
	}
}
