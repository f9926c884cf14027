package chat

import "sync"

// A request's read works in slices as long as its conversation: where
// its messages and calls are, what was read up to each message, the calls
// with an id: about half the size of the request. The memo keeps them
// when it remembers the turn. When it does not (a turn that repeats the
// remembered one, such as a retry or every request of a rate-limit storm,
// or a read that is not remembered), the next request reuses them.
type workSlices struct {
	msgs  []msgSpans
	calls []callSpans
	marks []mark
	named []callName
}

// workSlicePool holds the slices of reads done with them. sync.Pool drops what
// stays unused across garbage collections.
var workSlicePool = sync.Pool{New: func() any { return new(workSlices) }}

// maxWorkSlices bounds the slices kept for reuse: those of a longer
// conversation are left to the garbage collector.
const maxWorkSlices = 4096

// takeWorkSlices gives c the slices of an earlier read to work in.
func (c *conversation) takeWorkSlices() {
	sp := workSlicePool.Get().(*workSlices)
	c.work = sp
	c.scan.msgs, c.scan.calls, c.marks, c.calls.Calls = sp.msgs[:0], sp.calls[:0], sp.marks[:0], sp.named[:0]
}

// giveBack hands c's slices to the next read. c must not use them
// afterwards (release drops them).
func (c *conversation) giveBack() {
	sp := c.work
	if sp == nil {
		return
	}
	c.work = nil
	if cap(c.scan.msgs) > maxWorkSlices || cap(c.scan.calls) > maxWorkSlices || cap(c.marks) > maxWorkSlices || cap(c.calls.Calls) > maxWorkSlices {
		return
	}
	// Clear the call names: working slices must not keep strings of a request.
	clear(c.calls.Calls[:cap(c.calls.Calls)])
	sp.msgs, sp.calls, sp.marks, sp.named = c.scan.msgs[:0], c.scan.calls[:0], c.marks[:0], c.calls.Calls[:0]
	workSlicePool.Put(sp)
}
