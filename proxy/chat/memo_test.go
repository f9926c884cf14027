package chat

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// agentTurn renders turn n of an agent's conversation: the system prompt,
// the task, then n rounds of tool call and result; other top-level fields
// come after the messages, as many clients send them.
func agentTurn(t testing.TB, n int) []byte {
	t.Helper()
	msgs := []map[string]any{
		{"role": "system", "content": "You are a coding agent.\nBe careful."},
		{"role": "user", "content": "Fix the failing test"},
	}
	for i := range n {
		id := "call_" + strconv.Itoa(i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": id, "type": "function", "function": map[string]any{"name": "run_tests", "arguments": `{"pkg":"./..."}`}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": "--- FAIL: TestX (0.00s)\nFAIL\tpkg\t0.01s"})
	}
	// json.Marshal sorts map keys: "messages" comes before "model",
	// "stream" and "tools", so each turn's messages end before fields that
	// follow them.
	b, err := json.Marshal(map[string]any{"messages": msgs, "model": "m", "stream": n%2 == 0, "tools": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newest returns the turn remembered last under key in half, nil when
// none.
func newest(half map[uint64]*memoBranches, key uint64) *memoEntry {
	if b := half[key]; b != nil {
		return b.entries[0]
	}
	return nil
}

// results lists the dedupe keys of c's tool results.
func results(c *conversation) []string {
	var keys []string
	for _, tr := range c.info.ToolResults {
		keys = append(keys, tr.Key)
	}
	return keys
}

func TestMemoKeepsConversationsWithOnePromptApart(t *testing.T) {
	memo := newConvMemo(8)
	prompt := strings.Repeat("You are a careful coding agent. ", 600) // about 19 KB
	body := func(goal string, rounds int) []byte {
		msgs := []map[string]any{{"role": "system", "content": prompt}, {"role": "user", "content": goal}}
		for i := range rounds {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": "step " + strconv.Itoa(i)})
		}
		b, err := json.Marshal(map[string]any{"model": "m", "messages": msgs})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	read := func(b []byte, tenant string) *conversation {
		t.Helper()
		c, err := inspect(b, memo, tenant)
		if err != nil {
			t.Fatal(err)
		}
		sameRead(t, b, memo)
		return c
	}
	// Two agents of a team share the prompt; their goals end alike. The
	// name of a conversation holds its goal: each finds its own turn.
	first, second := "fix the parser: it fails on tabs", "add a tests file: it fails on tabs"
	memo.remember(read(body(first, 1), "t"), body(first, 1))
	memo.remember(read(body(second, 1), "t"), body(second, 1))

	c := read(body(first, 3), "t")
	if c.from != 3 || c.info.Goal != first || c.info.Model != "m" {
		t.Fatalf("next turn: read from message %d, goal %q, model %q", c.from, c.info.Goal, c.info.Model)
	}
	if c := read(body(second, 2), "t"); c.from != 3 || c.info.Goal != second {
		t.Fatalf("the other agent's next turn: read from message %d, goal %q", c.from, c.info.Goal)
	}
	// A goal the memo has not seen, ending as a remembered one does, and
	// the same conversation in another tenant: read in full.
	if c := read(body("do not fix the parser: it fails on tabs", 1), "t"); c.from != 0 {
		t.Fatalf("an unknown conversation was taken for a known one (from %d)", c.from)
	}
	if c := read(body(first, 3), "other"); c.from != 0 {
		t.Fatal("another tenant's turn was found in the memo")
	}
}

func TestMemoReadsOnlyNewMessages(t *testing.T) {
	memo := newConvMemo(8)
	const tenant = "ws\x00proj"
	turn1 := agentTurn(t, 1)
	c1, err := inspect(turn1, memo, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if c1.from != 0 || !slices.Equal(results(c1), []string{"call:call_0"}) {
		t.Fatalf("turn 1: from %d, results %v", c1.from, results(c1))
	}
	c1.info.ToolResults[0].Failed = true // as recordToolErrors would set it
	memo.remember(c1, turn1)

	turn3 := agentTurn(t, 3)
	c3, err := inspect(turn3, memo, tenant)
	if err != nil {
		t.Fatal(err)
	}
	full, err := inspect(turn3, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if c3.from != len(c1.scan.msgs) {
		t.Fatalf("turn 3 starts with turn 1's %d messages but was read from message %d", len(c1.scan.msgs), c3.from)
	}
	if got := results(c3); !slices.Equal(got, []string{"call:call_1", "call:call_2"}) {
		t.Errorf("turn 3 read tool results %v, want only the two new ones", got)
	}
	if priorFailures(c3) != 1 || c3.info.ToolCount != 3 || !slices.Equal(c3.info.Tools, full.info.Tools) ||
		c3.info.System != full.info.System || c3.info.Goal != full.info.Goal || c3.info.Key != full.info.Key ||
		c3.info.Model != full.info.Model || c3.info.Stream != full.info.Stream {
		t.Errorf("turn 3 with memo %+v\nread in full %+v", summarize(c3), summarize(full))
	}
	if !slices.Equal(c3.scan.msgs, full.scan.msgs) || !slices.Equal(c3.scan.calls, full.scan.calls) || c3.scan.messages != full.scan.messages {
		t.Error("the positions found with the memo differ from a full scan")
	}
	// The remembered turn is unchanged by turn 3's reading.
	if e := newest(memo.cur, c1.memoKey); e == nil || len(e.tools) != 1 || e.verdicts.Len() != 1 || !e.verdicts.At(0).LastFailed {
		t.Errorf("remembered turn changed: %+v", e)
	}

	// A turn that replaces turn 1's last round (a retry) is read from
	// where it differs.
	retry := []byte(strings.Replace(string(turn1), "--- FAIL: TestX", "--- FAIL: TestY", 1))
	cr, err := inspect(retry, memo, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if cr.from != len(c1.scan.msgs)-1 || !slices.Equal(results(cr), []string{"call:call_0"}) || priorFailures(cr) != 0 || len(cr.info.Tools) != 1 {
		t.Errorf("retry read from message %d (want %d), results %v, failures before %d, tools %v", cr.from, len(c1.scan.msgs)-1, results(cr), priorFailures(cr), cr.info.Tools)
	}

	// Remember turn 3, then read bodies that differ from it.
	c3.info.ToolResults[0].Failed = true
	memo.remember(c3, turn3)
	tests := []struct {
		name   string
		body   []byte
		tenant string
		from   int // the first message read
	}{
		{"another tenant", turn3, "other\x00proj", 0},
		{"the first tool result changed", []byte(strings.Replace(string(turn3), "FAIL\\tpkg", "FAIL\\tPKG", 1)), tenant, 3},
		{"the same task in another conversation", []byte(strings.Replace(string(turn3), "Be careful.", "Be quick.", 1)), tenant, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := inspect(tt.body, memo, tt.tenant)
			if err != nil {
				t.Fatal(err)
			}
			if c.from != tt.from || len(c.info.ToolResults) != 3 || priorFailures(c) != 0 || c.info.ToolCount != 3 {
				t.Errorf("read from message %d (want %d), %d tool results read, %d failed before; want 3 read, none failed before", c.from, tt.from, len(c.info.ToolResults), priorFailures(c))
			}
		})
	}

	// What follows the remembered bytes is still checked.
	bad := append([]byte(nil), turn3...)
	bad[len(bad)-2] = ','
	if _, err := inspect(bad, memo, tenant); err == nil {
		t.Error("invalid JSON after the remembered bytes was accepted")
	}
}

func TestMemoIsBounded(t *testing.T) {
	memo := newConvMemo(2)
	for i := range 7 {
		body := []byte(`{"messages":[{"role":"user","content":"task ` + strconv.Itoa(i) + `"}]}`)
		c, err := inspect(body, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		memo.remember(c, body)
	}
	memo.mu.Lock()
	if n := len(memo.cur) + len(memo.prev); n > 4 {
		t.Fatalf("memo holds %d conversations, want at most 4", n)
	}
	memo.mu.Unlock()

	// By size: long conversations fill a half sooner, and a turn larger
	// than a quarter of it is not kept at all.
	memo = newConvMemo(512)
	long := strings.Repeat(`,{"role":"assistant","content":"ok"}`, 8000)
	for i := range 20 {
		body := []byte(`{"messages":[{"role":"user","content":"task ` + strconv.Itoa(i) + `"}` + long + `]}`)
		c, err := inspect(body, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		memo.remember(c, body)
		memo.mu.Lock()
		total, all := memo.curBytes, memo.curBytes+memo.prevBytes
		for _, b := range memo.cur {
			for _, e := range b.entries {
				total -= e.size()
				all -= e.size()
			}
		}
		for _, b := range memo.prev {
			for _, e := range b.entries {
				all -= e.size()
			}
		}
		if memo.curBytes > memoBytes || total != 0 || all != 0 {
			t.Fatalf("after %d long turns: %d bytes counted (%d off, %d off over both halves), the bound is %d", i+1, memo.curBytes, total, all, memoBytes)
		}
		memo.mu.Unlock()
	}
	huge := []byte(`{"messages":[{"role":"system","content":"` + strings.Repeat("x", memoBytes/2) + `"},{"role":"user","content":"go"},{"role":"assistant","content":"ok"}]}`)
	c, err := inspect(huge, memo, "t")
	if err != nil {
		t.Fatal(err)
	}
	memo.remember(c, huge)
	if _, ok := memo.cur[c.memoKey]; ok {
		t.Error("a turn larger than a quarter of the memo was remembered")
	}
}

// priorFailures counts the failed tool results of the messages the memo
// skipped.
func priorFailures(c *conversation) int {
	n := 0
	for _, t := range c.info.Prior {
		n += t.Failures
	}
	return n
}

// judge gives each tool result of c a verdict, the same for the same
// result whoever reads it: as the pipeline would, before remember.
func judge(c *conversation) {
	for i := range c.info.ToolResults {
		tr := &c.info.ToolResults[i]
		tr.Failed = (len(tr.Key)+len(tr.Raw))%2 == 1
	}
}

// sameRead checks that reading body with memo finds what reading it in
// full does.
func sameRead(t *testing.T, body []byte, memo *convMemo) {
	t.Helper()
	got, gerr := inspect(body, memo, "t")
	want, werr := inspect(body, nil, "")
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("with memo: %v; in full: %v", gerr, werr)
	}
	if gerr != nil {
		return
	}
	all := results(want)
	if r := results(got); !slices.Equal(r, all[len(all)-len(r):]) {
		t.Fatalf("tool results %v, in full %v", r, all)
	}
	if got.info.Model != want.info.Model || got.info.User != want.info.User || got.info.Stream != want.info.Stream || got.info.Key != want.info.Key ||
		got.info.System != want.info.System || got.info.Goal != want.info.Goal || got.info.ToolCount != want.info.ToolCount || !slices.Equal(got.info.Tools, want.info.Tools) ||
		!slices.Equal(got.scan.msgs, want.scan.msgs) || !slices.Equal(got.scan.calls, want.scan.calls) || got.scan.messages != want.scan.messages {
		t.Fatalf("with memo %+v\nin full %+v", summarize(got), summarize(want))
	}
}

// FuzzInspectMemo: reading a body with the memo of an earlier turn finds
// the same as reading it in full, whatever was added after the earlier
// turn's messages (valid or not), and whatever follows the messages array
// (the earlier turn's bytes, or tail when it is not empty).
func FuzzInspectMemo(f *testing.F) {
	f.Add(string(agentTurn(f, 1)), `,{"role":"assistant","tool_calls":[{"id":"x","function":{"name":"ls"}}]},{"role":"tool","tool_call_id":"x","content":"ok"}`, "")
	f.Add(string(agentTurn(f, 0)), `,{"role":"tool","content":"no id"}`, "")
	f.Add(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"g"}],"user":"u"}`, `,1,"x",{"role":"user","content":"second"}`, "")
	f.Add(`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"g"}],"user":"u"}`, `,{"role":"user","content":"second"}`, `,"user":"v"}`)
	f.Add(`{"messages":[{"role":"user","content":"g"}],"stream":true,"model":"a"}`, `,{"role":"tool","content":"x"}`, `,"stream":false,"model":"b"}`)
	f.Add(`{"messages":[{"role":"user","content":"g"}],"model":"a"}`, ``, `,"model":"a"} `)
	f.Add(`{"stream":true,"model":"m","user":"u","messages":[{"role":"system","content":"a system prompt"},{"role":"user","content":"goal"}],"model":"n"}`, `,{"role":"assistant","content":"x"}`, "")
	f.Add(`{"messages":[{"role":"user","content":"g"}],"model":"a"}`, `,{}`, `,"model":"a"`)
	f.Add(`{"messages":[{"role":"user","content":"g"}]}`, `,{`, "")
	f.Add(`{"messages":[{"role":"user","content":"g"}]}`, `]}{`, "")
	// The task comes after a wrapper: a later turn must find it, once.
	f.Add(`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"<environment_context>\n<cwd>/w</cwd>\n</environment_context>"}]}`, `,{"role":"user","content":"the task"},{"role":"user","content":"more"}`, "")
	f.Add(`{"messages":[{"role":"user","content":"<environment_context>\n<cwd>/w</cwd>\n</environment_context>"},{"role":"user","content":"task one"}]}`, `,{"role":"assistant","content":"x"}`, "")
	f.Add(`{"messages":[{"role":"user","content":"g"},1]}`, `2`, "")
	f.Fuzz(func(t *testing.T, first, added, tail string) {
		memo := newConvMemo(4)
		body := []byte(first)
		c1, err := inspect(body, memo, "t")
		if err != nil || len(c1.scan.msgs) == 0 {
			return
		}
		judge(c1)
		// The proxy places its blocks in the turn it forwards, a copy: the
		// memo remembers the client's bytes, which the next turn repeats.
		if out, err := c1.Inject(nil, body, turnPlacement(2)); err == nil && !gjson.ValidBytes(out) {
			t.Fatalf("turn placement: invalid JSON %q", out)
		}
		if string(body) != first {
			t.Fatal("the turn placement changed the client's body")
		}
		memo.remember(c1, body)
		end := c1.scan.msgs[len(c1.scan.msgs)-1].end
		rest := first[end:]
		if tail != "" && c1.scan.messages.ok() {
			rest = first[end:c1.scan.messages.end] + tail
		}
		next := first[:end] + added + rest
		got, gerr := inspect([]byte(next), memo, "t")
		want, werr := inspect([]byte(next), nil, "")
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("with memo: %v; in full: %v", gerr, werr)
		}
		if gerr != nil {
			return
		}
		// The remembered turn's messages are all repeated (after the first
		// user message, which names the conversation).
		if c1.memoOK && got.memoKey == c1.memoKey && len(c1.scan.msgs) > len(c1.marks[:1]) {
			probe := 0
			for probe < len(c1.scan.msgs) && c1.scan.msgs[probe].kind != roleUser {
				probe++
			}
			if probe < len(c1.scan.msgs)-1 && c1.scan.msgs[len(c1.scan.msgs)-1].obj && got.from != len(c1.scan.msgs) {
				t.Fatalf("read from message %d, but the %d remembered messages were repeated", got.from, len(c1.scan.msgs))
			}
		}
		// Results read with the memo are the newest of those read in full.
		all := results(want)
		if r := results(got); !slices.Equal(r, all[len(all)-len(r):]) {
			t.Fatalf("tool results %v, in full %v", r, all)
		}
		// The tallies per tool, of what the memo skipped and what was read,
		// are those of a full read.
		judge(got)
		judge(want)
		if g, w := got.info.Tallies(), want.info.Tallies(); !slices.Equal(g, w) {
			t.Fatalf("tallies with memo %v, in full %v", g, w)
		}
		if got.from == len(c1.scan.msgs) && len(all)-len(got.info.ToolResults) != c1.info.ToolCount {
			t.Fatalf("skipped %d tool results, the remembered turn had %d", len(all)-len(got.info.ToolResults), c1.info.ToolCount)
		}
		if got.info.Model != want.info.Model || got.info.User != want.info.User || got.info.Stream != want.info.Stream || got.info.Key != want.info.Key || got.info.Later != want.info.Later ||
			got.info.System != want.info.System || got.info.Goal != want.info.Goal || got.info.ToolCount != want.info.ToolCount || !slices.Equal(got.info.Tools, want.info.Tools) {
			t.Fatalf("with memo %+v\nin full %+v", summarize(got), summarize(want))
		}
		if !slices.Equal(got.scan.msgs, want.scan.msgs) || !slices.Equal(got.scan.calls, want.scan.calls) ||
			got.scan.messages != want.scan.messages || got.scan.model != want.scan.model || got.scan.user != want.scan.user || got.scan.stream != want.scan.stream {
			t.Fatal("positions found with the memo differ from a full scan")
		}
		// Remembering a turn that was itself read with the memo keeps the
		// whole turn: the same body again skips every message after the
		// first user message.
		memo.remember(got, []byte(next))
		again, err := inspect([]byte(next), memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		judge(again)
		if g, w := again.info.Tallies(), want.info.Tallies(); !slices.Equal(g, w) {
			t.Fatalf("tallies of the third read %v, in full %v", g, w)
		}
		msgs := want.scan.msgs
		if got.from > 0 && msgs[len(msgs)-1].obj && again.from != len(msgs) {
			t.Fatalf("the same body again was read from message %d of %d", again.from, len(msgs))
		}
		if again.info.ToolCount != want.info.ToolCount || !slices.Equal(again.info.Tools, want.info.Tools) || again.info.Goal != want.info.Goal || again.info.System != want.info.System ||
			again.info.Model != want.info.Model || again.info.User != want.info.User || again.info.Stream != want.info.Stream || again.info.Later != want.info.Later {
			t.Fatalf("third read %+v\nin full %+v", summarize(again), summarize(want))
		}
		if again.scan.model != want.scan.model || again.scan.user != want.scan.user || again.scan.stream != want.scan.stream || again.scan.messages != want.scan.messages {
			t.Fatal("positions found by the third read differ from a full scan")
		}
		if got.memoOK && len(got.marks) > 0 && !got.scan.truncated && !again.tailKnown {
			t.Fatal("the same body again scanned what follows its messages")
		}
		// A body that differs by one bit from a remembered one is read as
		// it is.
		if len(next) > 0 {
			other := []byte(next)
			other[len(added)%len(other)] ^= 1
			sameRead(t, other, memo)
			if o, err := inspect(other, memo, "t"); err == nil {
				judge(o)
				memo.remember(o, other)
			}
		}
		// The turns before, read again once others were remembered under
		// their name (runs of one task, branches), read as in full.
		for _, b := range []string{first, next, first} {
			sameRead(t, []byte(b), memo)
			if c, err := inspect([]byte(b), memo, "t"); err == nil {
				judge(c)
				memo.remember(c, []byte(b))
			}
		}
	})
}

func TestMemoEntryHoldsWhatItCounts(t *testing.T) {
	memo := newConvMemo(8)
	// A large body of few messages: the scan makes room for ~256.
	body := []byte(`{"messages":[{"role":"user","content":"g"},{"role":"assistant","content":"` + strings.Repeat("x", 200<<10) + `"}]}`)
	c, err := inspect(body, memo, "t")
	if err != nil {
		t.Fatal(err)
	}
	if cap(c.scan.msgs) < 100 {
		t.Fatalf("the scan made room for %d messages; this test wants a roomy slice", cap(c.scan.msgs))
	}
	memo.remember(c, body)
	e := newest(memo.cur, c.memoKey)
	if e == nil {
		t.Fatal("not remembered")
	}
	// A clipped slice hides its array's room: compare the arrays.
	if unsafe.SliceData(e.msgs) == unsafe.SliceData(c.scan.msgs) {
		t.Fatalf("the entry keeps the scan's array, with room for %d messages, for %d", cap(c.scan.msgs), len(e.msgs))
	}
	if want := len(e.msgs) * int(unsafe.Sizeof(msgSpans{})); e.size() < want {
		t.Fatalf("size %d counts less than its messages (%d)", e.size(), want)
	}
}

// TestResumedTurnTakesRoomForItsOwnMessages: a turn that resumes a
// remembered one holds its messages with room for a turn's new ones, not
// room for as many messages as its size would take, and the memo keeps
// its array as it is when it remembers the turn.
func TestResumedTurnTakesRoomForItsOwnMessages(t *testing.T) {
	memo := newConvMemo(8)
	for k, body := range loopTurns(t, 4) {
		c, err := inspect(body, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 && c.from == 0 {
			t.Fatalf("turn %d was not resumed", k+1)
		}
		if n := len(c.scan.msgs); k > 0 && cap(c.scan.msgs) > 2*n+turnRoom {
			t.Errorf("turn %d: room for %d messages, for %d of them", k+1, cap(c.scan.msgs), n)
		}
		judge(c)
		msgs := c.scan.msgs
		if !memo.remember(c, body) {
			t.Fatalf("turn %d was not remembered", k+1)
		}
		if e := newest(memo.cur, c.memoKey); k > 0 && unsafe.SliceData(e.msgs) != unsafe.SliceData(msgs) {
			t.Errorf("turn %d: the memo copied the turn's messages", k+1)
		}
	}
}

// TestListsAppendInPlace: the turns of a growing conversation, each sent
// twice (a retry), read as read in full, and the turns remembered hold
// their messages and verdicts in a few arrays, not one a turn: the first
// request that resumes from a turn's end appends to its lists in place,
// the retry copies them and writes nothing of the turn's.
func TestListsAppendInPlace(t *testing.T) {
	turns := loopTurns(t, 24)
	memo := newConvMemo(8)
	var msgs []*msgSpans
	var verdicts []*wire.ToolTally
	for i, body := range turns {
		for retry := range 2 {
			got, err := inspect(body, memo, "t")
			if err != nil {
				t.Fatal(err)
			}
			want, _ := inspect(body, nil, "")
			judge(got)
			judge(want)
			if gt, wt := got.info.Tallies(), want.info.Tallies(); !slices.Equal(gt, wt) || !slices.Equal(got.scan.msgs, want.scan.msgs) ||
				!slices.Equal(got.scan.calls, want.scan.calls) || !slices.Equal(got.info.Tools, want.info.Tools) {
				t.Fatalf("turn %d (retry %d): tallies %v, in full %v", i, retry, gt, wt)
			}
			if retry == 0 && i > 0 {
				msgs = append(msgs, unsafe.SliceData(got.scan.msgs))
				if got.verdicts.Len() > 0 {
					verdicts = append(verdicts, got.verdicts.At(0))
				}
			}
			got.Forwarded(true)
		}
	}
	if distinct := len(slices.Compact(msgs)); distinct > 6 {
		t.Errorf("%d turns resumed hold their messages in %d arrays", len(msgs), distinct)
	}
	if distinct := len(slices.Compact(verdicts)); len(verdicts) < 20 || distinct > 1 {
		t.Errorf("%d turns resumed with verdicts hold them in %d arrays", len(verdicts), distinct)
	}
}

// TestMemoConcurrentTurns: requests of one conversation read and remember
// its turns at once, in any order; each reads as read in full (with
// -race: none writes what another reads).
func TestMemoConcurrentTurns(t *testing.T) {
	turns := loopTurns(t, 12)
	wants := make([]*conversation, len(turns))
	for i, body := range turns {
		w, err := inspect(body, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		judge(w)
		wants[i] = w
	}
	f := New()
	agenttest.Interleaved(len(turns), func(i int) bool {
		r, err := f.Read(turns[i], wire.Route{Tenant: "t"})
		if err != nil {
			t.Error(err)
			return false
		}
		got, want := r.(*conversation), wants[i]
		judge(got)
		if gt, wt := got.info.Tallies(), want.info.Tallies(); !slices.Equal(gt, wt) || got.info.Goal != want.info.Goal || got.info.Key != want.info.Key ||
			!slices.Equal(got.info.Tools, want.info.Tools) || !slices.Equal(got.scan.msgs, want.scan.msgs) || !slices.Equal(got.scan.calls, want.scan.calls) {
			t.Errorf("turn %d: tallies %v, in full %v", i, gt, wt)
			return false
		}
		got.Forwarded(true)
		return true
	})
}

// stormTurn is agentTurn(n) whose newest round has call id id: a client
// that sends the same turn again and again with a new last call, as in a
// rate-limit storm.
func stormTurn(t testing.TB, n int, id string) []byte {
	t.Helper()
	last := "call_" + strconv.Itoa(n-1)
	return []byte(strings.ReplaceAll(string(agentTurn(t, n)), `"`+last+`"`, `"`+id+`"`))
}

func TestMemoKeepsTheTurnARetryRepeats(t *testing.T) {
	memo := newConvMemo(8)
	const tenant = "t"
	read := func(body []byte) *conversation {
		t.Helper()
		c, err := inspect(body, memo, tenant)
		if err != nil {
			t.Fatal(err)
		}
		judge(c)
		return c
	}
	turn3 := agentTurn(t, 3)
	c3 := read(turn3)
	if !memo.remember(c3, turn3) {
		t.Fatal("turn 3 was not remembered")
	}
	kept := memo.cur[c3.memoKey]
	n := len(c3.scan.msgs)

	// Turns that repeat turn 3 but for its last messages, with its tail.
	for _, tt := range []struct {
		name string
		body []byte
		from int
	}{
		{"the same body again", turn3, n},
		{"the last result replaced", lastReplaced(turn3, "0.01s", "0.02s"), n - 1},
		{"the last round with a new call id", stormTurn(t, 3, "call_storm_1"), n - 2},
	} {
		c := read(tt.body)
		if c.from != tt.from {
			t.Fatalf("%s: read from message %d, want %d", tt.name, c.from, tt.from)
		}
		if memo.remember(c, tt.body) {
			t.Errorf("%s: remembered, though turn 3 lets the next turn resume as far", tt.name)
		}
		if memo.cur[c3.memoKey] != kept {
			t.Fatalf("%s: the remembered turn was replaced", tt.name)
		}
		sameRead(t, tt.body, memo)
	}

	// Turns that add to what is remembered, or repeat less of it, are kept.
	for _, tt := range []struct {
		name string
		body []byte
	}{
		{"a longer turn", agentTurn(t, 4)},
		{"other bytes after the messages", []byte(strings.Replace(string(turn3), `"model":"m"`, `"model":"n"`, 1))},
		{"the first round replaced", []byte(strings.Replace(string(turn3), "call_0", "call_x", 2))},
	} {
		memo.cur[c3.memoKey] = kept
		c := read(tt.body)
		if !memo.remember(c, tt.body) || memo.cur[c3.memoKey] == kept {
			t.Errorf("%s: not remembered", tt.name)
		}
		sameRead(t, tt.body, memo)
	}

	// A turn found in the older half is remembered again, in the newer
	// one: a conversation in use is not dropped with its half.
	memo = newConvMemo(1)
	c3 = read(turn3)
	memo.remember(c3, turn3)
	other := []byte(strings.Replace(string(turn3), "Be careful.", "Be quick.", 1))
	memo.remember(read(other), other)
	if memo.prev[c3.memoKey] == nil || memo.cur[c3.memoKey] != nil {
		t.Fatal("turn 3 is not in the older half")
	}
	if c := read(turn3); !memo.remember(c, turn3) || memo.cur[c3.memoKey] == nil {
		t.Error("turn 3 again, from the older half: not remembered in the newer one")
	}
}

// TestFormatReusesNothingItGaveAway reads conversations through Format,
// as the handler does (Read, then Forwarded), interleaving rounds that the
// memo remembers with retries and storm turns whose slices the next read
// reuses: every read finds what a full read finds, and what the memo
// remembers is not changed by the reads that reuse slices after it.
func TestFormatReusesNothingItGaveAway(t *testing.T) {
	f := New()
	var bodies [][]byte
	for conv := range 3 {
		tenant := "t" + strconv.Itoa(conv)
		for n := 1; n <= 6; n++ {
			bodies = append(bodies, []byte(tenant), agentTurn(t, n))
			for s := range 3 {
				bodies = append(bodies, []byte(tenant), stormTurn(t, n, "call_s"+strconv.Itoa(s)))
			}
			bodies = append(bodies, []byte(tenant), agentTurn(t, n))
		}
	}
	var entries []*memoEntry
	var snapshots []string
	snapshot := func(e *memoEntry) string {
		return strings.Join([]string{
			strconv.Quote(string(unsafeBytes(e.msgs))), strconv.Quote(string(unsafeBytes(e.calls))),
			strconv.Quote(string(unsafeBytes(e.marks))), strings.Join(e.tools, ","), strconv.Itoa(len(e.named)),
		}, "|")
	}
	for i := 0; i < len(bodies); i += 2 {
		tenant, body := string(bodies[i]), bodies[i+1]
		req, err := f.Read(body, wire.Route{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		c := req.(*conversation)
		judge(c)
		want, _ := inspect(body, nil, "")
		judge(want)
		all := results(want)
		if r := results(c); !slices.Equal(r, all[len(all)-len(r):]) || !slices.Equal(c.info.Tallies(), want.info.Tallies()) ||
			!slices.Equal(c.scan.msgs, want.scan.msgs) || !slices.Equal(c.scan.calls, want.scan.calls) || !slices.Equal(c.info.Tools, want.info.Tools) {
			t.Fatalf("read %d (%s): with memo %+v\nin full %+v", i/2, tenant, summarize(c), summarize(want))
		}
		key := c.memoKey
		c.Forwarded(true)
		f.memo.mu.Lock()
		if e := newest(f.memo.cur, key); e != nil && !slices.Contains(entries, e) {
			entries, snapshots = append(entries, e), append(snapshots, snapshot(e))
		}
		f.memo.mu.Unlock()
		for k, e := range entries {
			if snapshot(e) != snapshots[k] {
				t.Fatalf("after read %d: remembered turn %d changed", i/2, k)
			}
		}
	}
	if len(entries) < 3*6 {
		t.Errorf("%d turns remembered, want at least one per round", len(entries))
	}
}

// lastReplaced returns body with the last old replaced by new.
func lastReplaced(body []byte, old, new string) []byte {
	i := strings.LastIndex(string(body), old)
	return []byte(string(body[:i]) + new + string(body[i+len(old):]))
}

// unsafeBytes is the memory of s, to compare slices of structs by value.
func unsafeBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// TestContinuedTurnAddsOneAnswer: a turn is Continued when it extends the
// turn remembered last by one assistant message and its results; not the
// conversation's first, nor one that extends it by two (the turn between
// went through another replica), nor the same turn again.
func TestContinuedTurnAddsOneAnswer(t *testing.T) {
	memo := newConvMemo(8)
	var reqs [][]byte
	for n := range 6 {
		reqs = append(reqs, agentTurn(t, n))
	}
	agenttest.CheckContinued(t, reqs, func(body []byte) *wire.Info {
		c, err := inspect(body, memo, "ws\x00proj")
		if err != nil {
			t.Fatal(err)
		}
		judge(c)
		memo.remember(c, body)
		return &c.info
	}, func(body []byte) *wire.Info {
		c, _ := inspect(body, nil, "")
		return &c.info
	})
}

// TestForgetDropsTheRemembered: Forget, before the request is forwarded
// or after, leaves the conversation's next turn to be read whole.
func TestForgetDropsTheRemembered(t *testing.T) {
	var memo *convMemo
	turns := [][]byte{agentTurn(t, 1), agentTurn(t, 2), agentTurn(t, 3)}
	agenttest.CheckForget(t, turns, func() { memo = New().memo }, func(body []byte) (wire.Request, bool) {
		c, err := inspect(body, memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		judge(c)
		return c, c.prior != nil && c.from > 0
	})
}

// runTurn is turn rounds of a run of one task under system: the task,
// then rounds calls of the run's own.
func runTurn(t testing.TB, system, run string, rounds int) []byte {
	t.Helper()
	msgs := []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": "Fix the failing test"}}
	for i := range rounds {
		id := run + "_call_" + strconv.Itoa(i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": id, "type": "function", "function": map[string]any{"name": "run_tests", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": "FAIL\tpkg\t0.01s"})
	}
	b, err := json.Marshal(map[string]any{"messages": msgs, "model": "m"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMemoKeepsEachRun: two runs of one task (the same head, then calls
// of their own; chat agents send no run id), taking turns, each read only
// their newest round once each has a turn of its own remembered, as a
// script that starts an agent with one prompt twice at once sends them.
func TestMemoKeepsEachRun(t *testing.T) {
	body := func(run string, rounds int) []byte { return runTurn(t, "You are a coding agent.", run, rounds) }
	memo := newConvMemo(8)
	for k := 1; k <= 6; k++ {
		for _, run := range []string{"a", "b"} {
			b := body(run, k)
			c, err := inspect(b, memo, "t")
			if err != nil {
				t.Fatal(err)
			}
			sameRead(t, b, memo)
			// The second run's first round repeats the first run's turn
			// but for its last two messages: it is not kept (a retry's
			// rule), and its second round is read whole.
			if k >= 3 && c.from != len(c.scan.msgs)-2 {
				t.Fatalf("run %s, round %d: read from message %d of %d", run, k, c.from, len(c.scan.msgs))
			}
			judge(c)
			memo.remember(c, b)
		}
	}
	taskTurns(t, memo, 2)
}

// taskTurns returns the turns memo holds under its one name, failing
// unless it holds one name with runs turns, one per run of its task.
func taskTurns(t *testing.T, memo *convMemo, runs int) *memoBranches {
	t.Helper()
	memo.mu.Lock()
	defer memo.mu.Unlock()
	if len(memo.cur) != 1 {
		t.Fatalf("%d names remembered, want the task's one", len(memo.cur))
	}
	for _, b := range memo.cur {
		if len(b.entries) != runs {
			t.Fatalf("%d turns remembered, want one per run", len(b.entries))
		}
		return b
	}
	return nil
}

// TestMemoCountsTheSystemTextOnce: runs of one task under a long system
// prompt (qwen-code's is 38 KB) hold one string of it, read in full by
// the first run and taken by the others, and the memo counts it once for
// all of them; a budget that counted it a run would drop the runs'
// turns, which are then read in full.
func TestMemoCountsTheSystemTextOnce(t *testing.T) {
	system := strings.Repeat("You are a coding agent. Read before you edit.\n", 800) // 38 KB
	body := func(run string, rounds int) []byte { return runTurn(t, system, run, rounds) }
	const runs = 8
	memo := newConvMemo(8)
	for run := range runs {
		for k := 1; k <= 3; k++ {
			b := body(strconv.Itoa(run), k)
			c, err := inspect(b, memo, "t")
			if err != nil {
				t.Fatal(err)
			}
			judge(c)
			memo.remember(c, b)
		}
	}
	b := taskTurns(t, memo, runs)
	sum := 0
	for _, e := range b.entries {
		if unsafe.StringData(e.system) != unsafe.StringData(b.entries[0].system) {
			t.Fatal("the runs' turns hold copies of the system text")
		}
		sum += e.bytes
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	if want := sum + len(system); b.size != want || memo.curBytes != want {
		t.Fatalf("the memo counts %d bytes (the name %d), want %d: the system text (%d) once", memo.curBytes, b.size, want, len(system))
	}
}

// TestSystemCheckedOnce: whether the system text holds blocks an earlier
// turn left (the proxy placed them there, and the client sent them back)
// is found on a conversation's first turn and taken from the memo on the
// next ones, which place their blocks in the turns and take the old ones
// out of the system text all the same.
func TestSystemCheckedOnce(t *testing.T) {
	for _, framed := range []bool{false, true} {
		memo := newConvMemo(8)
		old := wire.Placement{Turn: turnPlacement(2).Turn, System: true}
		for k := 1; k <= 4; k++ {
			body := agentTurn(t, k)
			if framed {
				c, err := inspect(body, nil, "t")
				if err != nil {
					t.Fatal(err)
				}
				if body, err = c.Inject(nil, body, old); err != nil {
					t.Fatal(err)
				}
			}
			c, err := inspect(body, memo, "t")
			if err != nil {
				t.Fatal(err)
			}
			want := systemClean
			if framed {
				want = systemFramed
			}
			if k == 1 && c.system != systemUnchecked || k > 1 && c.system != want {
				t.Fatalf("framed %v, turn %d: the check read %d before placing", framed, k, c.system)
			}
			out, err := c.Inject(nil, body, turnPlacement(k))
			if err != nil {
				t.Fatal(err)
			}
			if sys := gjson.GetBytes(out, "messages.0.content").Str; sys != "You are a coding agent.\nBe careful." {
				t.Fatalf("framed %v, turn %d: system text %q", framed, k, sys)
			}
			if c.system != want {
				t.Fatalf("framed %v, turn %d: the check found %d", framed, k, c.system)
			}
			judge(c)
			memo.remember(c, body)
		}
	}
}

// TestSystemTextDecodedOnce: the first turns of two conversations of one
// agent (its system message, two tasks) share the system text decoded
// for the first, and each one's key is the conversation's.
func TestSystemTextDecodedOnce(t *testing.T) {
	memo := newConvMemo(8)
	turn, err := os.ReadFile(filepath.Join("testdata", "agents", "qwen-turn1.json"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := inspect(turn, memo, "t")
	if err != nil {
		t.Fatal(err)
	}
	task := first.info.Goal
	other := bytes.Replace(turn, []byte(task), []byte("Rename the package to cfg."), 1)
	if bytes.Equal(other, turn) || len(first.info.System) < 1<<10 {
		t.Fatal("the capture has no task to replace or no long system text")
	}
	second, err := inspect(other, memo, "t")
	if err != nil {
		t.Fatal(err)
	}
	full, _ := inspect(other, nil, "")
	if second.from != 0 || second.info.System != full.info.System || unsafe.StringData(second.info.System) != unsafe.StringData(first.info.System) {
		t.Error("the second conversation's system text was decoded again, or differs")
	}
	if second.info.Key != full.info.Key || second.info.Key == first.info.Key {
		t.Errorf("keys %q, read in full %q, the first conversation's %q", second.info.Key, full.info.Key, first.info.Key)
	}
}

// TestKnownStartIsNotScannedAgain: qwen-code sends a 38 KB system message
// before the task in every run; once two runs were read, a third one's
// system message is not scanned again, and it reads as read in full.
// Another tenant's run is scanned.
func TestKnownStartIsNotScannedAgain(t *testing.T) {
	turn, err := os.ReadFile(filepath.Join("testdata", "agents", "qwen-turn1.json"))
	if err != nil {
		t.Fatal(err)
	}
	task := gjson.GetBytes(turn, "messages.1.content").Raw
	run := func(i int) []byte {
		return []byte(strings.Replace(string(turn), task, strconv.Quote("run "+strconv.Itoa(i)+": "+gjson.Parse(task).String()), 1))
	}
	memo := newConvMemo(8)
	for i := range 4 {
		c, err := inspect(run(i), memo, "t")
		if err != nil {
			t.Fatal(err)
		}
		if c.scan.knownStart != (i >= 2) {
			t.Fatalf("run %d: known start %v", i, c.scan.knownStart)
		}
	}
	for i := range 4 {
		sameRead(t, run(i), memo)
	}
	if c, err := inspect(run(9), memo, "u"); err != nil || c.scan.knownStart {
		t.Fatalf("another tenant's run: known start %v (%v)", c.scan.knownStart, err)
	}
	sys := gjson.GetBytes(turn, "messages.0")
	if b, end := memo.Bytes(), sys.Index+len(sys.Raw); b != end {
		t.Fatalf("the memo counts %d bytes, the start it keeps %d", b, end)
	}
}

// FuzzKnownStart reads bodies that begin with a known start (a system
// message of 5 KB), with the memo and in full: the same.
func FuzzKnownStart(f *testing.F) {
	start := `{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("Be careful. ", 450) + `"}`
	f.Add(`,{"role":"user","content":"g"}],"stream":true}`)
	f.Add(`]}`)
	f.Add(`1]}`)
	f.Add(`,{"role":"assistant","tool_calls":[{"id":"x","function":{"name":"ls"}}]},{"role":"user","content":"g"}]}`)
	f.Add(`,{"role":"user","content":"g"}],"messages":[]}`)
	f.Add(``)
	memo := newConvMemo(8)
	for i := range 2 {
		if _, err := inspect([]byte(start+`,{"role":"user","content":"run `+strconv.Itoa(i)+`"}]}`), memo, "t"); err != nil {
			f.Fatal(err)
		}
	}
	if memo.starts.Bytes() == 0 {
		f.Fatal("the start is not known")
	}
	f.Fuzz(func(t *testing.T, rest string) {
		sameRead(t, []byte(start+rest), memo)
	})
}

// TestMemoFollowsASharedStartOnce: runs that share their first rounds
// (runs of one task with a common start, a conversation gone back to an
// earlier point) read from the message they would following every turn
// message by message, and read as in full.
func TestMemoFollowsASharedStartOnce(t *testing.T) {
	body := func(shared, run, rounds int) []byte {
		msgs := []map[string]any{{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix the failing test"}}
		round := func(id, out string) {
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": id, "type": "function", "function": map[string]any{"name": "run_tests", "arguments": "{}"}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": out})
		}
		for i := range shared {
			round("shared_"+strconv.Itoa(i), "ok\tpkg\t0.01s")
		}
		for i := range rounds {
			round("run"+strconv.Itoa(run)+"_"+strconv.Itoa(i), "FAIL\tpkg\t0.0"+strconv.Itoa(i)+"s")
		}
		b, err := json.Marshal(map[string]any{"messages": msgs, "model": "m"})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	fast, slow := newConvMemo(8), newConvMemo(8)
	rng := rand.New(rand.NewPCG(7, 29))
	for n := range 600 {
		shared, run, rounds := 2+rng.IntN(3), rng.IntN(12), 1+rng.IntN(5)
		b := body(shared, run, rounds)
		a, err := inspect(b, fast, "t")
		if err != nil {
			t.Fatal(err)
		}
		s, err := inspect(b, slow, "t")
		if err != nil {
			t.Fatal(err)
		}
		if a.from != s.from {
			t.Fatalf("request %d (start %d, run %d, %d rounds): read from message %d, following every turn %d", n, shared, run, rounds, a.from, s.from)
		}
		sameRead(t, b, fast)
		judge(a)
		judge(s)
		fast.remember(a, b)
		slow.remember(s, b)
		// The slow memo's turns claim no common start: each is followed.
		slow.mu.Lock()
		for _, m := range []map[uint64]*memoBranches{slow.cur, slow.prev} {
			for _, br := range m {
				for _, e := range br.entries {
					e.common = 0
				}
			}
		}
		slow.mu.Unlock()
	}
}
