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
var modelHeldOut = []string{
	"corpus_heldout14", "corpus_heldout15", "corpus_heldout18", "corpus_heldout19",
	"corpus_heldout20", "corpus_heldout21", "corpus_heldout22", "corpus_heldout23",
	"corpus_heldout24", "corpus_heldout25", "corpus_heldout26", "corpus_heldout27",
	"corpus_heldout28", "corpus_heldout29", "corpus_heldout30", "corpus_heldout31",
	"corpus_reads_heldout", "corpus_flags_heldout",
}

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
// the threshold was chosen from (logged): on the tool batches, 38 of the
// rules' 223 misses caught and 4 of 1,160 successes flagged (the lowest
// threshold that flags at most 1 in 250); on the file reads, 6 of 913
// flagged by a model that never saw one, against 4 of 954 held-out reads
// by the model trained on them. The model before it was trained on the
// programs' help and errors with averaged weights: 25, 4 and 30. As the
// rules read more, fewer misses are left for the model: after the rules
// read from batches 21 to 29, 32 of their 197 misses.
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
	if caught < 32 || flagged*250 > oks || readsFlagged > 8 {
		t.Errorf("left out: %d caught (want at least 32), %d of %d successes flagged (at most 1 in 250), %d reads flagged (at most 8)", caught, flagged, oks, readsFlagged)
	}
}

// Outputs that show data and quote failures: few read as failures, in
// the tuning part and in the held-out one.
func TestToolFailedReads(t *testing.T) {
	for _, c := range []struct {
		part       string
		min, flags int
	}{{"corpus_reads", 900, 13}, {"corpus_reads_heldout", 900, 18}} {
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

// The file reads shown as Claude Code's Read shows a file (each line
// numbered, a tab, the line) and as opencode's read tool does (the path,
// the type and "1: line" in tags): none reads as a failure. Before these
// were read as a file's text, 10 of 913 and 29 of 954 did the first way,
// 0 and 2 the second.
func TestToolFailedReadsShown(t *testing.T) {
	shows := map[string]func(lines []string) string{
		"claude code's Read": func(lines []string) string {
			var b strings.Builder
			for i, l := range lines {
				b.WriteString(strconv.Itoa(i+1) + "\t" + l + "\n")
			}
			return b.String()
		},
		"opencode's read": func(lines []string) string {
			var b strings.Builder
			b.WriteString("<path>/home/dev/work/file</path>\n<type>file</type>\n<content>\n")
			for i, l := range lines {
				b.WriteString(strconv.Itoa(i+1) + ": " + l + "\n")
			}
			b.WriteString("\n(End of file - total " + strconv.Itoa(len(lines)) + " lines)\n</content>")
			return b.String()
		},
	}
	for _, part := range []string{"corpus_reads", "corpus_reads_heldout"} {
		reads := parseTxtar(t, "testdata/"+part+".txtar")
		if len(reads) < 900 {
			t.Errorf("%s: %d reads, want 900 or more", part, len(reads))
		}
		for how, show := range shows {
			for _, f := range reads {
				if ToolFailed(show(strings.Split(strings.TrimRight(f.data, "\n"), "\n"))) {
					t.Errorf("%s: %s, shown as %s, reads as a failure", part, f.name, how)
				}
			}
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
		{"corpus_heldout14", 126, 133, 0},
		{"corpus_heldout15", 210, 221, 0},
		{"corpus_heldout18", 206, 219, 2},
		{"corpus_heldout19", 149, 152, 1},
		{"corpus_heldout20", 146, 149, 0},
		{"corpus_heldout21", 158, 162, 1},
		{"corpus_heldout22", 166, 173, 0},
		{"corpus_heldout23", 161, 162, 3},
		{"corpus_heldout24", 199, 199, 1},
		{"corpus_heldout25", 188, 188, 2},
		{"corpus_heldout26", 213, 213, 1},
		{"corpus_heldout27", 210, 212, 2},
		{"corpus_heldout28", 187, 190, 0},
		{"corpus_heldout29", 201, 204, 1},
		{"corpus_heldout30", 220, 220, 0},
		{"corpus_heldout31", 186, 186, 1},
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

// Programs asked for their help, their version, an unknown option and a
// missing file, none of them trained on (corpus_flags_heldout): the model
// catches failures the rules miss and reads a program's help as the
// success it is. The model before it was trained on the other programs of
// the machine (corpus_flags) flagged 34 more successes than the rules (36
// of the 167 help texts were flagged in all); now 5 more (8 help texts),
// and it catches 17 more failures than the rules (7 before). The rules
// written from the twenty-first to twenty-third batches' misses catch 5
// more (a complaint about an option, then the synopsis).
func TestFailModelProgramsHelp(t *testing.T) {
	var fails, oks, alone, caught, flaggedAlone, flagged int
	for _, f := range parseTxtar(t, "testdata/corpus_flags_heldout.txtar") {
		rules, _ := judge(f.data, nil)
		both := ToolFailed(f.data)
		if strings.HasPrefix(f.name, "fail/") {
			fails++
			if rules {
				alone++
			}
			if both {
				caught++
			}
			continue
		}
		oks++
		if rules {
			flaggedAlone++
		}
		if both {
			flagged++
		}
	}
	t.Logf("programs' help and errors: %d of %d failures caught (the rules alone %d), %d of %d successes flagged (the rules alone %d)", caught, fails, alone, flagged, oks, flaggedAlone)
	if fails < 390 || oks < 310 || caught < 343 || flagged > 30 || flagged-flaggedAlone > 5 {
		t.Errorf("%d of %d caught (want at least 343 of 390), %d of %d flagged (at most 30, the model at most 5 more than the rules' %d)", caught, fails, flagged, oks, flaggedAlone)
	}
}
