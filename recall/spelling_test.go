package recall

import (
	"slices"
	"testing"
)

// British and American spellings of one word index as one term; words
// that only end alike are left alone.
func TestBritishSpellings(t *testing.T) {
	same := []struct{ gb, us string }{
		{"normalise", "normalize"},
		{"normalised", "normalized"},
		{"normalising", "normalizing"},
		{"visualisation", "visualization"},
		{"organisation", "organization"},
		{"tokeniser", "tokenizer"},
		{"analyse", "analyze"},
		{"analysed", "analyzed"},
		{"colour", "color"},
		{"colours", "colors"},
		{"behaviour", "behavior"},
		{"favourite", "favorite"},
		{"centre", "center"},
		{"catalogue", "catalog"},
		{"dialogue", "dialog"},
		{"licence", "license"},
		{"grey", "gray"},
		{"programme", "program"},
		{"cancelled", "canceled"},
		{"modelling", "modeling"},
		{"authorisation", "authorization"},
		{"memoise", "memoize"},
	}
	for _, tc := range same {
		if a, b := termsOf(tc.gb), termsOf(tc.us); len(a) != 1 || !slices.Equal(a, b) {
			t.Errorf("%q -> %v, %q -> %v: want one and the same term", tc.gb, a, tc.us, b)
		}
	}
	for _, w := range []string{"promise", "exercise", "enterprise", "noise", "analysis", "emphasis", "precise", "raise", "advise", "devise"} {
		if got := americanSpelling(w); got != w {
			t.Errorf("americanSpelling(%q) = %q, want the word itself", w, got)
		}
	}
	// Every American form differs from its British one.
	for gb, us := range americanForms {
		if gb == us {
			t.Errorf("%q maps to itself", gb)
		}
	}
}
