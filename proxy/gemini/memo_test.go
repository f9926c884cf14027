package gemini

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// judge sets the verdicts of r's tool results as the pipeline does, by a
// rule of the test's own.
func judge(r *request) {
	for i := range r.info.ToolResults {
		tr := &r.info.ToolResults[i]
		tr.Failed = tr.IsError || strings.Contains(tr.Text(), "Exit Code: 1")
	}
}

// resultKeys lists the keys, names, contents, arguments and notes of r's
// tool results as read.
func resultKeys(r *request) []string {
	var out []string
	for _, tr := range r.info.ToolResults {
		out = append(out, strings.Join([]string{tr.Key, tr.Name, string(tr.Raw), string(tr.Args), string(tr.Note)}, "|"))
	}
	return out
}

// readMemo reads body with memo as the format does.
func readMemo(body []byte, memo *wire.TurnMemo[*turnState], systems *wire.SystemMemo) (*request, error) {
	return readTurn(body, streamPath, systems, memo, "t")
}

// sameRead fails unless got, read with a memo, reads as want, read in
// full: the same info (its tool results the newest of want's, the tallies
// of those skipped in Prior), and the same blocks placed the same way.
func sameRead(t *testing.T, body []byte, got, want *request) {
	t.Helper()
	all := resultKeys(want)
	r := resultKeys(got)
	if len(r) > len(all) || !slices.Equal(r, all[len(all)-len(r):]) {
		t.Fatalf("tool results %q, in full %q", r, all)
	}
	judge(got)
	judge(want)
	if g, w := got.info.Tallies(), want.info.Tallies(); !slices.Equal(g, w) {
		t.Fatalf("tallies with memo %v, in full %v", g, w)
	}
	g, w := got.info, want.info
	if g.Model != w.Model || g.User != w.User || g.Stream != w.Stream || g.Key != w.Key || g.Later != w.Later || g.Run != w.Run || g.Origin != w.Origin ||
		g.System != w.System || g.Goal != w.Goal || g.ToolCount != w.ToolCount || !slices.Equal(g.Tools, w.Tools) || !bytes.Equal(g.ToolDefs, w.ToolDefs) {
		t.Fatalf("with memo %+v\nin full %+v", g, w)
	}
	if got.first != want.first || got.newest != want.newest || got.system != want.system || got.systemKey != want.systemKey {
		t.Fatalf("places with memo %+v %+v, in full %+v %+v", got.first, got.newest, want.first, want.newest)
	}
	for _, p := range []wire.Placement{{Turn: agenttest.Blocks()}, {Turn: agenttest.Blocks(), System: true}, {}} {
		a, aerr := got.Inject(nil, body, p)
		b, berr := want.Inject(nil, body, p)
		if (aerr == nil) != (berr == nil) || !bytes.Equal(a, b) {
			t.Fatalf("placed with memo %q (%v), in full %q (%v)", a, aerr, b, berr)
		}
	}
}

// lastEnd returns where the last content of a body read ends, 0 when it
// has none.
func lastEnd(r *request) int {
	if len(r.elems) == 0 {
		return 0
	}
	return r.elems[len(r.elems)-1].End
}

// FuzzReadMemo reads a turn with a memo, then the next turn (the same
// body up to the end of its last content, then added, then the rest or
// tail), and checks that the next turn reads as it does in full.
func FuzzReadMemo(f *testing.F) {
	f.Add(cliTurn, `,{"role":"model","parts":[{"functionCall":{"id":"c9","name":"run_shell_command","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"id":"c9","name":"run_shell_command","response":{"output":"Exit Code: 1"}}}]}`, "")
	f.Add(cliTurn, `,{"role":"user","parts":[{"text":"go on"}]}`, `,"systemInstruction":{"parts":[{"text":"other"}]}}`)
	// Calls without ids, answered in order across turns: two of one tool,
	// the first answered in the remembered turn, the second in the next.
	f.Add(`{"contents":[{"role":"user","parts":[{"text":"g"}]},{"role":"model","parts":[{"functionCall":{"name":"a","args":{"n":1}}},{"functionCall":{"name":"a","args":{"n":2}}}]},{"role":"user","parts":[{"functionResponse":{"name":"a","response":{"output":"1"}}}]}]}`,
		`,{"role":"user","parts":[{"functionResponse":{"name":"a","response":{"output":"2"}}}]}`, "")
	f.Add(`{"contents":[{"role":"user","parts":[{"text":"g"}]},{"role":"model","parts":[{"functionCall":{"id":"x","name":"a"}},{"functionCall":{"name":"a"}}]}]}`,
		`,{"role":"user","parts":[{"functionResponse":{"name":"a","response":{}}},{"functionResponse":{"id":"x","name":"a","response":{}}}]}`, "")
	f.Add(`{"systemInstruction":{"parts":[{"text":"s"}]},"contents":[{"role":"user","parts":[{"text":"g"}]}]}`, `,{"role":"model","parts":[{"text":"x"}]}`, "")
	f.Add(`{"contents":[{"role":"user","parts":[{"text":"g"}]}],"system_instruction":{"parts":[{"text":"s"}]}}`, `,{"role":"function","parts":[{"function_response":{"name":"a","response":{"error":"e"}}}]}`, `,"systemInstruction":{"parts":[]}}`)
	f.Add(`{"contents":[{"role":"user","parts":[{"text":"g"}]},1]}`, `2`, "")
	f.Add(`{"contents":[{"role":"user","parts":[{"text":"g"}]}],"contents":[]}`, `,{}`, "")
	f.Fuzz(func(t *testing.T, first, added, tail string) {
		memo := wire.NewTurnMemo[*turnState](1 << 20)
		body := []byte(first)
		r1, err := readMemo(body, memo, nil)
		if err != nil || r1.arrayEnd == 0 || len(r1.elems) == 0 {
			return
		}
		judge(r1)
		end, arrayEnd := lastEnd(r1), r1.arrayEnd
		r1.Forwarded(true)
		if string(body) != first {
			t.Fatal("reading changed the client's body")
		}
		rest := first[end:]
		if tail != "" {
			rest = first[end:arrayEnd] + tail
		}
		next := []byte(first[:end] + added + rest)
		got, gerr := readMemo(next, memo, nil)
		want, werr := read(next, streamPath, nil)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("with memo: %v; in full: %v", gerr, werr)
		}
		if gerr != nil {
			return
		}
		sameRead(t, next, got, want)
		judge(got)
		got.Forwarded(true)
		again, err := readMemo(next, memo, nil)
		if err != nil {
			t.Fatal(err)
		}
		sameRead(t, next, again, want)
		// A body that differs by one bit from a remembered one is read as
		// it is; then the turns before, once others were remembered under
		// their name, read as in full.
		other := bytes.Clone(next)
		other[len(added)%len(other)] ^= 1
		for _, b := range [][]byte{other, body, next, other, body} {
			g, gerr := readMemo(b, memo, nil)
			w, werr := read(b, streamPath, nil)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("with memo: %v; in full: %v", gerr, werr)
			}
			if gerr == nil {
				sameRead(t, b, g, w)
				judge(g)
				g.Forwarded(true)
			}
		}
	})
}

// firstUserAt is the index of the first user content of r's body, -1 for
// none.
func firstUserAt(r *request) int {
	i := -1
	gjson.GetBytes(r.body, "contents").ForEach(func(k, c gjson.Result) bool {
		if c.Get("role").String() == "user" {
			i = int(k.Int())
			return false
		}
		return true
	})
	return i
}

// growing returns the turns of a conversation built from a captured
// Gemini CLI request: its first k contents, for k from 1 on.
func growing(t testing.TB, name string) [][]byte {
	t.Helper()
	body := agentBody(t, name)
	contents := gjson.GetBytes(body, "contents")
	arr := contents.Array()
	var out [][]byte
	for k := 1; k <= len(arr); k++ {
		end := arr[k-1].Index + len(arr[k-1].Raw)
		out = append(out, slices.Concat(body[:end], body[contents.Index+len(contents.Raw)-1:]))
	}
	return out
}

// TestMemoReadsOnlyNewContents: the turns of a Gemini CLI conversation
// read with a memo read as in full; from the second after the first user
// content (which names the conversation) only the newest content is
// read, and neither the 30 KB system instruction nor the tools after the
// contents; a retry reads nothing; another tenant's same conversation is
// its own.
func TestMemoReadsOnlyNewContents(t *testing.T) {
	for _, name := range []string{"gemini-cli-loop-stop", "gemini-cli-turn3"} {
		t.Run(name, func(t *testing.T) {
			turns := growing(t, name)
			if len(turns) < 4 {
				t.Fatalf("%d turns", len(turns))
			}
			memo := wire.NewTurnMemo[*turnState](0)
			systems := newSystemMemo()
			w, _ := read(turns[len(turns)-1], streamPath, nil)
			u := firstUserAt(w)
			var prev *request
			for i, body := range turns {
				got, err := readMemo(body, memo, systems)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := read(body, streamPath, nil)
				sameRead(t, body, got, want)
				if i >= u+2 && got.resume.From != len(got.elems)-1 {
					t.Fatalf("turn %d: read from content %d of %d", i, got.resume.From, len(got.elems))
				}
				if i >= u+1 {
					if !got.resume.TailKnown || got.info.ToolDefsSum == 0 {
						t.Fatalf("turn %d: the bytes after the contents were read again", i)
					}
					if unsafe.StringData(got.info.System) != unsafe.StringData(prev.info.System) || got.info.Key != prev.info.Key {
						t.Fatalf("turn %d: the system text or the key is not the turn before's", i)
					}
				}
				judge(got)
				got.Forwarded(true)
				prev = got
				again, err := readMemo(body, memo, systems)
				if err != nil {
					t.Fatal(err)
				}
				sameRead(t, body, again, want)
				if i >= u+1 && again.resume.From != len(again.elems) {
					t.Fatalf("turn %d again: read from content %d of %d", i, again.resume.From, len(again.elems))
				}
				again.Forwarded(true)
			}
			other, err := readTurn(turns[len(turns)-1], streamPath, systems, memo, "u")
			if err != nil {
				t.Fatal(err)
			}
			if other.resume.Prior != nil || other.resume.From != 0 {
				t.Fatal("another tenant's turn was read from this one's memo")
			}
		})
	}
}

// TestCallsAnsweredInOrderAcrossTurns: calls without ids are answered in
// order, each response the next call of its tool not answered. A turn
// that resumes after the first response answers the second call, as a
// full read does; it leaves the remembered turn's answers as they were,
// so that a branch from the same place answers the second call too.
func TestCallsAnsweredInOrderAcrossTurns(t *testing.T) {
	head := `{"contents":[{"role":"user","parts":[{"text":"list both"}]},` +
		`{"role":"model","parts":[{"text":"Two listings."},{"functionCall":{"name":"ls","args":{"dir":"a"}}},{"functionCall":{"name":"ls","args":{"dir":"b"}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"a1"}}}]}`
	tail := `],"tools":[{"functionDeclarations":[{"name":"ls"}]}]}`
	next := func(output string) []byte {
		return []byte(head + `,{"role":"user","parts":[{"functionResponse":{"name":"ls","response":{"output":"` + output + `"}}}]}` + tail)
	}
	memo := wire.NewTurnMemo[*turnState](0)
	first := []byte(head + tail)
	r, err := readMemo(first, memo, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Forwarded(true)
	for _, body := range [][]byte{next("b1"), next("b2")} {
		got, err := readMemo(body, memo, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.resume.From != 3 {
			t.Fatalf("read from content %d, want the newest (3)", got.resume.From)
		}
		want, _ := read(body, streamPath, nil)
		sameRead(t, body, got, want)
		if len(got.info.ToolResults) != 1 || string(got.info.ToolResults[0].Args) != `{"dir":"b"}` {
			t.Fatalf("the second response answers %q, want the second call", resultKeys(got))
		}
		got.Forwarded(true)
	}
}

func TestMemoIsBoundedInBytes(t *testing.T) {
	turns := growing(t, "gemini-cli-loop-stop")
	body := turns[len(turns)-1]
	memo := wire.NewTurnMemo[*turnState](256 << 10)
	for i := range 200 {
		r, err := readTurn(body, streamPath, nil, memo, fmt.Sprintf("tenant-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		judge(r)
		r.Forwarded(true)
		if b := memo.Bytes(); b > 256<<10 {
			t.Fatalf("after %d conversations the memo holds %d bytes", i+1, b)
		}
	}
	if memo.Len() == 0 || memo.Len() >= 200 {
		t.Fatalf("%d conversations kept", memo.Len())
	}
}

// TestMemoConcurrentTurns: requests of one conversation read and remember
// its turns at once, in any order; each reads as read in full (with
// -race: none writes what another reads).
func TestMemoConcurrentTurns(t *testing.T) {
	turns := growing(t, "gemini-cli-loop-stop")
	wants := make([]*request, len(turns))
	for i, body := range turns {
		w, err := read(body, streamPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		judge(w)
		wants[i] = w
	}
	memo := wire.NewTurnMemo[*turnState](0)
	systems := newSystemMemo()
	agenttest.Interleaved(len(turns), func(i int) bool {
		got, err := readMemo(turns[i], memo, systems)
		if err != nil {
			t.Error(err)
			return false
		}
		judge(got)
		if gt, wt := got.info.Tallies(), wants[i].info.Tallies(); !slices.Equal(gt, wt) || got.info.Goal != wants[i].info.Goal || got.info.Key != wants[i].info.Key ||
			!slices.Equal(got.info.Tools, wants[i].info.Tools) || got.newest != wants[i].newest || got.first != wants[i].first {
			t.Errorf("turn %d: tallies %v, in full %v", i, gt, wt)
			return false
		}
		got.Forwarded(true)
		return true
	})
}

// TestContinuedTurnAddsOneAnswer: a turn is Continued when it extends the
// turn remembered last by one answer of the model and its results; not
// the conversation's first, nor one that extends it by two answers, nor
// the same turn again.
func TestContinuedTurnAddsOneAnswer(t *testing.T) {
	var reqs [][]byte
	for _, body := range growing(t, "gemini-cli-loop-stop") {
		cs := gjson.GetBytes(body, "contents").Array()
		if cs[len(cs)-1].Get("role").String() == "user" {
			reqs = append(reqs, body)
		}
	}
	memo := wire.NewTurnMemo[*turnState](0)
	agenttest.CheckContinued(t, reqs, func(body []byte) *wire.Info {
		r, err := readMemo(body, memo, nil)
		if err != nil {
			t.Fatal(err)
		}
		judge(r)
		r.Forwarded(true)
		return &r.info
	}, func(body []byte) *wire.Info {
		r, _ := read(body, streamPath, nil)
		return &r.info
	})
}

// TestForgetDropsTheRemembered: Forget, before the request is forwarded
// or after, leaves the conversation's next turn to be read whole.
func TestForgetDropsTheRemembered(t *testing.T) {
	var memo *wire.TurnMemo[*turnState]
	agenttest.CheckForget(t, growing(t, "gemini-cli-loop-stop"), func() { memo = wire.NewTurnMemo[*turnState](0) }, func(body []byte) (wire.Request, bool) {
		r, err := readMemo(body, memo, nil)
		if err != nil {
			t.Fatal(err)
		}
		judge(r)
		return r, r.resume.Prior != nil
	})
}

// TestVerdictsAppendInPlace: a conversation's next turn appends its
// verdicts to its turn before's in place instead of copying them turn
// after turn (every turn holds its first verdict where the first turn
// did); a retry of a turn copies, and every turn reads as read in full.
func TestVerdictsAppendInPlace(t *testing.T) {
	body := agentBody(t, "gemini-cli-turn3")
	contents := gjson.GetBytes(body, "contents")
	end := contents.Index + len(contents.Raw) - 1
	turns := [][]byte{body}
	for k := range 16 {
		round := fmt.Sprintf(`,{"role":"model","parts":[{"functionCall":{"id":"r%d","name":"run_shell_command","args":{"command":"ls %d"}}}]},{"role":"user","parts":[{"functionResponse":{"id":"r%d","name":"run_shell_command","response":{"output":"file%d"}}}]}`, k, k, k, k)
		prev := turns[len(turns)-1]
		turns = append(turns, slices.Concat(prev[:end], []byte(round), prev[end:]))
		end += len(round)
	}
	memo := wire.NewTurnMemo[*turnState](0)
	var arrays []*wire.ToolTally
	for i, body := range turns {
		for retry := range 2 {
			got, err := readMemo(body, memo, nil)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := read(body, streamPath, nil)
			judge(got)
			judge(want)
			if gt, wt := got.info.Tallies(), want.info.Tallies(); !slices.Equal(gt, wt) {
				t.Fatalf("turn %d (retry %d): tallies %v, in full %v", i, retry, gt, wt)
			}
			if p := got.resume.Prior; retry == 0 && p != nil && p.State.verdicts.Len() > 0 {
				arrays = append(arrays, p.State.verdicts.At(0))
			}
			got.Forwarded(true)
		}
	}
	if distinct := len(slices.Compact(arrays)); len(arrays) < 16 || distinct > 1 {
		t.Errorf("%d turns resumed with verdicts hold them in %d arrays", len(arrays), distinct)
	}
}

// TestMemoKeepsEachRun: two runs of one task (the same head, then calls
// of their own), taking turns, each read only their newest content, as a
// script that starts the Gemini CLI with one prompt twice at once sends
// them. The CLI names no run in its body.
func TestMemoKeepsEachRun(t *testing.T) {
	turns := growing(t, "gemini-cli-loop-stop")
	w, _ := read(turns[len(turns)-1], streamPath, nil)
	u := firstUserAt(w)
	memo := wire.NewTurnMemo[*turnState](0)
	agenttest.CheckRunsOfOneTask(t, turns[u:], w.elems[u].End, `"run_shell_command_`, "", func(b []byte) (int, int) {
		got, err := readMemo(b, memo, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(b, streamPath, nil)
		sameRead(t, b, got, want)
		from, elems := got.resume.From, len(got.elems)
		got.Forwarded(true)
		return from, elems
	})
	if memo.Len() != 1 {
		t.Fatalf("%d conversations remembered, want the task's one", memo.Len())
	}
}

// geminiRun returns the requests of one run of the Gemini CLI 0.61.0, in
// order, as it sent them through the proxy (serve --mock, a prompt whose
// shell command fails four times, then works): its contents first, each
// request's the one before's and the model's answer and its response,
// then the same system instruction, tools and generation config.
func geminiRun(t *testing.T) [][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "agents", "gemini-cli-run")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tail := read("tail.part")
	var reqs [][]byte
	for i := 1; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%d.part", i))); err != nil {
			break
		}
		reqs = append(reqs, slices.Concat(read(fmt.Sprintf("%d.part", i)), tail))
	}
	return reqs
}

// TestContinuedOnARealRun: the requests of a real Gemini CLI run, read in
// order with one memo, read as in full; from the second on each is
// Continued and reads neither the system instruction nor the tools again,
// and from the third on only the two contents it adds (the model's call
// and its response): the first request is the task alone, which names the
// conversation, and what follows it is read once.
func TestContinuedOnARealRun(t *testing.T) {
	reqs := geminiRun(t)
	if len(reqs) != 6 {
		t.Fatalf("%d requests", len(reqs))
	}
	memo := wire.NewTurnMemo[*turnState](0)
	systems := newSystemMemo()
	prevElems := 0
	for i, body := range reqs {
		got, err := readMemo(body, memo, systems)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(body, streamPath, nil)
		sameRead(t, body, got, want)
		if got.info.Continued != (i > 0) {
			t.Fatalf("request %d: Continued %v", i+1, got.info.Continued)
		}
		if i > 0 {
			if i > 1 && got.resume.From != prevElems || len(got.elems) != prevElems+2 || !got.resume.TailKnown {
				t.Fatalf("request %d: read from content %d of %d (the turn before had %d), tail known %v", i+1, got.resume.From, len(got.elems), prevElems, got.resume.TailKnown)
			}
			if len(got.info.ToolResults) != 1 {
				t.Fatalf("request %d: %d tool results read, want its newest", i+1, len(got.info.ToolResults))
			}
		}
		prevElems = len(got.elems)
		judge(got)
		got.Forwarded(true)
	}
}

// TestSystemCheckedOnce: a conversation's system value is scanned for the
// openings of blocks when a turn places blocks, once: the next turn, whose
// system value is the same bytes, takes the answer with the remembered
// turn, and places its blocks as a read in full does.
func TestSystemCheckedOnce(t *testing.T) {
	turns := growing(t, "gemini-cli-loop-stop")
	if len(turns) < 2 {
		t.Fatal("the capture has one message")
	}
	memo := wire.NewTurnMemo[*turnState](0)
	for i, body := range turns[:2] {
		got, err := readTurn(body, streamPath, nil, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		if checked := got.systemBlocks != wire.BlockCheck(0); checked != (i > 0) {
			t.Fatalf("turn %d: the system value's check taken from the memo: %v", i, checked)
		}
		out, err := got.Inject(nil, body, turnPlacement())
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(body, streamPath, nil)
		if full, _ := want.Inject(nil, body, turnPlacement()); !bytes.Equal(out, full) {
			t.Fatalf("turn %d placed its blocks otherwise than a read in full", i)
		}
		judge(got)
		got.Forwarded(true)
	}
}
