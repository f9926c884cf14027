package memory

import (
	"fmt"
	"hash/maphash"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// TestLoopTailFollowsALongConversation: the tail keeps the latest
// maxSteps calls of a conversation however long it runs, a body that
// re-sends its whole history adds nothing, and a change of the request's
// tool definitions is seen at the next new call (a tool no longer
// defined is unknown).
func TestLoopTailFollowsALongConversation(t *testing.T) {
	s := newTestMemory(t, tempBolt(t))
	tn := tenant.Tenant{Workspace: "w", Project: "p", Session: "long"}
	defs := []byte(`[{"type":"function","function":{"name":"read"}},{"type":"function","function":{"name":"write"}}]`)
	var results []wire.ToolResult
	for i := range maxSteps + 10 {
		results = append(results, wire.ToolResult{Key: fmt.Sprint("call:", i), Name: "read",
			Args: []byte(fmt.Sprintf(`{"path":"f%d"}`, i)), Raw: []byte(fmt.Sprint("line ", i))})
		_, _, fresh := s.trackLoop(tn, &wire.Info{ToolResults: results, ToolDefs: defs})
		if len(fresh) != 1 || fresh[0] != i {
			t.Fatalf("turn %d: fresh %v, want [%d]", i, fresh, i)
		}
	}
	if _, _, fresh := s.trackLoop(tn, &wire.Info{ToolResults: results, ToolDefs: defs}); len(fresh) != 0 {
		t.Fatalf("the same history again: fresh %v", fresh)
	}
	c := s.loops.find(convRef{"w", "p", "long"})
	if len(c.steps) != maxSteps || len(c.keys) != maxSteps || len(c.known) != maxSteps ||
		c.keys[0] != fmt.Sprint("call:", 10) || c.steps[maxSteps-1].Args != `{"path":"f73"}` {
		t.Fatalf("tail: %d steps, %d keys, %d known, first key %q", len(c.steps), len(c.keys), len(c.known), c.keys[0])
	}
	// "write" is no longer defined; the agent calls it anyway.
	for i := range 3 {
		results = append(results, wire.ToolResult{Key: fmt.Sprint("call:w", i), Name: "write", Args: []byte(`{}`), Raw: []byte("ok")})
		loop, _, _ := s.trackLoop(tn, &wire.Info{ToolResults: results, ToolDefs: []byte(`[{"type":"function","function":{"name":"read"}}]`)})
		if i == 1 && loop.Kind != guard.LoopUnknownTool {
			t.Fatalf("after 2 calls of an undefined tool: loop %+v", loop)
		}
	}
}

// A step keeps a copy of the start of a result, never a slice of it: a
// slice of a megabyte's tool result would keep all of it alive for as
// long as the conversation's steps are kept.
func TestTruncateCopies(t *testing.T) {
	big := strings.Repeat("é", 1<<19) // 1 MiB
	for _, s := range []string{big, big[:100], "short"} {
		got := truncate(s, maxStepOutput)
		if len(got) > maxStepOutput || !strings.HasPrefix(s, got) || !utf8.ValidString(got) {
			t.Fatalf("truncate of %d bytes = %d bytes, not a valid prefix", len(s), len(got))
		}
		start, end := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(s)))+uintptr(len(s))
		if p := uintptr(unsafe.Pointer(unsafe.StringData(got))); p >= start && p < end {
			t.Fatalf("truncate of %d bytes shares the original's memory", len(s))
		}
	}
}

// A step keeps its own copy of the tool's name too: a format's reader
// cuts the name from its copy of the whole messages array, which a kept
// name would keep alive (a megabyte per conversation with a large result).
func TestStepKeepsNoPartOfTheRequest(t *testing.T) {
	msgs := `[{"type":"tool_use","name":"read_file"},{"content":"` + strings.Repeat("x", 1<<20) + `"}]`
	name := msgs[strings.Index(msgs, "read_file"):][:len("read_file")]
	tr := wire.ToolResult{Key: "call:1", Name: name, Raw: []byte(msgs[len(msgs)-(1<<20)-3:])}
	st := stepOf(maphash.MakeSeed(), &tr, nil)
	start := uintptr(unsafe.Pointer(unsafe.StringData(msgs)))
	for field, s := range map[string]string{"Tool": st.Tool, "Output": st.Output, "Args": st.Args} {
		if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); s != "" && p >= start && p < start+uintptr(len(msgs)) {
			t.Fatalf("the step's %s shares the request's memory", field)
		}
	}
	if st.Tool != "read_file" {
		t.Fatalf("Tool = %q", st.Tool)
	}
}

// Long arguments are kept as their start and a hash of all of them:
// equal calls stay equal, calls that differ past the start differ.
func TestBoundArgs(t *testing.T) {
	long := `{"path":"big.txt","content":"` + strings.Repeat("a", 1<<20) + `"}`
	other := long[:len(long)-3] + `b"}`
	a, b := boundArgs(long), boundArgs(other)
	if len(a) > maxStepArgs || !strings.HasPrefix(a, `{"path":"big.txt","content":"aaa`) || a == b || boundArgs(long) != a {
		t.Fatalf("bounded: %d bytes, %q…; the other %q…", len(a), a[:40], b[len(b)-60:])
	}
	if short := `{"cmd":"ls"}`; boundArgs(short) != short {
		t.Fatalf("short arguments changed: %q", boundArgs(short))
	}
}

// The tracker holds at most its byte bound (and one conversation's
// steps more) whatever the conversations send, drops the least recently
// used first, and its byte count follows what it holds.
func TestLoopTrackerBoundedInBytes(t *testing.T) {
	const maxBytes = 1 << 20
	lt := newLoopTracker(1<<14, maxBytes)
	seed := maphash.MakeSeed()
	out := strings.Repeat("o", 4<<10)
	add := func(conv string, n int) {
		c := lt.get(convRef{"w", "p", conv})
		c.mu.Lock()
		defer c.mu.Unlock()
		for i := range n {
			tr := wire.ToolResult{Key: fmt.Sprint("call:", conv, i), Name: "write", Raw: []byte(out), Args: []byte(`{"content":"` + out + `"}`)}
			c.push(tr.Key, stepOf(seed, &tr, nil))
		}
	}
	add("kept", 10)
	for i := range 200 {
		add(fmt.Sprint("c", i), 10)
		add("kept", 1) // used on every turn: never the least recently used
		if b := lt.bytes(); b > maxBytes+maxSteps*(maxStepArgs+maxStepOutput+stepOverhead+64) {
			t.Fatalf("after %d conversations the tracker holds %d bytes, bound %d", i+1, b, maxBytes)
		}
	}
	if lt.find(convRef{"w", "p", "c0"}) != nil {
		t.Fatal("the first conversation, unused since, is still kept")
	}
	kept := lt.find(convRef{"w", "p", "kept"})
	if kept == nil || len(kept.steps) != maxSteps {
		t.Fatalf("the conversation used on every turn was dropped or lost steps")
	}
	var sum int64
	for _, g := range []*generation{lt.cur, lt.prev} {
		var gen int64
		for _, c := range g.convs {
			gen += c.bytes
		}
		if gen != g.bytes.Load() {
			t.Fatalf("a generation counts %d bytes, its conversations hold %d", g.bytes.Load(), gen)
		}
		sum += gen
	}
	if sum != lt.bytes() || sum == 0 {
		t.Fatalf("bytes() = %d, the conversations hold %d", lt.bytes(), sum)
	}
}

// TestRenderFollowsTheLoop: a conversation keeps what its loop rendered
// to while the loop's calls stay the same, and the blocks still show the
// loop's count, level and the calls' latest results as they change.
func TestRenderFollowsTheLoop(t *testing.T) {
	lt := newLoopTracker(16, 1<<20)
	k := convRef{"w", "p", "c1"}
	lt.get(k)
	step := guard.Step{Tool: "run_shell", Args: `{"cmd":"make test"}`, Output: "make: *** [test] Error 1"}
	loop := func(kind string, count, level int, steps ...guard.Step) guard.Loop {
		return guard.Loop{Kind: kind, Count: count, Level: level, Calls: steps}
	}
	cases := []struct {
		name string
		l    guard.Loop
	}{
		{"warned", loop(guard.LoopNoProgress, 3, guard.LevelGuard, step)},
		{"count grows", loop(guard.LoopNoProgress, 4, guard.LevelGuard, step)},
		{"stop", loop(guard.LoopNoProgress, 5, guard.LevelStop, step)},
		{"same stop, again", loop(guard.LoopNoProgress, 6, guard.LevelStop, step)},
		{"another result", loop(guard.LoopNoProgress, 7, guard.LevelStop, guard.Step{Tool: step.Tool, Args: step.Args, Output: "make: *** [lint] Error 2"})},
		{"hard stop", loop(guard.LoopNoProgress, 8, guard.LevelHardStop, guard.Step{Tool: step.Tool, Args: step.Args, Output: "make: *** [lint] Error 2"})},
		{"other kind", loop(guard.LoopUnknownTool, 3, guard.LevelStop, guard.Step{Tool: "run_shel", Args: step.Args, Unknown: true})},
		{"gone", guard.Loop{}},
	}
	base := []guard.Entry{{Pattern: "BUILD FAILURE", Count: 2, Call: "run_shell"}}
	baseBlock := wire.NewBlock(guard.Block(base))
	for _, c := range cases {
		entries, block, stop := lt.render(k, c.l, base, baseBlock)
		wantEntries := base
		if e, ok := guard.LoopEntry(c.l); ok {
			wantEntries = append(slices.Clone(base), e)
		}
		if !reflect.DeepEqual(entries, wantEntries) {
			t.Errorf("%s: entries %+v, want %+v", c.name, entries, wantEntries)
		}
		if want := guard.Block(wantEntries); block.Text != want {
			t.Errorf("%s: guard block\n%s\nwant\n%s", c.name, block.Text, want)
		}
		if want := guard.StopBlock(c.l); stop.Text != want {
			t.Errorf("%s: STOP block\n%s\nwant\n%s", c.name, stop.Text, want)
		}
	}
}

// TestALoopThatBreaksAgainIsRecordedOnce: a loop that forms again after
// it broke (a call that fails and works by turns) and breaks again
// records its end once: the request does not wait for a write the store
// would drop as a duplicate. Each time is still an event (counted).
func TestALoopThatBreaksAgainIsRecordedOnce(t *testing.T) {
	loop := guard.Loop{Kind: guard.LoopFailing, Count: 4, Level: guard.LevelStop,
		Calls: []guard.Step{{Tool: "run_shell", Args: `{"cmd":"make"}`, Failed: true}}}
	c := &convSteps{}
	var stored, broken int
	for range 3 {
		c.loop = loop
		for _, ev := range c.events(guard.Loop{}) {
			if ev.store {
				stored++
			}
		}
		c.loop = guard.Loop{}
		for _, ev := range c.events(loop) {
			if ev.level == "broken" {
				broken++
				if ev.store {
					stored++
				}
			}
		}
	}
	// The STOP level once, its end once.
	if broken != 3 || stored != 2 {
		t.Fatalf("%d ends of the loop, %d records, want 3 and 2", broken, stored)
	}
}

// TestReadDefinedTrustsTheFormatsSum: the tools a conversation defines
// are read again when their bytes change, and not when the format's sum
// of the bytes that hold them says they are the same.
func TestReadDefinedTrustsTheFormatsSum(t *testing.T) {
	seed := maphash.MakeSeed()
	defs := func(names ...string) []byte {
		b := []byte(`[`)
		for i, n := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"function","function":{"name":"`+n+`"}}`...)
		}
		return append(b, ']')
	}
	var c convSteps
	for i, step := range []struct {
		defs []byte
		sum  uint64
		want string
	}{
		{defs("ls", "cat"), 0, "ls cat"}, // no sum: read
		{defs("ls", "cat"), 7, "ls cat"}, // the same bytes: hashed, the same
		{defs("ls", "rm"), 7, "ls cat"},  // the same sum: trusted, not read
		{defs("ls", "rm"), 8, "ls rm"},   // another sum: read
		{defs("ls", "mv"), 0, "ls mv"},   // no sum: read
		{defs("ls", "mv"), 8, "ls mv"},   // a new sum: hashed, the same bytes
	} {
		c.readDefined(seed, &wire.Info{ToolDefs: step.defs, ToolDefsSum: step.sum})
		if got := strings.Join(c.defined, " "); got != step.want {
			t.Fatalf("step %d: defined %q, want %q", i, got, step.want)
		}
	}
}
