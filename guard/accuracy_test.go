package guard

import (
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

// labelOf names the patterns by the LABEL part of labels.txtar's names.
var labelOf = map[string]string{
	"syntax": syntax, "timeout": timeout, "rate": rate, "diff": diff,
	"esm": esm, "path": path, "banned": banned, "route": route, "none": "",
}

// labelled is one failure of labels.txtar.
type labelled struct {
	name, label, family, group string
	key                        string // what the guard counts it under: its pattern, or its fingerprint
}

// Minimum accuracies on labels.txtar (the issue measured 0.881 and 0.869
// on real texts before).
const (
	minLabelAccuracy  = 0.95
	minRepeatAccuracy = 0.95
)

// TestLabelAccuracy measures, on failures labelled by hand, how often the
// guard gives a failure its label, and how often it counts two failures
// of one tool as one repeated error exactly when they are (the same
// error, or errors of one pattern).
func TestLabelAccuracy(t *testing.T) {
	g := mustGuard(t, DefaultConfig())
	var items []labelled
	right := 0
	for _, f := range parseTxtar(t, "testdata/labels.txtar") {
		parts := strings.Split(f.name, "/")
		want, known := labelOf[parts[0]]
		if len(parts) != 4 || !known {
			t.Fatalf("file %q is not named LABEL/FAMILY/GROUP/N", f.name)
		}
		// The proxy records a tool's failure as "NAME: output".
		msg := "Bash: " + strings.TrimRight(f.data, "\n")
		got, ok := g.Classify(store.TypeToolError, 0, msg)
		it := labelled{name: f.name, label: parts[0], family: parts[1], group: parts[2], key: "p:" + got}
		if !ok {
			it.key = "f:" + Fingerprint(msg)
		}
		if got == want {
			right++
		} else {
			t.Logf("label: %s got %q", f.name, got)
		}
		items = append(items, it)
	}
	joined, same, apart, other := repeatPairs(t, items)
	labelAcc := float64(right) / float64(len(items))
	repeatAcc := float64(joined+apart) / float64(same+other)
	t.Logf("label accuracy %.3f (%d of %d); repeat accuracy %.3f: %d of %d repeats counted as one, %d of %d different errors apart",
		labelAcc, right, len(items), repeatAcc, joined, same, apart, other)
	if labelAcc < minLabelAccuracy || repeatAcc < minRepeatAccuracy {
		t.Errorf("label accuracy %.3f, repeat accuracy %.3f; want at least %.2f and %.2f", labelAcc, repeatAcc, minLabelAccuracy, minRepeatAccuracy)
	}
}

// repeatPairs compares every two failures of one family: same counts the
// pairs that are one repeated error (one group, or one pattern), joined
// those the guard counts as one; other and apart, likewise, the pairs of
// different errors and those it keeps apart.
func repeatPairs(t *testing.T, items []labelled) (joined, same, apart, other int) {
	for i, a := range items {
		for _, b := range items[i+1:] {
			if a.family != b.family {
				continue
			}
			truth := a.group == b.group || a.label == b.label && a.label != "none"
			counted := a.key == b.key
			switch {
			case truth:
				same++
				if counted {
					joined++
				} else {
					t.Logf("repeat: %s and %s counted apart", a.name, b.name)
				}
			default:
				other++
				if !counted {
					apart++
				} else {
					t.Logf("repeat: %s and %s counted as one", a.name, b.name)
				}
			}
		}
	}
	return joined, same, apart, other
}
