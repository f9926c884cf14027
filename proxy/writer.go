package proxy

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// The write path: failures and solutions the proxy observes reach the store
// without holding requests in line for each other.
//
// Incidents go through one writer goroutine that drains a queue and stores
// what it found there in one transaction (store.AddIncidents): concurrent
// failures share a commit instead of queueing on the store's writer lock.
// A batch no request waits for gathers for up to incidentGather first.
//
// A provider's failure is shown at once to the guard of every request
// through this replica (the pending set, guardcache.go) until its write
// commits or fails, so its answer need not wait for the write: while the
// store commits (the last batch committed within the last second, and the
// batch being written, if any, began less than StoreTimeout/4 ago), the
// answer goes out as soon as the failure is queued. Otherwise (the first
// write, a store that failed or lags) the answer waits for the commit, at
// most StoreTimeout, and says X-Scar-Degraded: store when it did not
// come: a failure whose answer went out without that header was stored,
// or queued while the store was committing. A tool failure found in a
// request is waited for (within the request's store budget): whether it
// was new decides the request's guard. The memory API's POST
// /scar/v1/incidents returns after its commit, as before.
//
// Solutions captured from final answers go through a bounded queue to a
// goroutine of their own: the answer never waits for them, and the
// solution is built there, once per conversation and batch. When the queue
// is full a capture is dropped and counted
// (scarproxy_captures_dropped_total). Shutdown stores what both queues
// hold before it returns.
//
// What a kill -9 loses: the captures still queued (at most
// captureQueueSize), and the incidents of the batch being written and of
// the queue (at most incidentQueueBound = incidentQueueSize +
// incidentBatchMax). A failure that is lost so had its answer sent (while
// the store was committing), or its request was still waiting. A write
// that fails (the store failed within StoreTimeout) loses its batch too;
// each is counted in scarproxy_store_errors_total{op="write_incidents"} and
// logged.

// incidentGather is how long, at most, a batch nobody waits for gathers
// more incidents before its commit: in a storm of provider failures (whose
// answers do not wait), one commit then stores tens of them, which costs
// far less than a commit each. A batch holding an incident a request
// waits for is written at once.
const incidentGather = 5 * time.Millisecond

// captureSyncEvery is how often, at most, captured solutions are written
// and the recall index follows them while more keep coming (see
// captureQueue.loop).
const captureSyncEvery = 100 * time.Millisecond

// Queue sizes.
const (
	incidentQueueSize  = 4096
	incidentBatchMax   = 256 // incidents per transaction
	incidentQueueBound = incidentQueueSize + incidentBatchMax
	captureQueueSize   = 4096
)

// errWriterClosed is returned for a write submitted after Shutdown.
var errWriterClosed = errors.New("proxy: the incident writer is shut down")

// pendingWrite is one incident on its way to the store.
type pendingWrite struct {
	inc    store.Incident // prepared (store.PrepareIncident): what the store will read back
	dedupe string
	shown  bool // shown in the guard before its commit (a provider failure)
	waited bool // a request waits for its commit

	done   chan struct{} // closed once stored or failed; then stored and err are set
	stored bool
	err    error
}

// incidentWriter stores incidents in batches, one transaction at a time.
type incidentWriter struct {
	s     *Server
	queue chan *pendingWrite

	// The store's health, as the last batches saw it.
	healthMu sync.Mutex
	lastOK   time.Time // when the last batch that committed ended
	failed   bool      // the last batch failed
	started  time.Time // when the batch being written began (zero: none)

	// Writes submitted and not ended, and their cond (signalled at 0).
	countMu sync.Mutex
	count   int
	idle    *sync.Cond

	mu     sync.RWMutex // read: submitting; write: closing the queue
	closed bool
	done   chan struct{} // closed when the loop has stored everything and ended
}

func newIncidentWriter(s *Server) *incidentWriter {
	w := &incidentWriter{s: s, queue: make(chan *pendingWrite, incidentQueueSize), done: make(chan struct{})}
	w.idle = sync.NewCond(&w.countMu)
	go w.loop()
	return w
}

// submit queues p, waiting for room until ctx ends.
func (w *incidentWriter) submit(ctx context.Context, p *pendingWrite) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return errWriterClosed
	}
	w.counted(1)
	select {
	case w.queue <- p:
		return nil
	default:
	}
	select {
	case w.queue <- p:
		return nil
	case <-ctx.Done():
		w.counted(-1)
		return ctx.Err()
	}
}

func (w *incidentWriter) counted(n int) {
	w.countMu.Lock()
	w.count += n
	if w.count == 0 {
		w.idle.Broadcast()
	}
	w.countMu.Unlock()
}

// wait returns once every submitted write has ended.
func (w *incidentWriter) wait() {
	w.countMu.Lock()
	for w.count > 0 {
		w.idle.Wait()
	}
	w.countMu.Unlock()
}

// Health: how recent a commit must be, and how old the batch being
// written may be (a fraction of StoreTimeout), for an answer not to wait.
const healthyFor = time.Second

// committing reports whether the store is committing: the last batch
// committed within healthyFor, and the batch being written, if any, began
// less than StoreTimeout/4 ago.
func (w *incidentWriter) committing() bool {
	now := time.Now()
	w.healthMu.Lock()
	defer w.healthMu.Unlock()
	if w.failed || w.lastOK.IsZero() || now.Sub(w.lastOK) > healthyFor {
		return false
	}
	return w.started.IsZero() || now.Sub(w.started) < w.s.opts.StoreTimeout/4
}

// close stops new writes and waits, until ctx ends, for the queued ones to
// be stored.
func (w *incidentWriter) close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *incidentWriter) loop() {
	defer close(w.done)
	batch := make([]*pendingWrite, 0, incidentBatchMax)
	timer := time.NewTimer(incidentGather)
	timer.Stop()
	for p := range w.queue {
		batch = append(batch[:0], p)
		waited := p.waited
	drain:
		for len(batch) < incidentBatchMax {
			select {
			case p, ok := <-w.queue:
				if !ok {
					break drain
				}
				batch = append(batch, p)
				waited = waited || p.waited
			default:
				break drain
			}
		}
		if !waited && len(batch) < incidentBatchMax {
			timer.Reset(incidentGather)
		gather:
			for len(batch) < incidentBatchMax {
				select {
				case p, ok := <-w.queue:
					if !ok {
						break gather
					}
					batch = append(batch, p)
					if p.waited {
						break gather
					}
				case <-timer.C:
					break gather
				}
			}
			timer.Stop()
		}
		w.write(batch)
		clear(batch)
	}
}

// write stores one batch within StoreTimeout, updates the guard cache with
// what it changed, and then tells each writer the outcome: a request that
// waited for its incident finds it in the guard.
func (w *incidentWriter) write(batch []*pendingWrite) {
	s := w.s
	w.healthMu.Lock()
	w.started = time.Now()
	w.healthMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.StoreTimeout)
	defer cancel()
	writes := make([]store.IncidentWrite, len(batch))
	for i, p := range batch {
		inc := p.inc
		writes[i] = store.IncidentWrite{Incident: &inc, DedupeKey: p.dedupe}
	}
	s.guardCache.writingBatch(batch)
	steps, err := s.store.AddIncidents(ctx, writes)
	w.healthMu.Lock()
	w.started, w.failed = time.Time{}, err != nil
	if err == nil {
		w.lastOK = time.Now()
	}
	w.healthMu.Unlock()
	for i, p := range batch {
		p.stored, p.err = writes[i].Stored, err
		if p.stored {
			s.countIncident(writes[i].Incident)
		}
	}
	if err != nil {
		s.metrics.storeErrs.WithLabelValues("write_incidents").Add(float64(len(batch)))
		s.log.Warn("storing incidents failed; they are lost", "count", len(batch), "err", err)
	}
	s.guardCache.committed(batch, writes, steps)
	for _, p := range batch {
		close(p.done)
	}
	w.counted(-len(batch))
}

// writeIncident stores inc (with a dedupe key: once per key) through the
// writer and waits for its commit until ctx ends. With show, the incident
// is in the guard of the tenant's requests through this replica from now
// until its write commits (then it is read from the store) or fails (it
// is dated as it joins them, see guardCache.addPending), and
// writeIncident returns once it is queued while the store is committing
// (see the top of this file): then it reports true.
func (s *Server) writeIncident(ctx context.Context, inc *store.Incident, dedupe string, show bool) (bool, error) {
	p := &pendingWrite{dedupe: dedupe, shown: show, done: make(chan struct{})}
	if show {
		if err := s.guardCache.addPending(p, inc, s.opts.Now); err != nil {
			return false, err
		}
	} else {
		if err := store.PrepareIncident(inc, inc.Time); err != nil {
			return false, err
		}
		p.inc = *inc
	}
	wait := !show || !s.writer.committing()
	p.waited = wait
	if err := s.writer.submit(ctx, p); err != nil {
		if show {
			s.guardCache.dropPending(p)
		}
		return false, err
	}
	if !wait {
		return true, nil
	}
	select {
	case <-p.done:
		return p.stored, p.err
	case <-ctx.Done():
		// Still on its way: the writer stores it, or drops it from the
		// guard when it fails.
		return false, ctx.Err()
	}
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
	s     *Server
	queue chan solutionCapture
	// The gathering's clock and timer: time.Now and time.After.
	clock func() time.Time
	after func(time.Duration) <-chan time.Time

	mu      sync.RWMutex
	closed  bool
	closing chan struct{} // closed by close: stop gathering, store what is left
	done    chan struct{}
	// Captures queued or being stored, and their cond (signalled at 0).
	countMu sync.Mutex
	count   int
	idle    *sync.Cond
}

func newCaptureQueue(s *Server) *captureQueue {
	q := &captureQueue{s: s, queue: make(chan solutionCapture, captureQueueSize), clock: time.Now, after: time.After,
		closing: make(chan struct{}), done: make(chan struct{})}
	q.idle = sync.NewCond(&q.countMu)
	go q.loop()
	return q
}

// add queues a capture; it never waits. It reports false when the capture
// was dropped (the queue is full, or shut down).
func (q *captureQueue) add(c solutionCapture) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return false
	}
	q.counted(1)
	select {
	case q.queue <- c:
		return true
	default:
		q.counted(-1)
		return false
	}
}

func (q *captureQueue) counted(n int) {
	q.countMu.Lock()
	q.count += n
	if q.count == 0 {
		q.idle.Broadcast()
	}
	q.countMu.Unlock()
}

// wait returns once no capture is queued or being stored.
func (q *captureQueue) wait() {
	q.countMu.Lock()
	for q.count > 0 {
		q.idle.Wait()
	}
	q.countMu.Unlock()
}

func (q *captureQueue) close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.queue)
		close(q.closing)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop stores what the queue holds in one transaction, the last capture
// of each conversation only, then brings the recall index up to date for
// all it stored. Captures that come within captureSyncEvery of the last
// write gather until then: a stream of them (a chat agent ends every
// turn in a final answer) costs one commit and one index sync per
// captureSyncEvery, not one per answer, and every sync, which moves the
// index's version and with it every conversation's cached recall, comes
// as seldom. A capture after a quiet spell is written at once.
func (q *captureQueue) loop() {
	defer close(q.done)
	s := q.s
	var batch []solutionCapture
	var lastPut time.Time
	for c := range q.queue {
		if wait := captureSyncEvery - q.clock().Sub(lastPut); !lastPut.IsZero() && wait > 0 {
			select {
			case <-q.after(wait):
			case <-q.closing:
			}
		}
		batch = append(batch[:0], c)
	drain:
		for {
			select {
			case c, ok := <-q.queue:
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
			if sol := c.solution(); s.captured.changed(&sol) {
				put = append(put, sol)
			}
		}
		if q.put(put) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), s.opts.StoreTimeout)
			if err := s.syncIndex(ctx); err != nil {
				s.log.Warn("recall index sync after capture failed", "err", err)
			}
			cancel()
			lastPut = q.clock()
		}
		clear(batch)
		q.counted(-len(batch))
	}
}

// put redacts and stores sols in one transaction and returns how many it
// stored: all or none.
func (q *captureQueue) put(sols []store.Solution) int {
	if len(sols) == 0 {
		return 0
	}
	s := q.s
	keys := slices.Clone(sols) // what the memo knows them by, before redaction
	ptrs := make([]*store.Solution, len(sols))
	for i := range sols {
		redactSolution(&sols[i])
		ptrs[i] = &sols[i]
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.StoreTimeout)
	defer cancel()
	if err := s.store.PutSolutions(ctx, ptrs); err != nil {
		s.storeFailed(context.Background(), "put_solution", err)
		for i := range keys {
			s.captured.forget(&keys[i])
		}
		return 0
	}
	return len(sols)
}

// Shutdown stops the background writers after they stored what their
// queues hold, or when ctx ends (then what is left is lost). Call it once
// no request is in flight (after http.Server.Shutdown): later captures are
// dropped and later incidents fail to record.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutdownOnce.Do(func() {
		err = errors.Join(s.captures.close(ctx), s.writer.close(ctx))
	})
	return err
}
