package failmodel

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func featuresOf(text string) []uint32 { return NewExample(text, false).Features }

// An output's features are its lines' words in lower case, each line's
// first word, the words a colon follows and adjacent pairs; digits and
// punctuation part words and are not features.
func TestFeatures(t *testing.T) {
	got := featuresOf("Error: file 42 not-found\n\n  second LINE\n")
	want := []uint32{offsetFeature,
		feature(kindWord, "error"), feature(kindFirst, "error"), feature(kindColon, "error"),
		feature(kindWord, "file"), pair("error", "file"),
		feature(kindWord, "not"), pair("file", "not"),
		feature(kindWord, "found"), pair("not", "found"),
		feature(kindWord, "second"), feature(kindFirst, "second"),
		feature(kindWord, "line"), pair("second", "line"),
		countFeature("lines", 2),
	}
	var shapes [nShapes]int
	lineShapes("Error: file 42 not-found", &shapes)
	lineShapes("  second LINE", &shapes)
	for k, n := range shapes {
		want = append(want, countFeature(shapeNames[k], n))
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(got, want) {
		t.Errorf("features = %v, want %v", got, want)
	}
	if a, b := featuresOf("ERROR: X"), featuresOf("error: x"); !slices.Equal(a, b) {
		t.Error("features depend on case")
	}
	if a, b := featuresOf("error: x"), featuresOf("error x"); slices.Equal(a, b) {
		t.Error("a word before a colon is no feature of its own")
	}
}

// The model reads an output's last MaxLines lines that are not blank, and
// the first maxLine bytes of each.
func TestFeaturesReadTheEnd(t *testing.T) {
	var b strings.Builder
	b.WriteString("alpha\n")
	for i := range MaxLines {
		fmt.Fprintf(&b, "line %d\n\n", i)
	}
	if slices.Contains(featuresOf(b.String()), feature(kindWord, "alpha")) {
		t.Error("a line before the last MaxLines was read")
	}
	b.WriteString("beta\n")
	if !slices.Contains(featuresOf(b.String()), feature(kindWord, "beta")) {
		t.Error("the last line was not read")
	}
	long := strings.Repeat("x ", maxLine/2) + "gamma"
	if slices.Contains(featuresOf(long), feature(kindWord, "gamma")) {
		t.Error("a word after a line's first maxLine bytes was read")
	}
}

func TestLineShapes(t *testing.T) {
	for _, c := range []struct {
		line string
		want []int
	}{
		{"plain words", nil},
		{"  two spaces", []int{shapeIndented}},
		{"\tfunc f() {", []int{shapeIndented, shapeDeep, shapeCode}},
		{"x := 1", []int{shapeCode}},
		{"#!/bin/sh -e", []int{shapeComment, shapeCode}},
		{"+added line", []int{shapeDiff}},
		{"@@ -1,2 +1,2 @@", []int{shapeDiff}},
		{"# a heading", []int{shapeComment}},
		{"src/a.go:12:\treturn err", []int{shapePlace}},
		{"src/a.go:12:3: undefined: x", []int{shapePlace}},
		{"a.go: no line", nil},
		{`say "hi"`, []int{shapeQuote}},
		{"```go", []int{shapeFence}},
		{`  File "a.py", line 3, in <module>`, []int{shapeIndented, shapeFrame, shapeQuote}},
	} {
		var got [nShapes]int
		lineShapes(c.line, &got)
		var want [nShapes]int
		for _, k := range c.want {
			want[k]++
		}
		if got != want {
			t.Errorf("lineShapes(%q) = %v, want %v", c.line, got, want)
		}
	}
}

// A feature counts once however often it occurs; a line of code, of a
// diff, a search's hit, a fence or a traceback's frame makes the output
// data.
func TestScore(t *testing.T) {
	m := &Model{Scale: 0.5}
	m.Weights[feature(kindWord, "boom")] = 10
	m.Weights[offsetFeature] = -2
	if s, data := m.Score("boom boom\nboom"); s != 4 || data {
		t.Errorf("Score = %v, %v; want 4, false", s, data)
	}
	for _, text := range []string{"boom;", "+boom", "a.go:3: boom", "```\nboom", `File "a.py", line 2`} {
		if _, data := m.Score(text); !data {
			t.Errorf("Score(%q) is not data", text)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	m := &Model{Scale: 0.125}
	m.Weights[3], m.Weights[Dims-1] = -128, 127
	got, ok := Decode(m.Encode())
	if !ok || *got != *m {
		t.Fatalf("Decode(Encode(m)) = %v, %v", got.Scale, ok)
	}
	if _, ok := Decode(m.Encode()[1:]); ok {
		t.Error("Decode took bytes of another length")
	}
	if Default.Scale <= 0 {
		t.Error("the embedded model has no scale")
	}
}

func TestQuantize(t *testing.T) {
	w := make([]float64, Dims)
	w[1], w[2], w[3] = 2.54, -1.0, 0.009
	m := Quantize(w)
	if m.Scale != 0.02 || m.Weights[1] != 127 || m.Weights[2] != -50 || m.Weights[3] != 0 {
		t.Errorf("Quantize = scale %v, weights %v %v %v", m.Scale, m.Weights[1], m.Weights[2], m.Weights[3])
	}
	if m := Quantize(make([]float64, Dims)); m.Scale != 0 {
		t.Errorf("Quantize of zeros: scale %v", m.Scale)
	}
}

// Trained on outputs where one word tells failures, the model scores an
// unseen output with that word above one without it.
func TestTrainLearnsTheWord(t *testing.T) {
	var ex []Example
	for i := range 40 {
		ex = append(ex, NewExample(fmt.Sprintf("step %d kaput", i), true), NewExample(fmt.Sprintf("step %d done", i), false))
	}
	m := Quantize(Train(ex))
	failed, _ := m.Score("other kaput")
	fine, _ := m.Score("other done")
	if !(failed > 0 && fine < 0) {
		t.Errorf("scores %v (kaput), %v (done): want > 0 and < 0", failed, fine)
	}
	if again := Quantize(Train(ex)); *again != *m {
		t.Error("the same examples trained twice give other weights")
	}
	if math.IsNaN(m.Scale) {
		t.Error("scale is NaN")
	}
}
