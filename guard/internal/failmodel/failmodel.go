// Package failmodel reads a tool's output as words and scores how much it
// reads as the output of a command that failed: a logistic regression over
// hashed features of each line (its words, its pairs of adjacent words,
// the word it opens with, the words a colon follows) and of the lines'
// shapes, trained on the labelled outputs of guard/testdata. It is the
// guard's second reader: the rules name the shapes of failures they know,
// and the model weighs the words of an output no rule decides, so that a
// tool no rule was written for is still read by the words every tool's
// failures share. It does not score text that holds a line of data (code,
// a diff, a search's hit), whose words quote errors more often than they
// report one.
//
// The weights are trained by mkweights (go generate) from the parts named
// in TrainingParts and embedded; a test in guard trains them again and
// checks that they are the ones embedded.
package failmodel

import (
	_ "embed"
	"encoding/binary"
	"math"
	"strings"
)

//go:generate go run ./mkweights

// Dims is the number of features: a feature is a hash of its kind and
// its words, taken modulo Dims.
const Dims = 1 << 16

// MaxLines is how many of an output's last lines the model reads, as its
// corpora keep them (the last 60 lines of a longer output).
const MaxLines = 60

// maxLine caps the bytes of a line the model reads.
const maxLine = 512

// TrainingParts are the parts of guard/testdata the weights are trained
// on: the tuning parts, the held-out batches whose misses rules have been
// written from, two batches measured once before they joined (16 and 17),
// the file reads that quote failures, and the machine's programs asked
// for their help, their version, an unknown option and a missing file
// (without them the model read a program's help as a failure one time in
// five). A batch left out of it is one the model never saw.
var TrainingParts = []string{
	"corpus_tune", "corpus_tune2", "corpus_tune3",
	"corpus_heldout", "corpus_heldout2", "corpus_heldout3", "corpus_heldout4",
	"corpus_heldout5", "corpus_heldout6", "corpus_heldout7", "corpus_heldout8",
	"corpus_heldout9", "corpus_heldout10", "corpus_heldout11", "corpus_heldout12",
	"corpus_heldout13", "corpus_heldout16", "corpus_heldout17", "corpus_reads",
	"corpus_flags",
}

// Feature kinds: each is hashed in before the words.
const (
	kindWord   = 'w' // a word
	kindFirst  = 's' // the word a line opens with
	kindColon  = 'c' // a word a colon follows ("error:")
	kindPair   = 'b' // two adjacent words of a line
	kindOffset = 'x' // every output: the model's offset
	kindShape  = 'p' // how many lines have a shape (see lineShapes), in buckets
)

// Line shapes: what a line looks like apart from its words. A file's
// text, a diff, a manual page or a search's hits quote errors in lines
// whose shapes a tool's own complaint seldom has.
const (
	shapeIndented = iota // opens with white space
	shapeDeep            // opens with four spaces or a tab, or more
	shapeCode            // holds a brace, a semicolon or an assignment, or is a script's #! line
	shapeDiff            // opens with +, - or @@
	shapeComment         // opens with #, // or *
	shapePlace           // opens with a path and a line number, as grep -n prints
	shapeQuote           // holds a quoted string
	shapeFence           // opens a fenced block (```)
	shapeFrame           // a frame of a Python traceback (File "...", line N)
	nShapes
)

// shapeNames name the shapes in their features.
var shapeNames = [nShapes]string{"indented", "deep", "code", "diff", "comment", "place", "quote", "fence", "frame"}

const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// fnvByte, fnvString and fnvLower are FNV-1a, 32 bits: features are the
// hash of their kind and their words.
func fnvByte(h uint32, c byte) uint32 { return (h ^ uint32(c)) * fnvPrime }

func fnvString(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return h
}

// fnvLower hashes s in lower case (s holds ASCII letters only).
func fnvLower(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		h = fnvByte(h, c)
	}
	return h
}

// feature is the feature of a word of a kind.
func feature(kind byte, word string) uint32 {
	return fnvLower(fnvByte(fnvOffset, kind), word) % Dims
}

// pair is the feature of two adjacent words.
func pair(prev, word string) uint32 {
	h := fnvLower(fnvByte(fnvOffset, kindPair), prev)
	return fnvLower(fnvByte(h, ' '), word) % Dims
}

// offsetFeature is the feature every output has.
var offsetFeature = fnvByte(fnvOffset, kindOffset) % Dims

// letter reports whether c is an ASCII letter: words are runs of them.
func letter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// Features calls add with every feature of the output text, once or more
// each: for each of its last MaxLines lines that are not blank (the first
// maxLine bytes of each), the line's words (runs of ASCII letters, in
// lower case), the word it opens with, each word a colon follows, and
// each two adjacent words; how many of those lines have each shape (see
// lineShapes) and how many there are, in buckets; and the offset every
// output has.
func Features(text string, add func(f uint32)) {
	var buf [MaxLines]string
	var shapes [nShapes]int
	lines, _ := lastLines(text, &buf, &shapes, false)
	features(lines, shapes, add)
}

// features is Features on lines already cut and their shapes counted.
func features(lines []string, shapes [nShapes]int, add func(f uint32)) {
	add(offsetFeature)
	for _, line := range lines {
		prev := ""
		for i := 0; i < len(line); {
			if !letter(line[i]) {
				i++
				continue
			}
			j := i
			for j < len(line) && letter(line[j]) {
				j++
			}
			w := line[i:j]
			add(feature(kindWord, w))
			if prev == "" {
				add(feature(kindFirst, w))
			} else {
				add(pair(prev, w))
			}
			if j < len(line) && line[j] == ':' {
				add(feature(kindColon, w))
			}
			prev, i = w, j
		}
	}
	add(countFeature("lines", len(lines)))
	for k, n := range shapes {
		add(countFeature(shapeNames[k], n))
	}
}

// countFeature is the feature of a count of lines: none, one, two or
// three, four to nine, ten or more.
func countFeature(name string, n int) uint32 {
	b := byte('0')
	switch {
	case n >= 10:
		b = '4'
	case n >= 4:
		b = '3'
	case n >= 2:
		b = '2'
	case n == 1:
		b = '1'
	}
	return fnvByte(fnvString(fnvByte(fnvOffset, kindShape), name), b) % Dims
}

// lineShapes counts the shapes line has, and reports whether it is a line
// of data: code, a diff's, a search's hit, a fence or a traceback's frame.
func lineShapes(line string, n *[nShapes]int) (data bool) {
	switch {
	case strings.HasPrefix(line, "    ") || line[0] == '\t':
		n[shapeIndented]++
		n[shapeDeep]++
	case line[0] == ' ':
		n[shapeIndented]++
	}
	t := strings.TrimLeft(line, " \t")
	if t == "" {
		return
	}
	switch {
	case strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~"):
		n[shapeFence]++
		data = true
	case strings.HasPrefix(t, `File "`) && strings.Contains(t, `", line `):
		n[shapeFrame]++
		data = true
	case t[0] == '#' || t[0] == '*' || strings.HasPrefix(t, "//"):
		n[shapeComment]++
	case line[0] == '+' || line[0] == '-' || strings.HasPrefix(line, "@@"):
		n[shapeDiff]++
		data = true
	}
	if strings.ContainsAny(t, "{};") || strings.Contains(t, " = ") || strings.Contains(t, ":=") || strings.HasPrefix(t, "#!/") {
		n[shapeCode]++
		data = true
	}
	if i := strings.IndexByte(t, '"'); i >= 0 && strings.IndexByte(t[i+1:], '"') >= 0 {
		n[shapeQuote]++
	}
	if placeLine(t) {
		n[shapePlace]++
		data = true
	}
	return data
}

// placeLine reports whether t opens with a path, a colon, a line number
// and a colon.
func placeLine(t string) bool {
	i := strings.IndexByte(t, ':')
	if i <= 0 || strings.IndexByte(t[:i], ' ') >= 0 {
		return false
	}
	j := i + 1
	for j < len(t) && '0' <= t[j] && t[j] <= '9' {
		j++
	}
	return j > i+1 && j < len(t) && t[j] == ':'
}

// lastLines puts the last MaxLines lines of text that are not blank in
// buf, the last first, each cut to its first maxLine bytes, and counts
// their shapes. Data says one of them is a line of data (see Score); with
// stop, it stops there.
func lastLines(text string, buf *[MaxLines]string, shapes *[nShapes]int, stop bool) (lines []string, data bool) {
	n := 0
	for end := len(text); end > 0 && n < MaxLines; {
		start := strings.LastIndexByte(text[:end], '\n') + 1
		if l := text[start:end]; strings.TrimSpace(l) != "" {
			if len(l) > maxLine {
				l = l[:maxLine]
			}
			buf[n] = l
			n++
			if lineShapes(l, shapes) {
				if data = true; stop {
					return buf[:n], true
				}
			}
		}
		end = start - 1
	}
	return buf[:n], data
}

// Model is a set of trained weights, one a feature, stored as bytes: a
// weight is its byte (a signed int8) times Scale.
type Model struct {
	Scale   float64
	Weights [Dims]int8
}

// set is a set of features, one bit each.
type set [Dims / 64]uint64

// Score is the model's log-odds that text is the output of a command that
// failed: the sum of the weights of its features, each counted once. Data
// says whether a line the model reads is one of data, not of messages: a
// line of code, of a diff, or a search's hit, whose words quote errors more
// often than they report one, a fence, or a frame of a traceback (shapes
// the rules read themselves: when they leave an output that holds one
// undecided, they judged its failure quoted or logged and went on from);
// the model is not to be trusted on such text, and does not score it.
func (m *Model) Score(text string) (score float64, data bool) {
	var buf [MaxLines]string
	var shapes [nShapes]int
	lines, data := lastLines(text, &buf, &shapes, true)
	if data {
		return 0, true
	}
	var seen set
	sum := 0
	features(lines, shapes, func(f uint32) {
		if seen[f>>6]&(1<<(f&63)) == 0 {
			seen[f>>6] |= 1 << (f & 63)
			sum += int(m.Weights[f])
		}
	})
	return float64(sum) * m.Scale, false
}

//go:embed weights.bin
var weights []byte

// Default is the model trained on TrainingParts (see mkweights).
var Default = mustDecode(weights)

// Encode writes m as bytes: its scale (a float64, little endian), then a
// byte a weight.
func (m *Model) Encode() []byte {
	b := binary.LittleEndian.AppendUint64(nil, math.Float64bits(m.Scale))
	for _, w := range m.Weights {
		b = append(b, byte(w))
	}
	return b
}

// Decode reads what Encode wrote.
func Decode(b []byte) (*Model, bool) {
	if len(b) != 8+Dims {
		return nil, false
	}
	m := &Model{Scale: math.Float64frombits(binary.LittleEndian.Uint64(b))}
	for i, w := range b[8:] {
		m.Weights[i] = int8(w)
	}
	return m, true
}

// mustDecode decodes the embedded weights; they are made for this
// package's dimensions, so any error is a build's.
func mustDecode(b []byte) *Model {
	m, ok := Decode(b)
	if !ok {
		panic("failmodel: weights.bin is not a model of this package's dimensions")
	}
	return m
}
