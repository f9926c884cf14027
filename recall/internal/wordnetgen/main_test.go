package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestBuild(t *testing.T) {
	tests := []struct {
		name string
		min  int
		want [][]string
	}{
		// halt's most frequent sense is arrest's, not stop's; pointer's
		// sense under computer science wins over its most counted one;
		// payer is a person, not the act of paying; shop and store tie on
		// their counts; rare and seldom are counted nowhere.
		{"least count 1", 1, [][]string{{"cursor", "pointer"}, {"halt", "arrest"}, {"pay", "payment"}, {"shop", "store"}}},
		// Senses under computer science are kept whatever their counts.
		{"least count 5", 5, [][]string{{"cursor", "pointer"}, {"shop", "store"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := build(filepath.Join("testdata", "dict"), tt.min)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("build(min %d) = %v, want %v", tt.min, got, tt.want)
			}
		})
	}
}

func TestBuildRejectsABrokenDatabase(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"data.noun", "data.verb", "index.noun", "index.verb", "cntlist.rev"} {
		b, err := os.ReadFile(filepath.Join("testdata", "dict", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "index.noun" {
			b = append(b, "ghost n 1 0 1 0 00000099\n"...)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := build(dir, 1); err == nil {
		t.Fatal("an index naming a synset the data lacks was read without error")
	}
}

// TestTableIsCurrent regenerates the table from the WordNet database
// installed (WORDNET_DICT, else /usr/share/wordnet) and compares it with
// the one recall holds. It is skipped only when WORDNET_DICT is unset and
// WordNet is not installed; .ci/run installs it and sets WORDNET_DICT.
func TestTableIsCurrent(t *testing.T) {
	dict := os.Getenv("WORDNET_DICT")
	if dict == "" {
		dict = "/usr/share/wordnet"
		if _, err := os.Stat(filepath.Join(dict, "data.noun")); err != nil {
			t.Skipf("WordNet 3.0 is not installed in %s and WORDNET_DICT is unset", dict)
		}
	}
	groups, err := build(dict, defaultMin)
	if err != nil {
		t.Fatal(err)
	}
	want, err := render(groups, defaultMin)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("..", "..", "wordnet_table.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("recall/wordnet_table.go is not what WordNet gives: regenerate it (go run ./recall/internal/wordnetgen)")
	}
}
