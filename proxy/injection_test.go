package proxy

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/guard/quoted"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// heldOutMisses is how many texts of the probe's held-out parts the rules
// still miss (see its header): none of batches 1 to 3 since the rules read
// the shapes of text that speaks to the model (guard/quoted/structure.go),
// 6 of batch 4 (15 at its one measure; 9 since caught, moved to tuning).
const heldOutMisses = 6

// unmeasured are the probe's parts not yet measured: a held-out batch is
// measured once, in guard/quoted, before it is planted here.
var unmeasured = map[string]bool{}

// probeEntry is one text of guard/testdata/injection_probe.txtar.
type probeEntry struct {
	part, class, text string
	line              int
}

func readInjectionProbe(t *testing.T) []probeEntry {
	t.Helper()
	f, err := os.Open("../guard/testdata/injection_probe.txtar")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []probeEntry
	part := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if strings.HasPrefix(l, "-- ") && strings.HasSuffix(l, " --") {
			part = strings.TrimSuffix(strings.TrimPrefix(l, "-- "), " --")
			continue
		}
		if part == "" || unmeasured[part] || strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			continue
		}
		class, lit, _ := strings.Cut(l, "\t")
		text, err := strconv.Unquote(lit)
		if err != nil {
			t.Fatalf("probe line %d: %v", n, err)
		}
		out = append(out, probeEntry{part, class, text, n})
	}
	return out
}

// benignPart reports whether a part of the probe holds ordinary texts.
func benignPart(part string) bool { return strings.HasPrefix(part, "benign") }

// quotedStrings are the double-quoted strings of a text as blocks write
// them.
var quotedStrings = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// defused reports whether a text the model was told holds no quoted
// string that, judged again, still has something to take out.
func defused(told string) (string, bool) {
	for _, q := range quotedStrings.FindAllString(told, -1) {
		inner, err := strconv.Unquote(q)
		if err != nil {
			return q, false
		}
		if d, ok := quoted.Defuse(inner); !ok || d != inner {
			return q, false
		}
	}
	return "", true
}

// shown reports whether the rules took something out of a text: it is
// withheld, or a mark of what was taken out stands in its place.
func shown(text string, limit int) (string, bool) {
	q, ok := quoted.Text(text, limit)
	caught := !ok || strings.Contains(q, "[instruction-like text]") || strings.Contains(q, "[encoded text]") || strings.Contains(q, "[image]")
	return q, caught
}

// TestInjectionProbeThroughMemory plants every text of the injection
// probe in the memory of one tenant, as the note and as the call of a
// learned fix and as the goal, approach and outcome of a solution, and
// sends a new conversation that meets them: the text reaches the provider
// only as the quoting path renders it, under the notice; every text of the
// tuning part, and every held-out text but the known misses, arrives
// defused, and no quoted string the model is told has anything left to take
// out. The benign texts arrive whole.
func TestInjectionProbeThroughMemory(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL, withOptions(func(o *Options) {
		o.Recall = &recall.Config{MinSimilarity: 0.01, MaxResults: 1}
	}))
	const task = "Parse the YAML configuration file and reject unknown keys"
	missed := 0
	for i, p := range readInjectionProbe(t) {
		ws := "probe-" + strconv.Itoa(i)
		hdr := map[string]string{tenant.HeaderWorkspace: ws}
		_, caught := shown(p.text, 200)
		if !benignPart(p.part) && !caught {
			missed++
			if p.part == "tune" {
				t.Errorf("line %d (%s): a text of the tuning part is not caught: %q", p.line, p.class, p.text)
			}
		}

		// A learned fix whose note and call carry the text.
		call, _ := json.Marshal(map[string]string{"cmd": "mkdir -p config", "why": p.text})
		f := store.Fix{Workspace: ws, Project: "default", Tool: "run_shell", Failure: "run_shell: " + failOutput, Call: string(call), Explanation: p.text, Failures: 3}
		h.srv.memory.PrepareFix(&f)
		if err := h.store.PutFix(t.Context(), &f); err != nil {
			t.Fatal(err)
		}
		res, _ := h.chat(chatBody(t, nil, msg("system", "You are an agent."), msg("user", "Load the settings"),
			toolCall("c1", "run_shell"), toolResultMsg("c1", failOutput)), hdr)
		told := toldOf(t, up.last(t).Body)
		if res.Header.Get(HeaderGuard) != "1" || !strings.Contains(told, "Last time this was fixed by: calling run_shell") {
			t.Fatalf("line %d: the fix is not shown: guard %s\n%s", p.line, res.Header.Get(HeaderGuard), told)
		}
		checkTold(t, p, told, caught, func(told string) bool {
			note, ok := quoted.Text(p.text, 200)
			args, argsOK := quoted.Text(f.Call, 200)
			line := "Last time this was fixed by: calling run_shell"
			if argsOK && args != "" {
				line += " " + args
			}
			if ok && note != "" {
				line += ", with the note " + note
			}
			return strings.Contains(told, line+"\n")
		})

		// A solution whose goal, approach and outcome carry the text.
		sol, _ := json.Marshal(map[string]any{"workspace": ws, "goal": task + ". " + p.text, "approach": p.text, "outcome": p.text, "confidence": 0.9})
		if status, b := h.apiCall(http.MethodPost, "/scar/v1/solutions", string(sol), nil); status != http.StatusCreated {
			t.Fatalf("line %d: store the solution: %d %s", p.line, status, b)
		}
		res, _ = h.chat(chatBody(t, nil, msg("system", "You are an agent."), msg("user", task)), hdr)
		told = toldOf(t, up.last(t).Body)
		if res.Header.Get(HeaderRecall) != "1" {
			t.Fatalf("line %d: nothing recalled:\n%s", p.line, told)
		}
		checkTold(t, p, told, caught, func(told string) bool {
			goal, _ := quoted.Text(task+". "+p.text, 300)
			text, _ := quoted.Text(p.text, 300)
			return strings.Contains(told, "Prior Goal: "+goal+"\n") && strings.Contains(told, "Outcome: "+text+"\n")
		})
	}
	t.Logf("probe texts not caught: %d (the held-out part's known misses)", missed)
	if missed > heldOutMisses {
		t.Errorf("%d probe texts not caught, more than the held-out part's %d known misses", missed, heldOutMisses)
	}
}

// checkTold checks what the model was told of one probe text: the notice,
// the text as the quoting path renders it (rendered), and, unless the text
// is a known miss, nothing left to take out.
func checkTold(t *testing.T, p probeEntry, told string, caught bool, rendered func(string) bool) {
	t.Helper()
	if !strings.Contains(told, guard.QuoteNotice) {
		t.Errorf("line %d (%s): no notice:\n%s", p.line, p.class, told)
	}
	if !rendered(told) {
		t.Errorf("line %d (%s): the stored text is not shown as the quoting path renders it:\n%s", p.line, p.class, told)
	}
	if benignPart(p.part) {
		if q, _ := quoted.Text(p.text, 300); !strings.Contains(told, strings.Trim(q, `"`)) {
			t.Errorf("line %d: a benign text did not arrive whole: %q\n%s", p.line, p.text, told)
		}
		return
	}
	if !caught {
		return
	}
	if q, ok := defused(told); !ok {
		t.Errorf("line %d (%s): %s still has instruction-like text:\n%s", p.line, p.class, q, told)
	}
	if plain := quoted.Line(p.text, 0); len(plain) > 12 && strings.Contains(told, plain) {
		t.Errorf("line %d (%s): arrived verbatim:\n%s", p.line, p.class, told)
	}
}
