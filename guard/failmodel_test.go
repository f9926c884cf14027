package guard

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard/internal/failmodel"
)

// modelHeldOut are the parts the failure model must never be trained on:
// the blind batches it is measured on.
var modelHeldOut = []string{"corpus_heldout14", "corpus_heldout15", "corpus_heldout18", "corpus_heldout19", "corpus_reads_heldout"}

// modelJoined are the batches built after the model that joined its
// training once measured. Every batch from the fourteenth on is in one of
// the two lists.
var modelJoined = []string{"corpus_heldout16", "corpus_heldout17"}

// The embedded weights are the ones the training parts give (go generate
// in guard/internal/failmodel writes them), and no held-out part is among
// those parts. Weights may differ by one step in a few places: math.Exp's
// last bit is not the same on every processor.
func TestFailModelWeights(t *testing.T) {
	for _, p := range modelHeldOut {
		if slices.Contains(failmodel.TrainingParts, p) {
			t.Errorf("the failure model is trained on %s, a held-out part", p)
		}
	}
	files, _ := filepath.Glob("testdata/corpus_heldout*.txtar")
	for _, f := range files {
		part := strings.TrimSuffix(filepath.Base(f), ".txtar")
		n, _ := strconv.Atoi(strings.TrimPrefix(part, "corpus_heldout"))
		switch {
		case n < 14:
		case slices.Contains(failmodel.TrainingParts, part) && !slices.Contains(modelJoined, part):
			t.Errorf("%s joined the failure model's training without being named in modelJoined (measured once first?)", part)
		case !slices.Contains(failmodel.TrainingParts, part) && !slices.Contains(modelHeldOut, part):
			t.Errorf("%s is neither held out from the failure model nor trained on: name it in modelHeldOut", part)
		}
	}
	ex, err := failmodel.ReadParts("testdata", failmodel.TrainingParts)
	if err != nil {
		t.Fatal(err)
	}
	m := failmodel.Quantize(failmodel.Train(ex))
	d := failmodel.Default
	if r := m.Scale / d.Scale; r < 0.999999 || r > 1.000001 {
		t.Fatalf("scale %v, embedded %v: run go generate in guard/internal/failmodel", m.Scale, d.Scale)
	}
	differ := 0
	for i := range m.Weights {
		switch diff := int(m.Weights[i]) - int(d.Weights[i]); {
		case diff == 0:
		case diff == 1 || diff == -1:
			differ++
		default:
			t.Fatalf("weight %d is %d, embedded %d: run go generate in guard/internal/failmodel", i, m.Weights[i], d.Weights[i])
		}
	}
	if differ > failmodel.Dims/1000 {
		t.Errorf("%d weights differ from the embedded ones", differ)
	}
}

// modelVerdict is how ToolFailed reads an output with the rules alone, and
// whether model, with no rule deciding, reads it as a failure (the text it
// scores is the one ToolFailed would: trimmed, unwrapped, its escapes and
// log prefixes taken out).
func modelVerdict(m *failmodel.Model, text string) (rules, model bool) {
	rules, decided := judge(text, nil)
	if decided {
		return rules, false
	}
	model, _ = judge(text, m)
	return false, model
}

// Each held-out batch among the training parts, left out of the training:
// what the model, at its threshold, adds to the rules there. The figures
// the threshold was chosen from (logged): on the tool batches, 25 of the
// rules' 223 misses caught and 4 of 1,160 successes flagged (the lowest
// threshold that flags at most 1 in 250); on the file reads, 32 of 913
// flagged by a model that never saw one (the gate on data shapes alone),
// against 1 of 954 held-out reads by the model trained on them.
func TestFailModelLeftOut(t *testing.T) {
	var missed, caught, oks, flagged, reads, readsFlagged int
	for _, part := range failmodel.TrainingParts {
		if !strings.HasPrefix(part, "corpus_heldout") && part != "corpus_reads" {
			continue
		}
		var rest []string
		for _, p := range failmodel.TrainingParts {
			if p != part {
				rest = append(rest, p)
			}
		}
		ex, err := failmodel.ReadParts("testdata", rest)
		if err != nil {
			t.Fatal(err)
		}
		m := failmodel.Quantize(failmodel.Train(ex))
		for _, f := range parseTxtar(t, "testdata/"+part+".txtar") {
			rules, model := modelVerdict(m, f.data)
			switch {
			case part == "corpus_reads":
				reads++
				if model {
					readsFlagged++
				}
			case strings.HasPrefix(f.name, "fail/"):
				if !rules {
					missed++
					if model {
						caught++
					}
				}
			default:
				if !rules {
					oks++
					if model {
						flagged++
						t.Logf("%s: %s flagged", part, f.name)
					}
				}
			}
		}
	}
	t.Logf("tool batches left out: %d of the rules' %d misses caught, %d of %d successes flagged; file reads left out: %d of %d flagged", caught, missed, flagged, oks, readsFlagged, reads)
	if caught < 24 || flagged*250 > oks || readsFlagged > 34 {
		t.Errorf("left out: %d caught (want at least 24), %d of %d successes flagged (at most 1 in 250), %d reads flagged (at most 34)", caught, flagged, oks, readsFlagged)
	}
}

// Outputs that show data and quote failures: few read as failures, in
// the tuning part and in the held-out one.
func TestToolFailedReads(t *testing.T) {
	for _, c := range []struct {
		part       string
		min, flags int
	}{{"corpus_reads", 900, 13}, {"corpus_reads_heldout", 900, 15}} {
		total, by := scoreCorpus(t, "testdata/"+c.part+".txtar")
		logScore(t, c.part, total, by)
		if total.oks < c.min || total.fails != 0 {
			t.Errorf("%s: %d successes and %d failures; want at least %d and none", c.part, total.oks, total.fails, c.min)
		}
		if total.flagged > c.flags {
			t.Errorf("%s: %d flagged, want at most %d: %v", c.part, total.flagged, c.flags, total.wrong)
		}
	}
}

// On the batches built after the rules they were measured with, ToolFailed
// catches failures the rules alone miss: the figures of the failure model
// as trained now, at least.
func TestFailModelCatches(t *testing.T) {
	for _, c := range []struct {
		part          string
		rules, with   int // failures caught
		maxNewFlagged int
	}{
		{"corpus_heldout14", 114, 125, 0},
		{"corpus_heldout15", 200, 212, 0},
		{"corpus_heldout18", 202, 210, 1},
		{"corpus_heldout19", 140, 144, 1},
	} {
		caught, alone, flagged := 0, 0, 0
		for _, f := range parseTxtar(t, "testdata/"+c.part+".txtar") {
			rules, _ := judge(f.data, nil)
			both := ToolFailed(f.data)
			if strings.HasPrefix(f.name, "fail/") {
				if rules {
					alone++
				}
				if both {
					caught++
				}
			} else if both && !rules {
				flagged++
			}
		}
		t.Logf("%s: the rules alone catch %d, with the model %d; the model flags %d more", c.part, alone, caught, flagged)
		if alone < c.rules || caught < c.with || flagged > c.maxNewFlagged {
			t.Errorf("%s: %d caught alone (want at least %d), %d with the model (at least %d), %d newly flagged (at most %d)", c.part, alone, c.rules, caught, c.with, flagged, c.maxNewFlagged)
		}
	}
}
