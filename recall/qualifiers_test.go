package recall

import (
	"math/bits"
	"testing"
)

// TestQualifierTables checks the qualifier tables on their own: every
// word names one kind of one category, and every phrase's qualifier is
// reached by a phrase of the vocabulary.
func TestQualifierTables(t *testing.T) {
	var all uint32
	for _, c := range qualCategories {
		if all&c != 0 {
			t.Errorf("category %#x overlaps another", c)
		}
		all |= c
	}
	for w, q := range qualWords {
		if bits.OnesCount32(q) != 1 || q&all == 0 {
			t.Errorf("%q names %#x: want one kind of one category", w, q)
		}
	}
	targets := map[string]bool{}
	for _, c := range phrases {
		targets[c] = true
	}
	for term, q := range qualPhrases {
		if !targets[term] {
			t.Errorf("qualifier term %q is no phrase's term", term)
		}
		if q == 0 {
			t.Errorf("qualifier term %q names no kind", term)
		}
	}
}

// TestQualifiersRead checks the qualifiers read from goals: the first of
// each category counts, words count as written, phrases by their term.
func TestQualifiersRead(t *testing.T) {
	tests := []struct {
		goal string
		want uint32
	}{
		{"Raise the open files limit of the service", qualWords["nofile"]},
		{"Raise the memory limit of the service", qualWords["memory"]},
		{"Run the suite serially because parallel runs share a database", qualWords["serially"]},
		{"Serialize the config to YAML", 0},
		{"Take an incremental backup of the disk", qualWords["incremental"] | qualWords["disk"]},
		{"Tag the named entities in the reviews", qualWords["ner"]},
		{"Add back-translation to the NLP pipeline before the image captions", qualWords["nlp"]},
	}
	for _, tc := range tests {
		if got := analyze(tc.goal, maxGoalRunes).lead.quals; got != tc.want {
			t.Errorf("%q: qualifiers %#x, want %#x", tc.goal, got, tc.want)
		}
	}
}
