package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// Capture stores the solution of a conversation that finished well, in
// the background (the capture queue, capture.go, builds, redacts and
// writes it). A conversation is captured only when it ended well: a final
// answer that does not say the task failed, and the latest result of
// every tool it called succeeded (a run that gave up after a failure is
// no solution). Secrets in what is stored
// are redacted; a capture that would store what the last one of the
// conversation stored writes nothing.
func (m *Memory) Capture(t tenant.Tenant, info *wire.Info, answer string) {
	tallies := info.Tallies()
	for _, tl := range tallies {
		if tl.LastFailed {
			m.metrics.captureSkipped.Inc()
			return
		}
	}
	if recall.ReportsFailure(answer) {
		m.metrics.captureSkipped.Inc()
		return
	}
	// The queue keeps what it is given: info's slices are the request's
	// (a format's memo may hand them to the conversation's next turn).
	c := solutionCapture{conv: recall.Conversation{Workspace: t.Workspace, Project: t.Project, Key: info.Key,
		Goal: info.Goal, Tools: slices.Clone(info.Tools), FinalAnswer: answer}, tallies: tallies, at: m.opts.Now()}
	if !m.captures.offer(c) {
		m.metrics.captureDropped.Inc()
	}
}

// RedactSolution removes secrets from every text field of a solution.
func RedactSolution(sol *store.Solution) {
	sol.Goal = guard.Redact(sol.Goal)
	sol.Approach = guard.Redact(sol.Approach)
	sol.Outcome = guard.Redact(sol.Outcome)
}

// captureMemo remembers, per tenant and conversation, a hash of the
// solution last captured, so that the turns of a finished conversation
// (an agent often answers again and again in words) do not rewrite the
// same solution. It is bounded like the seen set: two generations.
type captureMemo struct {
	seed maphash.Seed
	mu   sync.Mutex
	last *generations[uint64, uint64] // hash of (workspace, key) -> hash of the content
}

func newCaptureMemo(max int) *captureMemo {
	return &captureMemo{seed: maphash.MakeSeed(), last: newGenerations[uint64, uint64](max, 0, nil)}
}

func (m *captureMemo) hashes(sol *store.Solution) (k, v uint64) {
	var h maphash.Hash
	h.SetSeed(m.seed)
	for _, f := range []string{sol.Workspace, sol.Project, sol.Key} {
		h.WriteString(f)
		h.WriteByte(0)
	}
	k = h.Sum64()
	for _, f := range []string{sol.Goal, sol.Approach, sol.Outcome, strconv.FormatFloat(sol.Confidence, 'g', -1, 64)} {
		h.WriteString(f)
		h.WriteByte(0)
	}
	return k, h.Sum64()
}

// changed reports whether sol differs from what was last captured under
// its key, and remembers it.
func (m *captureMemo) changed(sol *store.Solution) bool {
	k, v := m.hashes(sol)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.last.get(k); ok && old == v {
		return false
	}
	m.last.put(k, v)
	return true
}

// forget drops what changed remembered of sol (its write failed).
func (m *captureMemo) forget(sol *store.Solution) {
	k, _ := m.hashes(sol)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last.remove(k)
}

// solutionCapture is what a final answer says of its conversation, on
// its way to the store: the queue builds the solution of the last capture
// of each conversation it holds (recall.AutoSolution), not of every one.
type solutionCapture struct {
	conv    recall.Conversation // but Recovered, which solution derives from tallies
	tallies []wire.ToolTally    // no tool's latest result failed
	at      time.Time
}

// solution builds the solution c captures.
func (c *solutionCapture) solution() store.Solution {
	conv := c.conv
	conv.Recovered = make(map[string]int, len(c.tallies))
	for _, tl := range c.tallies {
		conv.Recovered[tl.Name] = tl.Failures
	}
	return recall.AutoSolution(conv, c.at)
}

// captureQueue stores captured solutions in the background.
type captureQueue struct {
	m *Memory
	*queue[solutionCapture]
	// The gathering's clock and timer: time.Now and time.After.
	clock func() time.Time
	after func(time.Duration) <-chan time.Time
	// solution builds a capture's solution: (*solutionCapture).solution.
	solution func(*solutionCapture) store.Solution
}

func newCaptureQueue(m *Memory) *captureQueue {
	q := &captureQueue{m: m, queue: newQueue[solutionCapture](CaptureQueueSize), clock: time.Now, after: time.After,
		solution: (*solutionCapture).solution}
	go q.loop()
	return q
}

// loop stores what the queue holds in one transaction, the last capture
// of each conversation only, then brings the recall index up to date for
// all it stored. Captures that come within CaptureSyncEvery of the last
// write gather until then: a stream of them (a chat agent ends every
// turn in a final answer) costs one commit and one index sync per
// CaptureSyncEvery, not one per answer, and every sync, which moves the
// index's version and with it every conversation's cached recall, comes
// as seldom. A capture after a quiet spell is written at once.
func (q *captureQueue) loop() {
	defer close(q.done)
	m := q.m
	var batch []solutionCapture
	var lastPut time.Time
	for c := range q.ch {
		if wait := CaptureSyncEvery - q.clock().Sub(lastPut); !lastPut.IsZero() && wait > 0 {
			select {
			case <-q.after(wait):
			case <-q.closing:
			}
		}
		batch = append(batch[:0], c)
	drain:
		for {
			select {
			case c, ok := <-q.ch:
				if !ok {
					break drain
				}
				batch = append(batch, c)
			default:
				break drain
			}
		}
		last := make(map[[3]string]int, len(batch))
		for i := range batch {
			cv := &batch[i].conv
			last[[3]string{cv.Workspace, cv.Project, cv.Key}] = i
		}
		var put []store.Solution
		for i := range batch {
			c := &batch[i]
			if last[[3]string{c.conv.Workspace, c.conv.Project, c.conv.Key}] != i {
				continue // a later capture of the conversation says more
			}
			// The memo compares what the conversation said, which
			// redaction maps to the same stored text every time.
			if sol, ok := q.solutionOf(c); ok && m.captured.changed(&sol) {
				put = append(put, sol)
			}
		}
		if q.put(put) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), m.opts.StoreTimeout)
			if err := m.SyncIndex(ctx); err != nil {
				m.log.Warn("recall index sync after capture failed", "err", err)
			}
			cancel()
			lastPut = q.clock()
		}
		clear(batch)
		q.ended(len(batch))
	}
}

// solutionOf returns the solution c captured. Building it reads a
// conversation's texts, which nobody foresaw all of: should it panic (a
// bug), the capture is dropped and logged with its stack, and the queue
// goes on; the process and every other capture stay.
func (q *captureQueue) solutionOf(c *solutionCapture) (sol store.Solution, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			q.m.log.Error("capture failed on a conversation; dropped", "panic", fmt.Sprint(p), "stack", string(debug.Stack()),
				"workspace", c.conv.Workspace, "project", c.conv.Project)
			sol, ok = store.Solution{}, false
		}
	}()
	return q.solution(c), true
}

// put redacts and stores sols in one transaction and returns how many it
// stored: all or none.
func (q *captureQueue) put(sols []store.Solution) int {
	if len(sols) == 0 {
		return 0
	}
	m := q.m
	keys := slices.Clone(sols) // what the memo knows them by, before redaction
	ptrs := make([]*store.Solution, len(sols))
	for i := range sols {
		RedactSolution(&sols[i])
		ptrs[i] = &sols[i]
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.StoreTimeout)
	defer cancel()
	if err := m.PutSolutions(ctx, ptrs...); err != nil {
		m.StoreFailed(context.Background(), "put_solution", err)
		for i := range keys {
			m.captured.forget(&keys[i])
		}
		return 0
	}
	return len(sols)
}
