package memory

import (
	"crypto/sha256"
	"encoding/hex"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// A conversation's loop is found in its latest tool calls: the loop
// tracker keeps the tail of each conversation's calls (its steps) on this
// replica, in order, added to as new tool results arrive. A format that
// re-sends the whole history (chat, Messages, Codex's Responses turns)
// rebuilds the tail on any replica; one that remembers earlier turns
// (the chat memo, previous_response_id chains) sends only the new results,
// which are appended.

// maxSteps is how many of a conversation's latest calls are kept, and
// maxStepOutput how much of each result's text (the STOP block quotes
// its start, redacted then).
const (
	maxSteps      = 64
	maxStepOutput = 1 << 10
)

// maxLoopBytes bounds the bytes of the steps the loop tracker keeps, over
// every conversation: a conversation's steps take at most about 200 KB
// (maxSteps steps of maxStepArgs and maxStepOutput), most far less.
const maxLoopBytes = 64 << 20

// The byte budgets of the memory's other caches. The guard cache holds
// the windows of the tenants in use (up to GuardReadLimit incidents of at
// most 2 KB each, their learned fixes, the guards derived per
// conversation); the recall cache each conversation's recall block; the
// task vectors the embeddings of the latest tasks.
const (
	maxGuardCacheBytes  = 64 << 20
	maxRecallCacheBytes = 16 << 20
	maxTaskVectorBytes  = 16 << 20
)

// maxStepArgs is the most bytes of a call's arguments a step keeps: longer
// ones (a file written whole) keep their start and a hash of all of them,
// so that equal calls still have equal Args (the loop detector compares
// them) and the STOP block, which quotes 200 characters, loses nothing.
const maxStepArgs = 2 << 10

// boundArgs returns args as a step keeps them (see maxStepArgs).
func boundArgs(args string) string {
	if len(args) <= maxStepArgs {
		return args
	}
	sum := sha256.Sum256([]byte(args))
	return truncate(args, maxStepArgs-80) + "… (" + strconv.Itoa(len(args)) + " bytes, sha256 " + hex.EncodeToString(sum[:16]) + ")"
}

// stepOverhead is what a step costs besides its strings' bytes (the step,
// its key's slot, its map entry), for the byte count of the tracker.
const stepOverhead = 160

// stepBytes is what st, kept under key, costs the tracker.
func stepBytes(key string, st *guard.Step) int64 {
	return int64(stepOverhead + len(key) + len(st.Tool) + len(st.Args) + len(st.Output))
}

// truncate returns a copy of at most the first n bytes of s, cut on a
// rune boundary: a copy, because s is often part of a request (a tool
// result of a megabyte, a body) that a kept slice of it would keep alive.
func truncate(s string, n int) string {
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return strings.Clone(s)
}

// loopTracker keeps the steps of the conversations in use, bounded: two
// generations of at most max conversations and maxBytes/2 bytes of steps
// each. A conversation used again moves to the newest generation; when
// that one is full, the older one is dropped: its conversations, the
// least recently used, start again from their next request's history.
type loopTracker struct {
	seed      maphash.Seed
	mu        sync.Mutex
	max       int
	maxBytes  int64
	cur, prev *generation
}

// generation is one generation of a loopTracker's conversations, and the
// bytes of their steps.
type generation struct {
	convs map[convRef]*convSteps
	bytes atomic.Int64
}

// convRef names a conversation of a tenant.
type convRef struct{ workspace, project, conversation string }

// convSteps is one conversation's tail of calls.
type convSteps struct {
	mu    sync.Mutex
	bytes int64               // of its steps (stepBytes)
	gen   *generation         // the generation that holds it
	keys  []string            // the result key of each step
	known map[string]struct{} // the keys
	steps []guard.Step
	// The tools the conversation's requests define (wire.DefinedTools),
	// and the hash of the definitions they were read from, and the
	// format's sum of the bytes that held them (wire.Info.ToolDefsSum; 0
	// none): an agent sends the same ones every turn.
	defsHash uint64
	defsSum  uint64
	defined  []string
	loop     guard.Loop     // the loop found after the latest update
	levels   map[string]int // the highest level recorded of each loop, by key
	// broken holds the loops whose end was recorded, by key: one that
	// forms again and breaks again (a call that fails and works by turns)
	// is not recorded again. The store would keep one record anyway, but
	// the request would wait for the write.
	broken map[string]struct{}
	// learned is, per tool, the failures of the conversation a fix was
	// last looked for at (see learnFixes).
	learned map[string]int

	// What the loop renders to, kept while it does not change: a loop
	// lasts several turns.
	drawn     guard.Loop
	drawnOK   bool
	entry     *guard.Entry
	stopBlock wire.Block
	// What does not change while only a loop's count and level do: its
	// entry (but its count) and the lines of its calls in the STOP block.
	sameCalls bool // drawn's calls are the ones baseEntry and stopCalls show
	baseEntry *guard.Entry
	stopCalls string
	// The guard block with the loop's entry added, its entries, and the
	// guard block it was made from (what entries show is their block's
	// text: the same text, the same entries).
	joinedFrom    string
	joined        wire.Block
	joinedEntries []guard.Entry
	joinedOK      bool
}

// lookedFor reports whether a fix of tool after failures failures was
// looked for in the conversation already; with note, it notes that it now
// is (a conversation the tracker does not hold notes nothing).
func (lt *loopTracker) lookedFor(k convRef, tool string, failures int, note bool) bool {
	c := lt.find(k)
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.learned[tool] == failures {
		return true
	}
	if note {
		if c.learned == nil {
			c.learned = make(map[string]int)
		}
		c.learned[tool] = failures
	}
	return false
}

// render returns the blocks of a conversation whose guard (entries and
// their block) meets its loop: the entries and guard block with the
// loop's entry added, and the STOP block. A loop lasts several turns: the
// conversation keeps what it rendered while neither changes.
func (lt *loopTracker) render(k convRef, l guard.Loop, entries []guard.Entry, block wire.Block) ([]guard.Entry, wire.Block, wire.Block) {
	c := lt.find(k)
	if c == nil {
		c = &convSteps{} // not kept
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.drawnOK || c.drawn.Level != l.Level || c.drawn.Count != l.Count || c.drawn.Key() != l.Key() {
		if !c.drawnOK || c.drawn.Kind != l.Kind || !sameSteps(c.drawn.Calls, l.Calls) {
			c.sameCalls, c.baseEntry, c.stopCalls = false, nil, ""
		}
		c.entry = nil
		if l.Level != guard.LevelNone && len(l.Calls) > 0 {
			if !c.sameCalls {
				if e, ok := guard.LoopEntry(l); ok {
					c.baseEntry = &e
				}
				c.stopCalls = guard.StopCalls(l.Calls)
				c.sameCalls = true
			}
			if c.baseEntry != nil {
				e := *c.baseEntry
				e.Count = l.Count
				c.entry = &e
			}
		}
		c.stopBlock = wire.NewBlock(guard.StopBlockWith(l, c.stopCalls))
		c.drawn, c.drawnOK, c.joinedOK = l, true, false
	}
	if c.entry == nil {
		return entries, block, c.stopBlock
	}
	if !c.joinedOK || c.joinedFrom != block.Text || len(c.joinedEntries) != len(entries)+1 {
		c.joinedEntries = append(slices.Clip(entries), *c.entry)
		c.joined = wire.NewBlock(guard.Block(c.joinedEntries))
		c.joinedFrom, c.joinedOK = block.Text, true
	}
	return slices.Clip(c.joinedEntries), c.joined, c.stopBlock
}

// sameSteps reports whether two loops' calls show the same: the same
// tools, arguments and results.
func sameSteps(a, b []guard.Step) bool {
	return slices.EqualFunc(a, b, func(x, y guard.Step) bool {
		return x.Tool == y.Tool && x.Args == y.Args && x.Output == y.Output && x.Failed == y.Failed && x.Unknown == y.Unknown
	})
}

func newLoopTracker(max int, maxBytes int64) *loopTracker {
	return &loopTracker{seed: maphash.MakeSeed(), max: max, maxBytes: maxBytes,
		cur: &generation{convs: make(map[convRef]*convSteps)}, prev: &generation{}}
}

// bytes returns the bytes of steps the tracker holds.
func (lt *loopTracker) bytes() int64 {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.cur.bytes.Load() + lt.prev.bytes.Load()
}

// get returns a conversation's steps, adding them to the newest
// generation. The caller locks them to change them.
func (lt *loopTracker) get(k convRef) *convSteps {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if c := lt.cur.convs[k]; c != nil {
		return c
	}
	if len(lt.cur.convs) >= lt.max || lt.cur.bytes.Load() >= lt.maxBytes/2 {
		lt.prev, lt.cur = lt.cur, &generation{convs: make(map[convRef]*convSteps, min(lt.max, 1<<10))}
	}
	c := lt.prev.convs[k]
	if c == nil {
		c = &convSteps{}
	} else {
		delete(lt.prev.convs, k)
	}
	c.mu.Lock()
	if c.gen != nil {
		c.gen.bytes.Add(-c.bytes)
	}
	c.gen = lt.cur
	c.gen.bytes.Add(c.bytes)
	c.mu.Unlock()
	lt.cur.convs[k] = c
	return c
}

// find returns a conversation's steps, or nil; it adds nothing.
func (lt *loopTracker) find(k convRef) *convSteps {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if c := lt.cur.convs[k]; c != nil {
		return c
	}
	return lt.prev.convs[k]
}

// peek returns the loop last found in a conversation, without adding it.
func (lt *loopTracker) peek(k convRef) guard.Loop {
	c := lt.find(k)
	if c == nil {
		return guard.Loop{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loop
}

// loopEvent is a change of a conversation's loop worth recording: a loop
// that reached a level for the first time, or one the agent left.
type loopEvent struct {
	loop  guard.Loop
	level string // guard.LevelName, or "broken"
	store bool   // worth an incident (see firstRecorded); every event is counted
}

// trackLoop adds the request's new tool results (verdicts set) to its
// conversation's tail and returns the conversation's loop, with the
// events to record, and which of info.ToolResults were new to the tail.
// Without new results the loop is the one found before.
func (m *Memory) trackLoop(t tenant.Tenant, info *wire.Info) (loop guard.Loop, events []loopEvent, fresh []int) {
	if t.Session == "" {
		return guard.Loop{}, nil, nil
	}
	k := convRef{t.Workspace, t.Project, t.Session}
	if len(info.ToolResults) == 0 {
		return m.loops.peek(k), nil, nil
	}
	c := m.loops.get(k)
	c.mu.Lock()
	defer c.mu.Unlock()
	if fresh = c.addSteps(m.loops.seed, info); len(fresh) == 0 {
		return c.loop, nil, nil
	}
	prev := c.loop
	c.loop = m.Guard().DetectLoop(c.steps)
	return c.loop, c.events(prev), fresh
}

// addSteps adds the request's tool results that are new to the tail, in
// order, and returns their indexes in info.ToolResults. A body that
// re-sends the whole history holds the tail's results and older ones:
// only its latest ones can be new. c's lock must be held.
func (c *convSteps) addSteps(seed maphash.Seed, info *wire.Info) (fresh []int) {
	results := info.ToolResults
	skipped := max(0, len(results)-maxSteps)
	results = results[skipped:]
	var defined []string
	definedRead := false
	for i := range results {
		tr := &results[i]
		if _, ok := c.known[tr.Key]; ok {
			continue
		}
		if !definedRead {
			c.readDefined(seed, info)
			defined, definedRead = c.defined, true
		}
		c.push(tr.Key, stepOf(seed, tr, defined))
		fresh = append(fresh, skipped+i)
	}
	return fresh
}

// readDefined sets c.defined to the tools info's request defines, read
// again only when their bytes changed: the format's sum of the bytes that
// hold them says they did not (Claude Code's tools are 63 KB), else a
// hash of them. c's lock must be held.
func (c *convSteps) readDefined(seed maphash.Seed, info *wire.Info) {
	if info.ToolDefsSum != 0 && info.ToolDefsSum == c.defsSum && c.defined != nil {
		return
	}
	if h := maphash.Bytes(seed, info.ToolDefs); h != c.defsHash || c.defined == nil {
		c.defsHash, c.defined = h, wire.DefinedTools(info.ToolDefs)
	}
	c.defsSum = info.ToolDefsSum
}

// stepOf is the step of one tool result (its verdict set), given the
// tools the request defines.
func stepOf(seed maphash.Seed, tr *wire.ToolResult, defined []string) guard.Step {
	text := tr.Text()
	return guard.Step{
		Tool:   strings.Clone(tr.Name),
		Args:   boundArgs(wire.CallArgs(tr.Args)),
		Result: maphash.String(seed, text),
		Failed: tr.Failed,
		// A request that defines no tools says nothing of which exist.
		Unknown: len(defined) > 0 && tr.Name != "" && !tr.Builtin && !slices.Contains(defined, tr.Name),
		Output:  truncate(text, maxStepOutput),
	}
}

// push appends a step to the tail, the oldest leaving a full one. c's
// lock must be held.
func (c *convSteps) push(key string, st guard.Step) {
	if n := len(c.steps); n > 0 && c.steps[n-1].Args == st.Args {
		// A call repeated shares its arguments' string with the one
		// before: the loop detector compares them over the whole tail
		// on every new step, and equal strings at one address compare
		// at once.
		st.Args = c.steps[n-1].Args
	}
	delta := stepBytes(key, &st)
	if len(c.steps) == maxSteps {
		// The oldest step leaves; append moves the rest to a new
		// array once in a while.
		delta -= stepBytes(c.keys[0], &c.steps[0])
		delete(c.known, c.keys[0])
		c.steps, c.keys = c.steps[1:], c.keys[1:]
	}
	c.steps = append(c.steps, st)
	c.keys = append(c.keys, key)
	c.bytes += delta
	if c.gen != nil {
		c.gen.bytes.Add(delta)
	}
	if c.known == nil {
		c.known = make(map[string]struct{}, maxSteps)
	}
	c.known[key] = struct{}{}
}

// events returns the changes worth recording from the loop prev to the
// one found now: prev broken, and each level the current loop reached for
// the first time. c's lock must be held.
func (c *convSteps) events(prev guard.Loop) []loopEvent {
	var events []loopEvent
	if prev.Level > guard.LevelNone && prev.Key() != c.loop.Key() {
		key := prev.Key()
		_, again := c.broken[key]
		ev := loopEvent{loop: prev, level: "broken", store: !again && c.levels[key] >= firstRecorded(prev)}
		if ev.store {
			if c.broken == nil {
				c.broken = make(map[string]struct{})
			}
			c.broken[key] = struct{}{}
		}
		events = append(events, ev)
	}
	if l := c.loop; l.Level > guard.LevelNone {
		key := l.Key()
		if c.levels == nil {
			c.levels = make(map[string]int)
		}
		for lv := c.levels[key] + 1; lv <= l.Level; lv++ {
			events = append(events, loopEvent{loop: l, level: guard.LevelName(lv), store: lv >= firstRecorded(l)})
		}
		c.levels[key] = max(c.levels[key], l.Level)
	}
	return events
}

// firstRecorded is the first level of a loop worth a record of its own: a
// call that keeps failing is already recorded by its failures, and its
// guard entry is theirs, so it is recorded from the STOP level on; the
// other kinds leave no other trace.
func firstRecorded(l guard.Loop) int {
	if l.Kind == guard.LoopFailing {
		return guard.LevelStop
	}
	return guard.LevelGuard
}

// recordLoops stores a conversation's loop events as incidents of type
// loop, each once per conversation (a retry, or another replica, does not
// store it again), and counts them. Each incident names provider, the
// one the request is sent to first.
func (m *Memory) recordLoops(budget *storeBudget, t tenant.Tenant, model, provider string, events []loopEvent, now time.Time) bool {
	for _, ev := range events {
		m.metrics.loops.WithLabelValues(ev.level).Inc()
		if !ev.store {
			continue
		}
		inc := m.Incident(t, model, provider, store.TypeLoop, 0, loopMessage(ev.loop), now)
		inc.Code = ev.level
		dedupe := "loop|" + t.Session + "|" + ev.level + "|" + ev.loop.Key()
		if _, err := m.writeIncident(budget, inc, dedupe, false, nil); err != nil {
			m.StoreFailed(budget.parent, "add_incident", err)
			return false
		}
		m.log.InfoContext(budget.parent, "loop", "workspace", t.Workspace, "project", t.Project, "session", t.Session,
			"kind", ev.loop.Kind, "level", ev.level, "count", ev.loop.Count)
	}
	return true
}

// loopMessage describes a loop for its incident: its kind, count and calls.
func loopMessage(l guard.Loop) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(l.Kind, "_", " "))
	b.WriteString(" x")
	b.WriteString(strconv.Itoa(l.Count))
	for i, c := range l.Calls {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString(" / ")
		}
		b.WriteString(c.Tool)
		if c.Args != "" {
			b.WriteString(" ")
			b.WriteString(c.Args)
		}
	}
	return b.String()
}
