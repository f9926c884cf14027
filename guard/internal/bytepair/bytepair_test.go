package bytepair

import (
	"strings"
	"testing"
)

// A text's set says no word it holds is missing, and turns away a word
// whose opening pair the text does not hold.
func TestMayHold(t *testing.T) {
	const text = "Error: ENOENT: no such file, open 'config/settings.json'"
	var s Set
	s.AddText(text)
	for i := range len(text) {
		for j := i; j <= len(text); j++ {
			if !s.MayHold(text[i:j]) {
				t.Fatalf("MayHold(%q) = false; the text holds it", text[i:j])
			}
		}
	}
	for _, w := range []string{"zq", "failed", "xyz"} {
		if strings.Contains(text, w) || s.MayHold(w) {
			t.Errorf("MayHold(%q) = true; the text holds none of its pairs", w)
		}
	}
	if s.Has(0, 0) || (&Set{}).MayHold("ab") {
		t.Error("an empty set holds a pair")
	}
}
