package chat

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
)

// An agent sends its whole conversation on every turn: the body of turn n+1
// is, byte for byte, the body of turn n up to the end of one of its
// messages (the last, or an earlier one when the agent retried or replaced
// a step), followed by new messages. convMemo remembers, per conversation,
// the latest turn: for each message, where it ends, a hash of the bytes up
// to there, and what reading them found (their positions, the system text,
// the goal, the tools called, how many tool results failed). When the next
// body repeats those bytes up to the end of message k, the scan jumps to
// there and only what follows is read: the validity of the bytes skipped
// and everything read from them are as last time, because they are the
// same bytes.
//
// A conversation is named by the bytes of its body up to the end of its
// first user message (its head: system prompt, goal), with the tenant. The
// sum of every prefix starts with the tenant, so the sum at the end of the
// head is the name (see wire.MemoSeed on collisions). Runs of one task
// share a name: the memo keeps the latest turn of each (up to
// wire.MaxBranches), and a turn resumes from the one it repeats furthest.
//
// The memo is bounded: at most 2*max conversations and 2*memoBytes, the
// older half dropped whole when the newer half fills. A conversation that falls out is read
// in full on its next turn, as is any body that changed an earlier message.
type convMemo struct {
	seed wire.MemoSeed
	max  int
	// starts are the starts of bodies found valid that many share (an
	// agent's system message): not scanned again.
	starts wire.KnownStarts[msgSpans]
	// systems are the system texts decoded lately (a conversation's
	// first turn decodes its agent's system message).
	systems *wire.SystemMemo

	mu        sync.Mutex
	cur, prev map[uint64]*memoBranches
	curBytes  int // the size of cur's entries
	prevBytes int // and of prev's
}

// memoBranches are the turns remembered under one name, the newest first.
// They are never changed once stored.
type memoBranches struct {
	entries []*memoEntry
	size    int // of the entries
}

// Bytes returns the bytes the memo holds (estimated, see memoEntry.size),
// the known starts of bodies included.
func (m *convMemo) Bytes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.curBytes + m.prevBytes + m.starts.Bytes()
}

// memoEntry is one remembered turn: the positions its scan found, and
// what reading its messages found, with a mark per message. It is never
// modified once stored.
type memoEntry struct {
	msgs     []msgSpans
	calls    []callSpans
	marks    []mark
	tools    []string
	named    []callName
	system   string
	systemAt int
	// check is what the turn found of system's blocks (see
	// systemHasBlocks); a turn that resumes with system takes it.
	check    systemCheck
	goal     string // the task, or the provisional goal when taskAt < 0
	taskAt   int    // the message the task was found in; -1 none
	firstMsg string // the provisional goal: the first user message's text
	key      string // the conversation's recall key, when system and goal are set
	// The verdicts of the turn's tool results, in message order: what a
	// turn resumed after them starts from (wire.Info.Prior).
	verdicts wire.VerdictLog

	// The bytes after the messages array (tool definitions, model,
	// options): how many, their memo hash, and where model, user, stream
	// and tools are among them, relative to the array's end (zero when not
	// there).
	tailLen                         int
	tailSum                         uint64
	tailModel, tailUser, tailStream span
	tailTools                       span

	// ext is the claim on the entry's lists: the request that resumes
	// from its last message and takes it appends its own to them in
	// place, past what the entry holds (see resumeFrom).
	ext wire.Extension

	bytes int // size(), once the entry is built
	// common is how many first messages every turn remembered beside
	// this one, when it was remembered, shares with it (branchesWith):
	// repeated follows them once for all.
	common int
}

// memoBytes bounds each half of convMemo by size: a remembered turn takes
// about 300 bytes a message (450 with the room its lists keep for the
// next turn's), long conversations make the memo drop its
// older half sooner, and a turn of more than a quarter of it is not
// remembered. defaultMemoSize bounds each half's conversations: the bytes
// bind first but for conversations of a few messages.
const (
	defaultMemoSize = 1 << 14
	memoBytes       = 16 << 20
)

// size estimates the memory an entry holds but its system text, which
// the turns of a conversation share: branchesWith counts it once (see
// wire.SharedTexts).
func (e *memoEntry) size() int {
	n := cap(e.msgs)*int(unsafe.Sizeof(msgSpans{})) + cap(e.calls)*int(unsafe.Sizeof(callSpans{})) +
		cap(e.marks)*int(unsafe.Sizeof(mark{})) + len(e.goal) + len(e.firstMsg) + len(e.key)
	n += (cap(e.tools) - len(e.tools)) * 16
	for _, t := range e.tools {
		n += 16 + len(t)
	}
	n += e.verdicts.Size()
	n += (cap(e.named) - len(e.named)) * int(unsafe.Sizeof(callName{}))
	for _, c := range e.named {
		n += int(unsafe.Sizeof(callName{})) + len(c.id) + len(c.name)
	}
	return n
}

func newConvMemo(max int) *convMemo {
	return &convMemo{seed: wire.NewMemoSeed(), max: max, cur: make(map[uint64]*memoBranches), systems: wire.NewSystemMemo(contentText, wire.StripFramed)}
}

// name sets c's name from body's head, which ends at end, cut where the
// messages before the first user message end (see wire.MemoSeed.Name):
// c.memoKey, and c.sum and c.summed, from where resume and remember sum
// on.
func (m *convMemo) name(c *conversation, tenant string, body []byte, cut, end int, start uint64) {
	c.sum, c.summed = m.seed.Name(tenant, body, cut, end, start), end
	c.memoKey, c.memoOK = c.sum, true
}

// resume is called by the scan of body once message probe, the first user
// message, is scanned, with c named. When c's conversation has a
// remembered turn whose messages after probe this body repeats, byte for
// byte, it fills c and c.scan with what was found up to the last message
// repeated of the turn it repeats furthest, and returns that message's
// end: the scan goes on from there. Otherwise it returns -1.
func (m *convMemo) resume(c *conversation, body []byte, probe int) int {
	m.mu.Lock()
	b := m.cur[c.memoKey]
	if b == nil {
		b = m.prev[c.memoKey]
	}
	m.mu.Unlock()
	if b == nil {
		return -1
	}
	c.prior = b.entries[0]
	e, last, at := c.repeated(b.entries, body, probe)
	if last < 0 {
		return -1 // nothing after the first user message to skip
	}
	c.prior = e
	c.summed, c.sum = e.msgs[last].end, at
	c.resumeFrom(e, last)
	return e.msgs[last].end
}

// repeated returns, of the turns es, the first when body repeats all its
// messages after probe, else the one whose messages after probe body
// repeats furthest, byte for byte (the first of those that go as far);
// the last message it repeats (-1 for none); and the sum of body up to
// its end. The turns are followed together: a message's bytes are summed
// once for all the turns it ends at the same place in.
func (c *conversation) repeated(es []*memoEntry, body []byte, probe int) (*memoEntry, int, uint64) {
	var buf [8]*memoEntry
	live := append(buf[:0], es...)
	sum, pos := c.sum, c.summed // the sum of the head: the name
	var best *memoEntry
	last := -1
	var at uint64 // sum as it was at the end of message last
	i := probe + 1
	if len(live) > 1 {
		// Every turn has the newest one's first common messages (runs of
		// one task share a long start): those are followed once, and
		// where the body leaves them, it leaves every turn.
		e := live[0]
		for ; i < e.common; i++ {
			end := e.msgs[i].end
			if end > len(body) || end <= pos {
				live = nil
				break
			}
			if sum, pos = wire.NextSum(sum, body[pos:end]), end; sum != e.marks[i].sum {
				live = nil
				break
			}
			if e.msgs[i].obj {
				best, last, at = e, i, sum
			}
		}
	}
	if len(live) > 1 {
		// The newest turn first, alone: an agent's next turn repeats its
		// last one whole, and then no other is looked at. Where the body
		// leaves it, the others that went as far go on together from
		// there: a sum covers the body up to its message's end, so those
		// are the ones whose message before ends where the newest one's
		// does with its sum.
		e, from := live[0], i
		for ; i < len(e.msgs); i++ {
			end := e.msgs[i].end
			if end > len(body) || end <= pos {
				break
			}
			next := wire.NextSum(sum, body[pos:end])
			if next != e.marks[i].sum {
				break
			}
			sum, pos = next, end
			if e.msgs[i].obj {
				best, last, at = e, i, sum
			}
		}
		switch {
		case i == len(e.msgs):
			live = nil
		case i == from:
			live = live[1:]
		default:
			n := 0
			for _, o := range live[1:] {
				if len(o.msgs) > i && o.msgs[i-1].end == e.msgs[i-1].end && o.marks[i-1].sum == e.marks[i-1].sum {
					live[n], n = o, n+1
				}
			}
			live = live[:n]
		}
	}
	for ; len(live) > 0; i++ {
		if len(live) == 1 {
			// One turn left (a conversation's own, most of the time):
			// followed alone.
			e := live[0]
			for ; i < len(e.msgs); i++ {
				end := e.msgs[i].end
				if end > len(body) || end <= pos {
					break
				}
				if sum, pos = wire.NextSum(sum, body[pos:end]), end; sum != e.marks[i].sum {
					break
				}
				// Only an object is sure to end where it ended: a number
				// could go on in the new body ("1" then "12").
				if e.msgs[i].obj {
					best, last, at = e, i, sum
				}
			}
			break
		}
		// The turns whose message i body repeats; of those that end it
		// at different places (only numbers can), the first one's.
		n, end, next, matched := 0, -1, uint64(0), false
		for _, e := range live {
			if i >= len(e.msgs) {
				continue
			}
			stop := e.msgs[i].end
			if stop > len(body) || stop <= pos || matched && stop != end {
				continue
			}
			if stop != end {
				end, next = stop, wire.NextSum(sum, body[pos:stop])
			}
			if e.marks[i].sum == next {
				live[n], n, matched = e, n+1, true
			}
		}
		live = live[:n]
		if n == 0 {
			break
		}
		sum, pos = next, end
		// Only an object is sure to end where it ended: a number could
		// go on in the new body ("1" then "12").
		if live[0].msgs[i].obj {
			best, last, at = live[0], i, sum
		}
	}
	return best, last, at
}

// resumeFrom fills c and c.scan with what e found up to message last.
// The request that resumes from e's last message with the entry's
// extension (wire.Extension), having messages of its own, appends its messages, calls, marks, tools
// and verdicts to e's arrays in place, past e's lengths: e reads none of
// it, and no other request writes there. Any other copies them (a retry,
// a replaced step, every request of a storm).
func (c *conversation) resumeFrom(e *memoEntry, last int) {
	mk := e.marks[last]
	cs := &c.scan
	c.from = last + 1
	took := last+1 == len(e.msgs) && mk.scanCalls == len(e.calls) && mk.calls == len(e.named) &&
		mk.tools == len(e.tools) && wire.MoreElems(c.body, e.msgs[last].end) && e.ext.Take()
	if took {
		// The working slices go back unused: the entry's are c's now,
		// and no other read may reuse them.
		workSlicePool.Put(c.work)
		c.work = nil
		cs.msgs, cs.calls, c.marks, c.calls.Calls, c.info.Tools = e.msgs, e.calls, e.marks, e.named, e.tools
	} else {
		// Room for the turn's new messages and calls: they are appended
		// next. Info's tools outlive the request (capture reads them): a
		// new array.
		cs.msgs = into(cs.msgs, e.msgs[:last+1], turnRoom)
		cs.calls = into(cs.calls, e.calls[:mk.scanCalls], turnRoom)
		c.marks = into(c.marks, e.marks[:last+1], turnRoom)
		c.info.Tools = into(nil, e.tools[:mk.tools], turnRoom)
		c.calls.Calls = into(c.calls.Calls, e.named[:mk.calls], turnRoom)
	}
	c.info.ToolCount = mk.toolCount
	c.verdicts, c.info.Prior = e.verdicts.Resumed(last, took)
	// The task, if it was found among the messages skipped; else the
	// first user message's text, and the search goes on.
	c.provisional = e.firstMsg
	if e.taskAt >= 0 && e.taskAt <= last {
		c.task, c.taskAt = recall.TaskFinder{Goal: e.goal, Found: true}, e.taskAt
		if e.systemAt >= 0 && e.systemAt <= last {
			// Its system message and task are both among the messages
			// skipped: so is its key.
			c.systemAt, c.info.System, c.info.Key, c.system = e.systemAt, e.system, e.key, e.check
		}
	} else {
		c.task = recall.TaskFinder{Goal: e.firstMsg}
		if e.systemAt >= 0 && e.systemAt <= last {
			c.systemAt, c.info.System, c.system = e.systemAt, e.system, e.check
		}
	}
	c.info.Goal = c.task.Goal
}

// resumeTail is called by the scan of body once its messages array,
// ending at end, is scanned. When c's conversation has a remembered turn
// whose bytes after its messages array are the same as body's, it sets
// c.scan's positions among them and reports true: the scan ends there.
// The bytes before the array are the same too (they are part of the
// conversation's name), so the scan of what follows would find what it
// found then.
func (m *convMemo) resumeTail(c *conversation, body []byte, end int) bool {
	e := c.prior
	if e == nil || e.tailLen != len(body)-end {
		return false
	}
	if m.seed.Bytes(body[end:]) != e.tailSum {
		return false
	}
	cs := &c.scan
	fromTail(&cs.model, e.tailModel, end)
	fromTail(&cs.user, e.tailUser, end)
	fromTail(&cs.stream, e.tailStream, end)
	fromTail(&cs.tools, e.tailTools, end)
	c.tailSum, c.tailKnown = e.tailSum, true
	return true
}

// fromTail sets *dst, when it is absent, to rel (a span relative to end).
func fromTail(dst *span, rel span, end int) {
	if !dst.ok() && rel.ok() {
		*dst = span{rel.start + end, rel.end + end}
	}
}

// relativeTo returns sp relative to end when sp is after end, else the
// zero span.
func relativeTo(sp span, end int) span {
	if !sp.ok() || sp.start < end {
		return span{}
	}
	return span{sp.start - end, sp.end - end}
}

// fit returns s for the memo to keep: s itself when at most half its
// array is room (as append leaves it: the next turn appends there, see
// resumeFrom), else a copy, so that an entry never holds much more memory
// than its size says (the scan sizes msgs from the body's length).
func fit[T any](s []T) []T {
	if cap(s) <= 2*len(s)+turnRoom {
		return s
	}
	return slices.Clone(s)
}

// turnRoom is the room left for what a turn adds to the state resumed
// from the memo.
const turnRoom = 8

// into returns a copy of src in dst's array when it has room for n more
// elements, else in a new array with that room.
func into[T any](dst, src []T, n int) []T {
	if cap(dst) < len(src)+n {
		dst = make([]T, 0, len(src)+n)
	}
	return append(dst[:0], src...)
}

// remember keeps c, read from body, as its conversation's latest turn, and
// reports whether it did. It must be called once c's tool results have
// been recorded (their failed verdicts are set): the next turn will not
// look at them again. The entry takes over c's slices instead of copying
// them: c must not change them afterwards (the handler calls remember
// just before c.release).
//
// A turn that repeats the remembered one but for its last two messages at
// most, with the same bytes after them (a retry, a replaced step, every
// request of a rate-limit storm), is not kept: the next turn resumes from
// the remembered one as far, or two messages short.
func (m *convMemo) remember(c *conversation, body []byte) bool {
	if !c.memoOK || len(c.marks) == 0 || c.scan.truncated || m.repeatsCurrent(c) {
		return false
	}
	c.sumMessages(body)
	e := m.entryOf(c, body)
	e.bytes = e.size()
	if e.bytes+len(e.system) > memoBytes/4 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.cur[c.memoKey]
	if ok {
		m.curBytes -= old.size
	} else {
		old = m.prev[c.memoKey] // its turns come along
	}
	b := branchesWith(e, old)
	if !ok && len(m.cur) >= m.max || m.curBytes+b.size > memoBytes {
		m.prev, m.prevBytes = m.cur, m.curBytes
		m.cur, m.curBytes = make(map[uint64]*memoBranches, min(len(m.prev), 1<<10)), 0
	}
	m.cur[c.memoKey] = b
	m.curBytes += b.size
	return true
}

// branchesWith returns the turns of a name once e is remembered: e, then
// old's but those e repeats (whatever resumes from them resumes from e as
// far) and the oldest past wire.MaxBranches or a quarter of memoBytes,
// each distinct system text counted once.
func branchesWith(e *memoEntry, old *memoBranches) *memoBranches {
	var shared wire.SharedTexts
	b := &memoBranches{entries: []*memoEntry{e}, size: e.bytes + shared.Size(e.system)}
	e.common = len(e.msgs)
	if old == nil {
		return b
	}
	for _, o := range old.entries {
		if len(b.entries) == wire.MaxBranches || o.prefixOf(e) {
			continue
		}
		n := o.bytes + shared.Peek(o.system)
		if b.size+n > memoBytes/4 {
			continue
		}
		shared.Size(o.system)
		b.entries = append(b.entries, o)
		b.size += n
	}
	if len(b.entries) > 1 {
		// The turns kept are among those kept beside the newest before
		// e, which all share its first p.common messages: e shares with
		// each at least what it shares with both.
		p := old.entries[0]
		e.common = min(commonMsgs(e, p), p.common)
	}
	return b
}

// commonMsgs is how many first messages e and f share, the same bytes.
func commonMsgs(e, f *memoEntry) int {
	n := min(len(e.msgs), len(f.msgs))
	for i := range n {
		if e.msgs[i].end != f.msgs[i].end || e.marks[i].sum != f.marks[i].sum {
			return i
		}
	}
	return n
}

// prefixOf reports whether e's messages are the first of f's, the same
// bytes (both are turns of one name: the same head).
func (e *memoEntry) prefixOf(f *memoEntry) bool {
	n := len(e.msgs)
	return n <= len(f.msgs) && (n == 0 || e.msgs[n-1].end == f.msgs[n-1].end && e.marks[n-1].sum == f.marks[n-1].sum)
}

// forget drops the turns remembered under key, if any.
func (m *convMemo) forget(key uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, ok := m.cur[key]; ok {
		m.curBytes -= b.size
		delete(m.cur, key)
	}
	if b, ok := m.prev[key]; ok {
		m.prevBytes -= b.size
		delete(m.prev, key)
	}
}

// repeatsCurrent reports whether c repeats the turn the memo holds for
// its conversation but for its last message or two (a retry, a replaced
// step, every request of a storm), with the same bytes after them: it is
// not remembered again.
func (m *convMemo) repeatsCurrent(c *conversation) bool {
	p := c.prior
	if p == nil || !c.tailKnown || len(c.scan.msgs) > len(p.msgs) || c.from < len(c.scan.msgs)-2 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.cur[c.memoKey]
	return b != nil && slices.Contains(b.entries, p)
}

// sumMessages sums the body up to the end of each message read. The
// body is summed up to c.summed (the head, or the messages resume
// skipped, whose marks are kept): it goes on from there. The messages
// before the first user message are part of the name: their sums are not
// used.
func (c *conversation) sumMessages(body []byte) {
	sum, pos := c.sum, c.summed
	for i := c.from; i < len(c.marks); i++ {
		end := c.scan.msgs[i].end
		if end < pos {
			continue
		}
		sum, pos = wire.NextSum(sum, body[pos:end]), end
		c.marks[i].sum = sum
	}
	c.sum, c.summed = sum, pos
}

// entryOf is what the memo keeps of c's turn.
func (m *convMemo) entryOf(c *conversation, body []byte) *memoEntry {
	cs := &c.scan
	end := cs.messages.end
	tailSum := c.tailSum
	if !c.tailKnown {
		tailSum = m.seed.Bytes(body[end:])
	}
	return &memoEntry{
		verdicts: c.verdicts.Add(c.info.Prior, c.info.ToolResults, nil),
		msgs:     fit(cs.msgs),
		calls:    fit(cs.calls),
		marks:    fit(c.marks),
		tools:    fit(c.info.Tools),
		named:    fit(c.calls.Calls),
		system:   c.info.System,
		systemAt: c.systemAt,
		check:    c.system,
		goal:     c.info.Goal,
		taskAt:   c.taskAt,
		firstMsg: c.provisional,
		key:      c.info.Key,

		tailLen:    len(body) - end,
		tailSum:    tailSum,
		tailModel:  relativeTo(cs.model, end),
		tailUser:   relativeTo(cs.user, end),
		tailStream: relativeTo(cs.stream, end),
		tailTools:  relativeTo(cs.tools, end),
	}
}
