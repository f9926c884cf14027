package quoted

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// probeText is one text of the injection probe.
type probeText struct {
	class, text string
	line        int
}

// readProbe reads ../testdata/injection_probe.txtar: its parts by name.
func readProbe(t testing.TB) map[string][]probeText {
	t.Helper()
	f, err := os.Open("../testdata/injection_probe.txtar")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parts := map[string][]probeText{}
	part := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") {
			part = strings.TrimSuffix(strings.TrimPrefix(l, "-- "), " --")
			continue
		}
		if part == "" || strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		class, lit, ok := strings.Cut(l, "\t")
		if !ok {
			t.Fatalf("line %d: no tab", n)
		}
		text, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		parts[part] = append(parts[part], probeText{class, text, n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return parts
}

// caught reports whether Text took something out of s: it was withheld,
// or shows an instruction-like or encoded mark that s did not hold.
func caught(s string) (string, bool) {
	q, ok := Text(s, 0)
	if !ok {
		return q, true
	}
	for _, mark := range []string{instructionLike, encodedText, image} {
		if strings.Count(q, mark) > strings.Count(s, mark) {
			return q, true
		}
	}
	return q, false
}

// settled reports whether a quoted text, judged again, has nothing left to
// take out.
func settled(q string) bool {
	if q == Withheld || q == "" {
		return true
	}
	inner, err := strconv.Unquote(q)
	if err != nil {
		return false
	}
	d, ok := Defuse(inner)
	return ok && d == inner
}

func TestProbeTune(t *testing.T) {
	for _, p := range readProbe(t)["tune"] {
		q, ok := caught(p.text)
		if !ok {
			t.Errorf("line %d (%s): not caught: %s", p.line, p.class, q)
		}
		if !settled(q) {
			t.Errorf("line %d (%s): judged again, more comes out: %s", p.line, p.class, q)
		}
	}
}

// heldOutCaught is how many texts of the held-out part were caught at
// their batch's first measure (15 of batch 1, 6 of batch 2, 4 of batch 3),
// the misses since moved to the tuning part aside. Of the seven misses
// that stayed, the rules of shapes (structure.go) catch all seven: 32 of
// 32 today.
const heldOutCaught = 25

// heldOut4Caught is how many of the 40 texts of batch 4 (part heldout4)
// were caught at its one measure, after the rules of shapes: 25 (62%),
// with 0 of its 28 ordinary texts (benign4) changed. Of its 15 misses, 9
// moved to the tuning part once the rules caught them; 6 remain (see the
// probe's header).
const heldOut4Caught = 25

// TestProbeHeldOut measures the held-out parts, which no rule was written
// from: each fails below the figure of its first measure.
func TestProbeHeldOut(t *testing.T) {
	parts := readProbe(t)
	for _, tc := range []struct {
		part  string
		floor int
	}{{"heldout", heldOutCaught}, {"heldout4", heldOut4Caught}} {
		held := parts[tc.part]
		n := 0
		for _, p := range held {
			q, ok := caught(p.text)
			if ok {
				n++
			} else {
				t.Logf("line %d (%s): not caught: %s", p.line, p.class, q)
			}
			if !settled(q) {
				t.Errorf("line %d (%s): judged again, more comes out: %s", p.line, p.class, q)
			}
		}
		t.Logf("%s: %d of %d caught", tc.part, n, len(held))
		if n < tc.floor {
			t.Errorf("%s: %d of %d caught, fewer than the %d of its first measure", tc.part, n, len(held), tc.floor)
		}
	}
}

func TestProbeBenign(t *testing.T) {
	parts := readProbe(t)
	for _, part := range []string{"benign", "benign4"} {
		n := 0
		for _, p := range parts[part] {
			if q, bad := caught(p.text); bad {
				n++
				t.Errorf("line %d: an ordinary text lost words: %q -> %s", p.line, p.text, q)
			}
		}
		t.Logf("%s: %d of %d changed", part, n, len(parts[part]))
	}
}

// TestToolOutputCorporaStayWhole: no real tool output of guard's corpora
// (hundreds of failures and successes of real tools) loses a word.
func TestToolOutputCorporaStayWhole(t *testing.T) {
	n := 0
	for _, name := range []string{"tool_outputs.txtar", "corpus_tune.txtar", "corpus_heldout.txtar"} {
		b, err := os.ReadFile("../testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range strings.Split(string(b), "\n-- ")[1:] {
			file, body, ok := strings.Cut(part, " --\n")
			if !ok {
				continue
			}
			n++
			if d, ok := Defuse(body); !ok || strings.Contains(d, instructionLike) || strings.Contains(d, encodedText) || strings.Contains(d, image) {
				t.Errorf("%s: %s lost words: %.300s", name, file, d)
			}
		}
	}
	if n < 500 {
		t.Fatalf("read %d outputs: the corpora moved?", n)
	}
}
