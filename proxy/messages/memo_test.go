package messages

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
	if got.first != want.first || got.newest != want.newest || got.system != want.system {
		t.Fatalf("places with memo %+v %+v, in full %+v %+v", got.first, got.newest, want.first, want.newest)
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
	f.Add(claudeTurn, `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_03","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_03","content":"Error: no"}]}`, "")
	f.Add(claudeTurn, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","is_error":false,"content":"ok"}]}`, `,"metadata":{"user_id":"other"}}`)
	f.Add(`{"system":"s","messages":[{"role":"user","content":"g"}],"model":"a"}`, `,{"role":"assistant","content":"x"}`, `,"system":"t","model":"b"}`)
	f.Add(`{"messages":[{"role":"user","content":"g"}],"system":[{"type":"text","text":"a"}]}`, `,{"role":"user","content":"h"}`, "")
	f.Add(`{"messages":[{"role":"user","content":"<system-reminder>x</system-reminder>"}]}`, `,{"role":"user","content":"the task"}`, "")
	// Tails that change in one member: the others' values are taken as
	// they were, a number that goes on is not.
	f.Add(`{"messages":[{"role":"user","content":"g"}],"system":"s","tools":[{"name":"a"}],"max_tokens":1}`, `,{"role":"assistant","content":"x"}`, `,"system":"s","tools":[{"name":"a"}],"max_tokens":12}`)
	f.Add(`{"messages":[{"role":"user","content":"g"}],"system":"s","max_tokens":1,"tools":[]}`, `,{"role":"assistant","content":"x"}`, `,"max_tokens":1,"system":"s","tools":[],"tools":[]}`)
	f.Add(`{"messages":[{"role":"user","content":"g"},1]}`, `2`, "")
	f.Add(`{"messages":[{"role":"user","content":"g"}]}`, `,{`, "")
	f.Add(`{"messages":[{"role":"user","content":"g"}],"messages":[]}`, `,{}`, "")
	f.Fuzz(func(t *testing.T, first, added, tail string) {
		memo := wire.NewTurnMemo[*turnState](1 << 20)
		body := []byte(first)
		r1, err := readTurn(body, memo, "t")
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
		got, gerr := readTurn(next, memo, "t")
		want, werr := read(next)
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
		again, err := readTurn(next, memo, "t")
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
			g, gerr := readTurn(b, memo, "t")
			w, werr := read(b)
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
	gjson.GetBytes(r.body, "messages").ForEach(func(k, m gjson.Result) bool {
		if m.Get("role").String() == "user" {
			i = int(k.Int())
			return false
		}
		return true
	})
	return i
}

// growing returns the turns of a conversation built from a captured
// Claude Code turn: its first k messages, for k from 1 on.
func growing(t testing.TB, name string) [][]byte {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "agents", name))
	if err != nil {
		t.Fatal(err)
	}
	msgs := gjson.GetBytes(body, "messages")
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
	for _, name := range []string{"claude-turn3.json", "claude-loop-stop.json"} {
		t.Run(name, func(t *testing.T) {
			turns := growing(t, name)
			if len(turns) < 4 {
				t.Fatalf("%d turns", len(turns))
			}
			memo := wire.NewTurnMemo[*turnState](0)
			// The turns from the one after the head (the first user
			// message, which names the conversation) are remembered.
			w, _ := read(turns[len(turns)-1])
			u := firstUserAt(w)
			for i, body := range turns {
				got, err := readTurn(body, memo, "t")
				if err != nil {
					t.Fatal(err)
				}
				want, _ := read(body)
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
				again, err := readTurn(body, memo, "t")
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
			other, err := readTurn(turns[len(turns)-1], memo, "u")
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
	turns := growing(t, "claude-turn3.json")
	body := turns[len(turns)-1]
	memo := wire.NewTurnMemo[*turnState](256 << 10)
	for i := range 200 {
		r, err := readTurn(body, memo, "tenant-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
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
	turns := growing(t, "claude-loop-stop.json")
	wants := make([]*request, len(turns))
	for i, body := range turns {
		w, err := read(body)
		if err != nil {
			t.Fatal(err)
		}
		judge(w)
		wants[i] = w
	}
	memo := wire.NewTurnMemo[*turnState](0)
	agenttest.Interleaved(len(turns), func(i int) bool {
		got, err := readTurn(turns[i], memo, "t")
		if err != nil {
			t.Error(err)
			return false
		}
		judge(got)
		if gt, wt := got.info.Tallies(), wants[i].info.Tallies(); !slices.Equal(gt, wt) || got.info.Goal != wants[i].info.Goal ||
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
// the conversation's first, nor one that extends it by two answers (the
// turn between went through another replica), nor the same turn again.
func TestContinuedTurnAddsOneAnswer(t *testing.T) {
	turns := growing(t, "claude-loop-stop.json")
	// The agent's requests: the turns that end with a user message.
	var reqs [][]byte
	for _, body := range turns {
		msgs := gjson.GetBytes(body, "messages").Array()
		if msgs[len(msgs)-1].Get("role").String() == "user" {
			reqs = append(reqs, body)
		}
	}
	memo := wire.NewTurnMemo[*turnState](0)
	agenttest.CheckContinued(t, reqs, func(body []byte) *wire.Info {
		r, err := readTurn(body, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		judge(r)
		r.Forwarded(true)
		return &r.info
	}, func(body []byte) *wire.Info {
		r, _ := read(body)
		return &r.info
	})
}

// TestForgetDropsTheRemembered: Forget, before the request is forwarded
// or after, leaves the conversation's next turn to be read whole.
func TestForgetDropsTheRemembered(t *testing.T) {
	var memo *wire.TurnMemo[*turnState]
	agenttest.CheckForget(t, growing(t, "claude-turn3.json"), func() { memo = wire.NewTurnMemo[*turnState](0) }, func(body []byte) (wire.Request, bool) {
		r, err := readTurn(body, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		judge(r)
		return r, r.resume.Prior != nil
	})
}

// claudeRun returns the requests of one run of Claude Code 2.1.197, in
// order, as it sent them through the proxy (serve --mock, a prompt whose
// shell command fails four times, then works): the same bytes before and
// after the messages array on every request, and an array that grows by
// the model's answer and the results, the cache_control marker moving to
// the newest message each time.
func claudeRun(t *testing.T) [][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "agents", "claude-run")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	head, tail := read("head.part"), read("tail.part")
	var reqs [][]byte
	for i := 1; ; i++ {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%d.part", i))); err != nil {
			break
		}
		reqs = append(reqs, slices.Concat(head, read(fmt.Sprintf("%d.part", i)), tail))
	}
	return reqs
}

// TestVerdictsAppendInPlace: a conversation's next turn appends its
// verdicts to its turn before's in place instead of copying them turn
// after turn (every turn holds its first verdict where the first turn
// did); a retry of a turn copies, and every turn reads as read in full.
func TestVerdictsAppendInPlace(t *testing.T) {
	// A Claude Code turn, then a call and its result a turn, 16 times.
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-turn3.json"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := gjson.GetBytes(body, "messages")
	end := msgs.Index + len(msgs.Raw) - 1
	turns := [][]byte{body}
	for k := range 16 {
		round := fmt.Sprintf(`,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_r%d","name":"Bash","input":{"command":"ls %d"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_r%d","content":"file%d"}]}`, k, k, k, k)
		prev := turns[len(turns)-1]
		turns = append(turns, slices.Concat(prev[:end], []byte(round), prev[end:]))
		end += len(round)
	}
	memo := wire.NewTurnMemo[*turnState](0)
	var arrays []*wire.ToolTally
	for i, body := range turns {
		for retry := range 2 {
			got := tallyTurn(t, body, memo, fmt.Sprintf("turn %d (retry %d)", i, retry))
			if p := got.resume.Prior; retry == 0 && p != nil && p.State.verdicts.Len() > 0 {
				arrays = append(arrays, p.State.verdicts.At(0))
			}
			got.Forwarded(true)
		}
	}
	// Sixteen turns of one result more each, in the chunks of the first.
	if distinct := len(slices.Compact(arrays)); len(arrays) < 16 || distinct > 1 {
		t.Errorf("%d turns resumed with verdicts hold them in %d arrays", len(arrays), distinct)
	}
}

// tallyTurn reads body with memo and in full, judges the tool results of
// both, and fails t unless their tallies agree; it returns the read with
// memo.
func tallyTurn(t *testing.T, body []byte, memo *wire.TurnMemo[*turnState], label string) *request {
	t.Helper()
	got, err := readTurn(body, memo, "t")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := read(body)
	judge(got)
	judge(want)
	if gt, wt := got.info.Tallies(), want.info.Tallies(); !slices.Equal(gt, wt) {
		t.Fatalf("%s: tallies %v, in full %v", label, gt, wt)
	}
	if !slices.Equal(got.info.Tools, want.info.Tools) {
		t.Fatalf("%s: tools %q, in full %q", label, got.info.Tools, want.info.Tools)
	}
	return got
}

// TestVerdictsSharedWhenResumedShort: Claude Code moves its cache marker
// to the newest message on every request, so each request resumes one
// message short of the turn before's end. Its verdicts keep the turn's
// chunks (every turn holds its first verdict where the first did, once
// the first chunk is full) and their tallies are those up to where it
// resumed; its tools' names go on in the turn's array (a few arrays for
// 20 turns, not one a turn). Every turn reads as read in full; so does a branch that
// replaces the newest call and its result with another tool's (one that
// failed where the other worked, or worked where it failed), which takes
// out a verdict that a later one does not put back.
func TestVerdictsSharedWhenResumedShort(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-turn3.json"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := gjson.GetBytes(body, "messages")
	head, tail := body[:msgs.Index+len(msgs.Raw)-1], body[msgs.Index+len(msgs.Raw)-1:]
	round := func(k int, tool string, failed bool) string {
		out := fmt.Sprintf("file%d", k)
		if failed {
			out = fmt.Sprintf("Error: no such file %d", k)
		}
		return fmt.Sprintf(`,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_s%d","name":%q,"input":{"n":%d}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_s%d","content":%q`, k, tool, k, k, out)
	}
	turn := func(rounds []string) []byte {
		var b bytes.Buffer
		b.Write(head)
		for i, r := range rounds {
			b.WriteString(r)
			if i == len(rounds)-1 {
				b.WriteString(`,"cache_control":{"type":"ephemeral"}`)
			}
			b.WriteString(`}]}`)
		}
		b.Write(tail)
		return b.Bytes()
	}
	memo := wire.NewTurnMemo[*turnState](0)
	var firsts []*wire.ToolTally
	var toolArrays []*string
	short := 0
	send := func(label string, body []byte) {
		got := tallyTurn(t, body, memo, label)
		if p := got.resume.Prior; p != nil {
			if got.resume.From < len(p.Elems) {
				short++
			}
			if got.verdicts.Len() >= wire.ChunkLen {
				firsts = append(firsts, got.verdicts.At(0))
			}
			if !strings.HasPrefix(label, "branch") {
				toolArrays = append(toolArrays, unsafe.SliceData(got.info.Tools))
			}
		}
		got.Forwarded(true)
	}
	tools := []string{"Bash", "Read", "Bash", "Edit", "Bash", "Grep"}
	var rounds []string
	for k := range 20 {
		tool := tools[k%len(tools)]
		if k >= 12 {
			tool = fmt.Sprintf("Tool%d", k) // first answering in the newest message
		}
		failed := k%3 == 1
		rounds = append(rounds, round(k, tool, failed))
		send(fmt.Sprintf("turn %d", k), turn(rounds))
		if k%4 == 2 {
			branch := slices.Concat(rounds[:k], []string{round(100+k, "Other", !failed)})
			send(fmt.Sprintf("branch at turn %d", k), turn(branch))
		}
	}
	if short < 15 {
		t.Fatalf("%d turns resumed short of the turn before's end; want the turns after the first few", short)
	}
	if distinct := len(slices.Compact(firsts)); len(firsts) < 10 || distinct > 1 {
		t.Errorf("%d turns resumed short hold their first verdict in %d places", len(firsts), distinct)
	}
	if distinct := len(slices.Compact(toolArrays)); len(toolArrays) < 15 || distinct > 6 {
		t.Errorf("%d turns resumed short hold their tools in %d arrays", len(toolArrays), distinct)
	}
}

// TestContinuedOnARealRun: the requests of a real Claude Code run, read in
// order with one memo, are Continued from the third on. The first user
// message names the conversation, and in the first request it carries the
// cache_control marker, which the second moves to its newest message: the
// second request (its first tool result) does not find the first. Each
// later one reads the newest results again with the message the marker
// moved out of, and still adds one answer of the model.
func TestContinuedOnARealRun(t *testing.T) {
	reqs := claudeRun(t)
	if len(reqs) != 6 {
		t.Fatalf("%d requests", len(reqs))
	}
	memo := wire.NewTurnMemo[*turnState](0)
	for i, body := range reqs {
		r, err := readTurn(body, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		judge(r)
		if want := i >= 2; r.info.Continued != want {
			t.Fatalf("request %d: Continued %v, want %v", i+1, r.info.Continued, want)
		}
		if i > 0 && len(r.info.ToolResults) == 0 {
			t.Fatalf("request %d: its newest tool result was not read", i+1)
		}
		r.Forwarded(true)
	}
	// Each request replaced the one before (its last message, the marker
	// moved off it, is all that changed of it): the memo holds what the
	// first request and the last hold alone, not a branch per request.
	alone := 0
	for _, body := range [][]byte{reqs[0], reqs[len(reqs)-1]} {
		m := wire.NewTurnMemo[*turnState](0)
		r, err := readTurn(body, m, "t")
		if err != nil {
			t.Fatal(err)
		}
		judge(r)
		r.Forwarded(true)
		alone += m.Bytes()
	}
	if b := memo.Bytes(); b > alone {
		t.Fatalf("the memo holds %d bytes after the run, %d for its first and last requests alone", b, alone)
	}
}

// TestMemoKeepsEachRun: two runs of one task (the same head, then calls
// of their own, and their own run id after the array, as Claude Code
// sends its session in metadata.user_id), taking turns, each read only
// their newest message, as a script that starts an agent with one prompt
// twice at once sends them.
func TestMemoKeepsEachRun(t *testing.T) {
	turns := growing(t, "claude-turn3.json")
	w, _ := read(turns[len(turns)-1])
	u := firstUserAt(w)
	memo := wire.NewTurnMemo[*turnState](0)
	agenttest.CheckRunsOfOneTask(t, turns[u:], w.elems[u].End, `"toolu_`, w.info.Run, func(b []byte) (int, int) {
		got, err := readTurn(b, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(b)
		sameRead(t, b, got, want)
		from, elems := got.resume.From, len(got.elems)
		got.Forwarded(true)
		return from, elems
	})
	if memo.Len() != 1 {
		t.Fatalf("%d conversations remembered, want the task's one", memo.Len())
	}
}

// TestMemoReadsAChangedTailByMember: a turn whose bytes after the
// messages changed in one member (max_tokens here) reads only its newest
// message, as a full read does, and takes the system text and the tools'
// sum of the turn before from the memo: their bytes are the same.
func TestMemoReadsAChangedTailByMember(t *testing.T) {
	turns := growing(t, "claude-turn3.json")
	for i := range turns {
		turns[i] = bytes.Replace(turns[i], []byte(`"max_tokens":64000`), fmt.Appendf(nil, `"max_tokens":%d`, 64000+i), 1)
	}
	memo := wire.NewTurnMemo[*turnState](0)
	w, _ := read(turns[len(turns)-1])
	u := firstUserAt(w)
	var prev *request
	for i, body := range turns {
		got, err := readTurn(body, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		want, _ := read(body)
		sameRead(t, body, got, want)
		if i >= u+2 && got.resume.From != len(got.elems)-1 {
			t.Fatalf("turn %d: read from message %d of %d", i, got.resume.From, len(got.elems))
		}
		if i >= u+1 {
			g, p := got.info, prev.info
			if got.resume.TailKnown || g.System == "" || unsafe.StringData(g.System) != unsafe.StringData(p.System) {
				t.Fatalf("turn %d: tail known %v, the system text decoded again: %v", i, got.resume.TailKnown, unsafe.StringData(g.System) != unsafe.StringData(p.System))
			}
			if g.ToolDefsSum == 0 || g.ToolDefsSum != p.ToolDefsSum {
				t.Fatalf("turn %d: tools' sum %x, the turn before's %x", i, g.ToolDefsSum, p.ToolDefsSum)
			}
		}
		judge(got)
		got.Forwarded(true)
		prev = got
	}
}

// TestSystemTextDecodedOnce: the first turns of two Claude Code
// conversations (its system blocks, two tasks) read through the format
// share the system text decoded for the first, and each one's key is the
// conversation's.
func TestSystemTextDecodedOnce(t *testing.T) {
	turn := growing(t, "claude-turn1.json")[0]
	f := New()
	first, err := f.Read(turn, wire.Route{Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	task := first.Info().Goal
	other := bytes.Replace(turn, []byte(task), []byte("Rename the package to cfg."), 1)
	if task == "" || bytes.Equal(other, turn) || len(first.Info().System) < 1<<10 {
		t.Fatal("the capture has no task to replace or no long system text")
	}
	second, err := f.Read(other, wire.Route{Tenant: "t"})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := read(other)
	if s := second.Info().System; s != full.info.System || unsafe.StringData(s) != unsafe.StringData(first.Info().System) {
		t.Error("the second conversation's system text was decoded again, or differs")
	}
	if k := second.Info().Key; k != full.info.Key || k == first.Info().Key {
		t.Errorf("keys %q, read in full %q, the first conversation's %q", k, full.info.Key, first.Info().Key)
	}
}

// TestSystemCheckedOnce: a conversation's system value is scanned for the
// openings of blocks when a turn places blocks, once: the next turn, whose
// system value is the same bytes, takes the answer with the remembered
// turn, and places its blocks as a read in full does.
func TestSystemCheckedOnce(t *testing.T) {
	turns := growing(t, "claude-turn1.json")
	if len(turns) < 2 {
		t.Fatal("the capture has one message")
	}
	memo := wire.NewTurnMemo[*turnState](0)
	for i, body := range turns[:2] {
		got, err := readTurn(body, memo, "t")
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
		want, _ := read(body)
		if full, _ := want.Inject(nil, body, turnPlacement()); !bytes.Equal(out, full) {
			t.Fatalf("turn %d placed its blocks otherwise than a read in full", i)
		}
		judge(got)
		got.Forwarded(true)
	}
}
