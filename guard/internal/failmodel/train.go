package failmodel

import (
	"math"
	"path/filepath"
	"slices"

	"github.com/scarproxy/scarproxy/guard/internal/corpus"
)

// Example is a labelled output: its features, each once, and whether the
// command that printed it failed.
type Example struct {
	Features []uint32
	Failed   bool
}

// NewExample gathers the features of text (see Features), each once.
func NewExample(text string, failed bool) Example {
	var fs []uint32
	Features(text, func(f uint32) { fs = append(fs, f) })
	slices.Sort(fs)
	return Example{Features: slices.Compact(fs), Failed: failed}
}

// Training settings: stochastic gradient descent on the logistic loss
// with an L2 penalty, examples in an order drawn from a fixed seed, the
// weights averaged over the epochs from averageFrom on (the mean of the
// weights after each of them): an average of the last steps moves less
// with the order of the examples than the last step does, and its scores
// are less sure of themselves.
const (
	epochs      = 15
	averageFrom = epochs / 2
	rate        = 0.1
	l2          = 1e-4
	seed        = 0x9e3779b97f4a7c15
)

// Train fits a model to the examples. The same examples in the same order
// give the same weights, but for the last bit of math.Exp, which some
// processors compute otherwise: Quantize hides that almost always.
// Examples that are data (see Model.Score) are trained on too: the model
// never scores them, but their words still weigh against the words they
// share with failures.
func Train(examples []Example) []float64 {
	w := make([]float64, Dims)
	sum := make([]float64, Dims)
	order := make([]int, len(examples))
	for i := range order {
		order[i] = i
	}
	rng := uint64(seed)
	for epoch := range epochs {
		for i := len(order) - 1; i > 0; i-- {
			rng = xorshift(rng)
			j := int(rng % uint64(i+1))
			order[i], order[j] = order[j], order[i]
		}
		for _, i := range order {
			ex := &examples[i]
			z := 0.0
			for _, f := range ex.Features {
				z += w[f]
			}
			g := 1 / (1 + math.Exp(-z))
			if ex.Failed {
				g--
			}
			for _, f := range ex.Features {
				// The conversions keep the compiler from fusing a
				// multiplication and an addition into one instruction
				// where the processor has it (arm64, amd64 v3): the
				// weights would round otherwise.
				w[f] -= float64(rate * (g + float64(l2*w[f])))
			}
		}
		if epoch >= averageFrom {
			for i, v := range w {
				sum[i] += v
			}
		}
	}
	for i := range sum {
		sum[i] /= epochs - averageFrom
	}
	return sum
}

// xorshift is the next state of a 64-bit xorshift generator: the order
// of the examples, the same on every machine and Go release.
func xorshift(x uint64) uint64 {
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	return x
}

// Quantize stores weights as bytes: each is rounded to the nearest
// multiple of the largest weight's magnitude over 127.
func Quantize(w []float64) *Model {
	top := 0.0
	for _, v := range w {
		top = math.Max(top, math.Abs(v))
	}
	m := &Model{Scale: top / 127}
	if top == 0 {
		return m
	}
	for i, v := range w {
		m.Weights[i] = int8(math.Round(v / m.Scale))
	}
	return m
}

// ReadParts reads the labelled entries of the named parts of a corpus
// directory (dir/PART.txtar, see package corpus) as examples.
func ReadParts(dir string, parts []string) ([]Example, error) {
	var examples []Example
	for _, p := range parts {
		files, err := corpus.Read(filepath.Join(dir, p+".txtar"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if failed, ok := f.Failed(); ok {
				examples = append(examples, NewExample(f.Data, failed))
			}
		}
	}
	return examples, nil
}
