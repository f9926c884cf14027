package responses

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// judge sets the verdicts of r's tool results as the pipeline does,
// by a rule of the test's own.
func judge(r *request) {
	for i := range r.info.ToolResults {
		tr := &r.info.ToolResults[i]
		tr.Failed = tr.IsError || strings.Contains(tr.Text(), "Error")
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

// sameRead fails unless got, read with a memo, reads as want, read in full:
// the same info (its tool results the newest of want's, the tallies of
// those skipped in Prior), and the same blocks placed the same way.
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
	if !samePlaces(got.at, want.at) || got.instructions != want.instructions {
		t.Fatalf("places with memo %+v (first %+v), in full %+v (first %+v)", got.at, got.at.first, want.at, want.at.first)
	}
	for _, p := range []wire.Placement{turnPlacement(), {Turn: agenttest.Blocks(), System: true}, {}} {
		a, aerr := got.Inject(nil, body, p)
		b, berr := want.Inject(nil, body, p)
		if (aerr == nil) != (berr == nil) || !bytes.Equal(a, b) {
			t.Fatalf("placed with memo %q (%v), in full %q (%v)", a, aerr, b, berr)
		}
	}
}

// lastEnd returns where the last message of a body read ends, 0 when
// it has none.
func lastEnd(r *request) int {
	if len(r.elems) == 0 {
		return 0
	}
	return r.elems[len(r.elems)-1].End
}

// FuzzReadMemo reads a turn with a memo, then the next turn (the same
// body up to the end of its last message, then added, then the rest or
// tail): read with the memo it must read as read in full, and the same
// body again reads from its end.
func FuzzReadMemo(f *testing.F) {
	f.Add(codexTurn, `,{"type":"function_call","name":"shell_command","arguments":"{}","call_id":"call_E"},{"type":"function_call_output","call_id":"call_E","output":"Error: no"}`, "")
	f.Add(codexTurn, `,{"type":"function_call_output","call_id":"call_A","output":"ok"}`, `,"instructions":"other"}`)
	f.Add(`{"instructions":"s","input":[{"role":"user","content":"g"}],"model":"a"}`, `,{"role":"assistant","content":"x"}`, `,"instructions":"t","model":"b"}`)
	f.Add(`{"input":[{"role":"developer","content":"d"},{"role":"user","content":"g"}],"instructions":"i"}`, `,{"role":"user","content":"h"}`, `}`)
	f.Add(`{"input":[{"role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]}]}`, `,{"role":"user","content":"the task"}`, "")
	// Tails that change in one member (Codex CLI's client_metadata): the
	// others' values are taken as they were, a number that goes on is not.
	f.Add(`{"input":[{"role":"user","content":"g"}],"instructions":"i","tools":[{"name":"a"}],"client_metadata":{"a":"1","b":"2"},"n":1}`, `,{"role":"assistant","content":"x"}`, `,"instructions":"i","tools":[{"name":"a"}],"client_metadata":{"b":"2","a":"1"},"n":1.5}`)
	f.Add(`{"input":[{"role":"user","content":"g"}],"instructions":"i","tools":[]}`, `,{"role":"assistant","content":"x"}`, `,"tools":[],"instructions":"i","instructions":"i"}`)
	f.Add(`{"input":[{"role":"user","content":"g"},1]}`, `2`, "")
	f.Add(`{"input":[{"role":"user","content":"g"}],"previous_response_id":"r"}`, `,{}`, "")
	f.Add(`{"input":[{"role":"user","content":"g"}]}`, `,{"type":"message","role":"developer","content":[{"type":"input_text","text":"<system-reminder>x</system-reminder>"}]}`, "")
	f.Fuzz(func(t *testing.T, first, added, tail string) {
		memo := wire.NewTurnMemo[*turnState](1 << 20)
		body := []byte(first)
		r1, err := readTurn(body, "t", nil, memo)
		if err != nil || r1.arrayEnd == 0 || len(r1.elems) == 0 {
			return
		}
		judge(r1)
		end, arrayEnd := lastEnd(r1), r1.arrayEnd
		elems := len(r1.elems)
		r1.Forwarded(true)
		if string(body) != first {
			t.Fatal("reading changed the client's body")
		}
		rest := first[end:]
		if tail != "" {
			rest = first[end:arrayEnd] + tail
		}
		next := []byte(first[:end] + added + rest)
		got, gerr := readTurn(next, "t", nil, memo)
		want, werr := read(next, "t", nil)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("with memo: %v; in full: %v", gerr, werr)
		}
		if gerr != nil {
			return
		}
		sameRead(t, next, got, want)
		if got.resume.Prior != nil && elems > 1 && next[end-1] == '}' && got.resume.From == 0 && !got.truncated {
			// The first user message may be the last: then nothing
			// after it was skipped.
			if u := firstUserAt(r1); u >= 0 && u < elems-1 {
				t.Fatalf("read from message 0, but %d remembered messages were repeated", elems)
			}
		}
		judge(got)
		got.Forwarded(true)
		again, err := readTurn(next, "t", nil, memo)
		if err != nil {
			t.Fatal(err)
		}
		sameRead(t, next, again, want)
		// A body that differs by one bit from a remembered one is read as
		// it is; then the turns before, once others were remembered under
		// their name (runs of one task, branches), read as in full.
		other := bytes.Clone(next)
		other[len(added)%len(other)] ^= 1
		for _, b := range [][]byte{other, body, next, other, body} {
			g, gerr := readTurn(b, "t", nil, memo)
			w, werr := read(b, "t", nil)
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

// firstUserAt is the index of the first user message of r's body, -1
// for none.
func firstUserAt(r *request) int {
	i := -1
	gjson.GetBytes(r.body, "input").ForEach(func(k, m gjson.Result) bool {
		if m.Get("role").String() == "user" {
			i = int(k.Int())
			return false
		}
		return true
	})
	return i
}

// growing returns the turns of a conversation built from a captured
// Codex CLI turn: its first k input items, for k from 1 on.
func growing(t testing.TB, name string) [][]byte {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "agents", name))
	if err != nil {
		t.Fatal(err)
	}
	msgs := gjson.GetBytes(body, "input")
	arr := msgs.Array()
	var out [][]byte
	for k := 1; k <= len(arr); k++ {
		end := arr[k-1].Index + len(arr[k-1].Raw)
		turn := slices.Concat(body[:end], body[msgs.Index+len(msgs.Raw)-1:])
		out = append(out, turn)
	}
	return out
}

func TestMemoReadsOnlyNewMessages(t *testing.T) {
	for _, name := range []string{"codex-turn3.json", "codex-gpt-5.5-turn3.json"} {
		t.Run(name, func(t *testing.T) {
			turns := growing(t, name)
			if len(turns) < 4 {
				t.Fatalf("%d turns", len(turns))
			}
			memo := wire.NewTurnMemo[*turnState](0)
			// The turns from the one after the head (the first user
			// message, which names the conversation) are remembered.
			w, _ := read(turns[len(turns)-1], "t", nil)
			u := firstUserAt(w)
			for i, body := range turns {
				got, err := readTurn(body, "t", nil, memo)
				if err != nil {
					t.Fatal(err)
				}
				want, _ := read(body, "t", nil)
				sameRead(t, body, got, want)
				// From the second turn after the head on, only the newest
				// message is read.
				if i >= u+2 && got.resume.From != len(got.elems)-1 {
					t.Fatalf("turn %d: read from message %d of %d", i, got.resume.From, len(got.elems))
				}
				if i >= u+1 && !got.resume.TailKnown {
					t.Fatalf("turn %d: the bytes after the messages were read again", i)
				}
				judge(got)
				got.Forwarded(true)
				// A retry of the same turn skips every message.
				again, err := readTurn(body, "t", nil, memo)
				if err != nil {
					t.Fatal(err)
				}
				sameRead(t, body, again, want)
				if i >= u+1 && again.resume.From != len(again.elems) {
					t.Fatalf("turn %d again: read from message %d of %d", i, again.resume.From, len(again.elems))
				}
				again.Forwarded(true)
			}
			// Another tenant's same conversation is its own.
			other, err := readTurn(turns[len(turns)-1], "u", nil, memo)
			if err != nil {
				t.Fatal(err)
			}
			if other.resume.Prior != nil || other.resume.From != 0 {
				t.Fatal("another tenant's turn was read from this one's memo")
			}
		})
	}
}

func TestMemoIsBoundedInBytes(t *testing.T) {
	turns := growing(t, "codex-gpt-5.5-turn3.json")
	body := turns[len(turns)-1]
	memo := wire.NewTurnMemo[*turnState](256 << 10)
	for i := range 200 {
		r, err := readTurn(body, "tenant-"+string(rune('a'+i%26))+string(rune('a'+i/26)), nil, memo)
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

// TestVerdictsAppendInPlace: a conversation's next turn appends its
// verdicts to its turn before's in place instead of copying them turn
// after turn (every turn holds its first verdict where the first turn
// did); a retry of a turn copies, and every turn reads as read in full.
func TestVerdictsAppendInPlace(t *testing.T) {
	// A Codex CLI turn, then a call and its output a turn, 16 times.
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "codex-gpt-5.5-turn3.json"))
	if err != nil {
		t.Fatal(err)
	}
	input := gjson.GetBytes(body, "input")
	end := input.Index + len(input.Raw) - 1
	turns := [][]byte{body}
	for k := range 16 {
		round := fmt.Sprintf(`,{"type":"function_call","name":"shell","arguments":"{\"cmd\":\"ls %d\"}","call_id":"call_r%d"},{"type":"function_call_output","call_id":"call_r%d","output":"file%d"}`, k, k, k, k)
		prev := turns[len(turns)-1]
		turns = append(turns, slices.Concat(prev[:end], []byte(round), prev[end:]))
		end += len(round)
	}
	memo := wire.NewTurnMemo[*turnState](0)
	var arrays []*wire.ToolTally
	for i, body := range turns {
		got, err := readTurn(body, "t", nil, memo)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(body, "t", nil)
		judge(got)
		judge(want)
		if gt, wt := got.info.Tallies(), want.info.Tallies(); !slices.Equal(gt, wt) {
			t.Fatalf("turn %d: tallies %v, in full %v", i, gt, wt)
		}
		if p := got.resume.Prior; p != nil && p.State.verdicts.Len() > 0 {
			arrays = append(arrays, p.State.verdicts.At(0))
		}
		got.Forwarded(true)
		// A retry of the turn: it resumes from the turn's end too, and
		// copies.
		again, err := readTurn(body, "t", nil, memo)
		if err != nil {
			t.Fatal(err)
		}
		judge(again)
		if gt, wt := again.info.Tallies(), want.info.Tallies(); !slices.Equal(gt, wt) {
			t.Fatalf("turn %d again: tallies %v, in full %v", i, gt, wt)
		}
		again.Forwarded(true)
	}
	// Sixteen turns of one result more each, in the chunks of the first.
	if distinct := len(slices.Compact(arrays)); len(arrays) < 16 || distinct > 1 {
		t.Errorf("%d turns resumed with verdicts hold them in %d arrays", len(arrays), distinct)
	}
}

// TestMemoConcurrentTurns: requests of one conversation read and remember
// its turns at once, in any order; each reads as read in full (with
// -race: none writes what another reads).
func TestMemoConcurrentTurns(t *testing.T) {
	turns := growing(t, "codex-turn3.json")
	wants := make([]*request, len(turns))
	for i, body := range turns {
		w, err := read(body, "t", nil)
		if err != nil {
			t.Fatal(err)
		}
		judge(w)
		wants[i] = w
	}
	memo := wire.NewTurnMemo[*turnState](0)
	agenttest.Interleaved(len(turns), func(i int) bool {
		got, err := readTurn(turns[i], "t", nil, memo)
		if err != nil {
			t.Error(err)
			return false
		}
		judge(got)
		if gt, wt := got.info.Tallies(), wants[i].info.Tallies(); !slices.Equal(gt, wt) || got.info.Goal != wants[i].info.Goal ||
			!slices.Equal(got.info.Tools, wants[i].info.Tools) || !samePlaces(got.at, wants[i].at) {
			t.Errorf("turn %d: tallies %v, in full %v", i, gt, wt)
			return false
		}
		got.Forwarded(true)
		return true
	})
}

// TestContinuedTurnAddsOneAnswer: a turn is Continued when it extends the
// turn remembered last by one answer of the model (its reasoning, message
// and calls) and their outputs; not the conversation's first, nor one
// that extends it by two answers (the turn between went through another
// replica), nor the same turn again.
func TestContinuedTurnAddsOneAnswer(t *testing.T) {
	for _, name := range []string{"codex-loop-stop.json", "codex-gpt-5.5-loop-stop.json"} {
		t.Run(name, func(t *testing.T) {
			turns := growing(t, name)
			// The agent's requests: the turns whose last item is not the
			// model's and is followed by the model's, or by nothing.
			model := func(it gjson.Result) bool {
				typ := it.Get("type").String()
				if typ == "message" {
					return it.Get("role").String() == "assistant"
				}
				return !strings.HasSuffix(typ, "_output") && typ != "additional_tools"
			}
			items := gjson.GetBytes(turns[len(turns)-1], "input").Array()
			var reqs [][]byte
			for k := range items {
				if !model(items[k]) && (k == len(items)-1 || model(items[k+1])) {
					reqs = append(reqs, turns[k])
				}
			}
			memo := wire.NewTurnMemo[*turnState](0)
			agenttest.CheckContinued(t, reqs, func(body []byte) *wire.Info {
				r, err := readTurn(body, "t", nil, memo)
				if err != nil {
					t.Fatal(err)
				}
				judge(r)
				r.Forwarded(true)
				return &r.info
			}, func(body []byte) *wire.Info {
				r, _ := read(body, "t", nil)
				return &r.info
			})
		})
	}
}

// TestForgetDropsTheRemembered: Forget, before the request is forwarded
// or after, leaves the conversation's next turn to be read whole.
func TestForgetDropsTheRemembered(t *testing.T) {
	var memo *wire.TurnMemo[*turnState]
	agenttest.CheckForget(t, growing(t, "codex-turn3.json"), func() { memo = wire.NewTurnMemo[*turnState](0) }, func(body []byte) (wire.Request, bool) {
		r, err := readTurn(body, "t", nil, memo)
		if err != nil {
			t.Fatal(err)
		}
		judge(r)
		return r, r.resume.Prior != nil
	})
}

// samePlaces reports whether two requests found the same places: the
// first user message's compared by what it holds.
func samePlaces(a, b places) bool {
	fa, fb := a.first, b.first
	a.first, b.first = nil, nil
	return a == b && (fa == nil) == (fb == nil) && (fa == nil || *fa == *fb)
}

// TestMemoKeepsEachRun: two runs of one task (the same head, then calls
// of their own, and their own run id after the array, as Codex CLI sends
// its prompt_cache_key), taking turns, each read only their newest item,
// as a script that starts an agent with one prompt twice at once sends
// them.
func TestMemoKeepsEachRun(t *testing.T) {
	turns := growing(t, "codex-turn3.json")
	w, _ := read(turns[len(turns)-1], "t", nil)
	u := firstUserAt(w)
	memo := wire.NewTurnMemo[*turnState](0)
	agenttest.CheckRunsOfOneTask(t, turns[u:], w.elems[u].End, `"call_`, w.info.Run, func(b []byte) (int, int) {
		got, err := readTurn(b, "t", nil, memo)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(b, "t", nil)
		sameRead(t, b, got, want)
		from, elems := got.resume.From, len(got.elems)
		got.Forwarded(true)
		return from, elems
	})
	if memo.Len() != 1 {
		t.Fatalf("%d conversations remembered, want the task's one", memo.Len())
	}
}

// TestMemoReadsAChangedTailByMember: Codex CLI orders its client_metadata
// anew on every request, after its tools. The memo still reads only the
// newest item of each turn, reads as a full read does, and finds the
// tools the same bytes (one sum from turn to turn) though the bytes
// after the input changed.
func TestMemoReadsAChangedTailByMember(t *testing.T) {
	turns := growing(t, "codex-gpt-5.5-turn3.json")
	meta := gjson.GetBytes(turns[0], "client_metadata")
	var members []string
	meta.ForEach(func(k, v gjson.Result) bool {
		members = append(members, k.Raw+":"+v.Raw)
		return true
	})
	if len(members) < 3 {
		t.Fatalf("%d client_metadata members", len(members))
	}
	for i := range turns {
		// The members rotated by i.
		order := slices.Concat(members[i%len(members):], members[:i%len(members)])
		turns[i] = bytes.Replace(turns[i], []byte(meta.Raw), []byte("{"+strings.Join(order, ",")+"}"), 1)
	}
	memo := wire.NewTurnMemo[*turnState](0)
	w, _ := read(turns[len(turns)-1], "t", nil)
	u := firstUserAt(w)
	var sum uint64
	for i, body := range turns {
		got, err := readTurn(body, "t", nil, memo)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(body, "t", nil)
		sameRead(t, body, got, want)
		if i >= u+2 && got.resume.From != len(got.elems)-1 {
			t.Fatalf("turn %d: read from item %d of %d", i, got.resume.From, len(got.elems))
		}
		if i >= u+1 {
			if got.resume.TailKnown {
				t.Fatalf("turn %d: the bytes after the input are the last turn's", i)
			}
			if s := got.info.ToolDefsSum; s == 0 || sum != 0 && s != sum {
				t.Fatalf("turn %d: tools' sum %x, the turn before's %x", i, s, sum)
			}
			sum = got.info.ToolDefsSum
		}
		judge(got)
		got.Forwarded(true)
	}
}

// codexRun returns the requests of one run of Codex CLI 0.171.0 (model
// gpt-5-codex), in order, as it sent them through the proxy (serve --mock,
// a prompt whose shell command fails four times, then works): the same
// 21 KB before the items each request adds (head.part, then N.part: the
// items after the first request's), then 20 KB of tools and the rest,
// where its client_metadata (N.meta) stands in the order of that request.
func codexRun(t *testing.T) [][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "agents", "codex-run")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	head, tail, first := read("head.part"), read("tail.part"), read("1.meta")
	var reqs [][]byte
	for i := 1; ; i++ {
		meta, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.meta", i)))
		if err != nil {
			break
		}
		var added []byte
		if i > 1 {
			added = read(fmt.Sprintf("%d.part", i))
		}
		reqs = append(reqs, slices.Concat(head, added, bytes.Replace(tail, first, meta, 1)))
	}
	return reqs
}

// TestMemoOnARealCodexRun: the requests of a real Codex CLI run, whose
// client_metadata comes in a new order every time, read in order with
// one memo, read as in full; from the second on each is Continued and
// carries the tools' sum of the first (they are not hashed again), and
// from the third on only the items it adds are read, though the bytes
// after the input are never the last request's.
func TestMemoOnARealCodexRun(t *testing.T) {
	reqs := codexRun(t)
	if len(reqs) != 6 {
		t.Fatalf("%d requests", len(reqs))
	}
	memo := wire.NewTurnMemo[*turnState](0)
	prevElems := 0
	var sum uint64
	orders := map[string]bool{}
	for i, body := range reqs {
		if !gjson.ValidBytes(body) {
			t.Fatalf("request %d is not JSON", i+1)
		}
		var keys []string
		gjson.GetBytes(body, "client_metadata").ForEach(func(k, _ gjson.Result) bool {
			keys = append(keys, k.Str)
			return true
		})
		orders[strings.Join(keys, ",")] = true
		got, err := readTurn(body, "t", nil, memo)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(body, "t", nil)
		sameRead(t, body, got, want)
		if got.info.Continued != (i > 0) {
			t.Fatalf("request %d: Continued %v", i+1, got.info.Continued)
		}
		if s := got.info.ToolDefsSum; s == 0 || i > 0 && s != sum {
			t.Fatalf("request %d: tools' sum %x, the first's %x", i+1, s, sum)
		}
		sum = got.info.ToolDefsSum
		if i > 1 && (got.resume.From != prevElems || got.resume.TailKnown) {
			t.Fatalf("request %d: read from item %d of %d (the request before had %d), tail known %v", i+1, got.resume.From, len(got.elems), prevElems, got.resume.TailKnown)
		}
		prevElems = len(got.elems)
		judge(got)
		got.Forwarded(true)
	}
	if len(orders) < 4 {
		t.Fatalf("%d orders of client_metadata in %d requests: not the reordering run", len(orders), len(reqs))
	}
}
