package recall

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

func TestWordNetEquivalences(t *testing.T) {
	tests := []struct{ a, b string }{
		{"cursor", "pointer"},
		{"shop", "store"},
		{"shops", "stores"},
		{"pay", "payment"},
		{"achieve", "attain"},
		{"accomplish", "fulfill"},
		{"programmer", "coder"},
	}
	for _, tt := range tests {
		t.Run(tt.a+"/"+tt.b, func(t *testing.T) {
			a, b := termsOf(tt.a), termsOf(tt.b)
			if !slices.Equal(a, b) {
				t.Errorf("%q -> %v, %q -> %v: want one term", tt.a, a, tt.b, b)
			}
		})
	}
}

// TestWordNetBothSides: a stored goal and a query are read with the same
// equivalences, whichever side holds which word.
func TestWordNetBothSides(t *testing.T) {
	tests := []struct{ goal, query string }{
		{"Draw a custom mouse pointer on the canvas", "draw a custom mouse cursor on the canvas"},
		{"Draw a custom mouse cursor on the canvas", "draw a custom mouse pointer on the canvas"},
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			ix := NewIndex()
			for i, g := range []string{tt.goal, "Add a dark theme to the settings page", "Cache the product list in Redis"} {
				ix.Put(store.Solution{ID: string(rune('a' + i)), Workspace: "w", Key: GoalKey(g), Goal: g, Approach: "Done.", Outcome: "Done.", Confidence: 0.9, Created: base, Updated: base})
			}
			ms := ix.Search(Query{Workspace: "w", Goal: tt.query, K: 1, MinSimilarity: DefaultMinSimilarity})
			if len(ms) != 1 || ms[0].Solution.ID != "a" || ms[0].Similarity < 0.9 {
				t.Fatalf("Search(%q) = %+v, want %q at 0.9 or more", tt.query, ms, tt.goal)
			}
		})
	}
}

// TestWordNetLeavesTheVocabularyAlone: WordNet gives no term to a word the
// vocabulary names, nor to the other words of a WordNet group that holds
// one.
func TestWordNetLeavesTheVocabularyAlone(t *testing.T) {
	check := func(w string) {
		if term, ok := wordnetTerms[stemWord(w)]; ok {
			t.Errorf("vocabulary word %q read as WordNet's %q", w, term)
		}
	}
	vocabWords(check)
	for _, gs := range [][][]string{synonymGroups, vocabGroups} {
		for _, g := range gs {
			for _, w := range g {
				check(w)
			}
		}
	}
	for _, fam := range directionTable {
		for _, w := range append(slices.Clone(fam.one), fam.other...) {
			check(w)
		}
	}
	// Groups of the table that hold a vocabulary word: {client, guest,
	// node} (node is JavaScript's runtime here), {cpu, mainframe,
	// processor}, {disc, disk}.
	for _, w := range []string{"guest", "mainframe", "processor", "disc"} {
		if !slices.ContainsFunc(wordnetGroups, func(g []string) bool { return slices.Contains(g, w) }) {
			t.Fatalf("%q is in no group of the table: choose another example", w)
		}
		if term, ok := wordnetTerms[stemWord(w)]; ok {
			t.Errorf("%q read as %q: its group holds a vocabulary word", w, term)
		}
	}
}

// TestWordNetTable checks the generated table's shape: groups of two or
// more single words of at least three lowercase letters, sorted, each
// once.
func TestWordNetTable(t *testing.T) {
	if len(wordnetGroups) < 1000 {
		t.Fatalf("%d groups: the table looks truncated", len(wordnetGroups))
	}
	for i, g := range wordnetGroups {
		if len(g) < 2 {
			t.Errorf("group %v: fewer than two words", g)
		}
		for _, w := range g {
			if len(w) < 3 || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") != "" {
				t.Errorf("group %v: %q is not a plain word", g, w)
			}
		}
		if i > 0 && slices.Compare(wordnetGroups[i-1], g) >= 0 {
			t.Errorf("groups %v and %v out of order or repeated", wordnetGroups[i-1], g)
		}
	}
	if len(wordnetTerms) == 0 {
		t.Fatal("no WordNet term in use")
	}
}
