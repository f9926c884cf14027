package memory

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

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
// through this replica (the pending set, windows.go) until its write
// commits or fails. When its answer is delivered depends on
// Options.Durability:
//
//   - DurabilitySync: the answer waits for the commit, at most
//     StoreTimeout, and says X-Scar-Degraded: store when it did not come.
//     A failure whose answer went out without that header is stored.
//   - DurabilityAsync (the default): while the store commits (the last
//     batch committed within the last second, and the batch being
//     written, if any, began less than StoreTimeout/4 ago) and fewer than
//     AsyncLossBound answers went out before their commit, the answer
//     goes out as soon as the failure is queued. Otherwise (the first
//     write, a store that failed, lags or is slower than the failures
//     arrive) the answer waits for the commit as with DurabilitySync: the
//     bound holds the answers back, not a queue of thousands.
//
// A tool failure found in a request that continues the turn this replica
// read last of its conversation is shown at once (no other replica read
// it) and written while the request goes to the provider; its answer
// waits for the commit (Memory.Committed). Any other tool failure is
// waited for before the request goes out (within the request's store
// budget): whether it was new decides the request's guard, and another
// replica may have stored it already. The
// memory API's POST /scar/v1/incidents returns after its commit, as
// before.
//
// Solutions captured from final answers go through a bounded queue to a
// goroutine of their own: the answer never waits for them, and the
// solution is built there, once per conversation and batch. When the queue
// is full a capture is dropped and counted
// (scarproxy_captures_dropped_total). Shutdown stores what both queues
// hold before it returns.
//
// What a kill -9 loses: the captures still queued (at most
// CaptureQueueSize), and the incidents queued or being written (at most
// incidentQueueBound). Of the failures whose answers were delivered, it
// loses at most AsyncLossBound with DurabilityAsync and none with
// DurabilitySync: the others' requests were still waiting. A write
// that fails (the store failed within StoreTimeout) loses its batch too;
// each is counted in scarproxy_store_errors_total{op="write_incidents"} and
// logged, and the answers that waited for it say X-Scar-Degraded: store.

// incidentGather is how long, at most, a batch nobody waits for gathers
// more incidents before its commit: in a storm of provider failures (whose
// answers do not wait), one commit then stores tens of them, which costs
// far less than a commit each. A batch holding an incident a request
// waits for is written at once.
const incidentGather = 5 * time.Millisecond

// CaptureSyncEvery is how often, at most, captured solutions are written
// and the recall index follows them while more keep coming (see
// captureQueue.loop).
const CaptureSyncEvery = 100 * time.Millisecond

// Queue sizes.
const (
	incidentQueueSize  = 4096
	incidentBatchMax   = 256 // incidents per transaction
	incidentQueueBound = incidentQueueSize + incidentBatchMax
	CaptureQueueSize   = 4096
)

// AsyncLossBound is the most provider failures, with DurabilityAsync,
// whose answers are out while their write has not committed: what a
// kill -9 may lose of the failures clients saw. Past it an answer waits
// for its commit.
const AsyncLossBound = 64

// pendingWrite is one incident on its way to the store.
type pendingWrite struct {
	inc    store.Incident // prepared (store.PrepareIncident): what the store will read back
	dedupe string
	shown  bool // shown in the guard before its commit (a provider failure)
	// lost, when set, is called if the write fails: what the incident's
	// request marked as recorded is to be recorded again.
	lost   func()
	waited bool // a request waits for its commit; else its answer is out (see answerEarly)
	// stepping flags a write of the batch the guard cache is applying
	// (guardCache.stepLocked), under its lock.
	stepping bool

	done   chan struct{} // closed once stored or failed; then stored and err are set
	stored bool
	err    error
}

// incidentWriter stores incidents in batches, one transaction at a time.
type incidentWriter struct {
	m *Memory
	*queue[*pendingWrite]
	clock func() time.Time // time.Now: when batches begin and end

	// The store's health, as the last batches saw it.
	healthMu sync.Mutex
	lastOK   time.Time // when the last batch that committed ended
	failed   bool      // the last batch failed
	started  time.Time // when the batch being written began (zero: none)
	early    int       // incidents queued or being written whose answers are out
}

func newIncidentWriter(m *Memory) *incidentWriter {
	w := &incidentWriter{m: m, queue: newQueue[*pendingWrite](incidentQueueSize), clock: time.Now}
	go w.loop()
	return w
}

// Health: how recent a commit must be, and how old the batch being
// written may be (a fraction of StoreTimeout), for an answer not to wait.
const healthyFor = time.Second

// committing reports whether the store is committing: the last batch
// committed within healthyFor, and the batch being written, if any, began
// less than StoreTimeout/4 ago. Call it with healthMu held.
func (w *incidentWriter) committing(now time.Time) bool {
	if w.failed || w.lastOK.IsZero() || now.Sub(w.lastOK) > healthyFor {
		return false
	}
	return w.started.IsZero() || now.Sub(w.started) < w.m.opts.StoreTimeout/4
}

// answerEarly reports whether the answer of a provider's failure may go
// out before its write commits (DurabilityAsync): the store is committing
// and fewer than AsyncLossBound answers are out before their commit. When
// it reports true it counts one more such answer, until its batch ends
// (write) or its push fails (releaseEarly).
func (w *incidentWriter) answerEarly() bool {
	now := w.clock()
	w.healthMu.Lock()
	defer w.healthMu.Unlock()
	if w.early >= AsyncLossBound || !w.committing(now) {
		return false
	}
	w.early++
	return true
}

// releaseEarly takes back n answers counted by answerEarly: their writes
// ended, or were never queued.
func (w *incidentWriter) releaseEarly(n int) {
	if n == 0 {
		return
	}
	w.healthMu.Lock()
	w.early -= n
	w.healthMu.Unlock()
}

// uncommitted returns the incidents queued or being written, and how many
// of them had their answers delivered before their commit.
func (w *incidentWriter) uncommitted() (pending, early int) {
	w.countMu.Lock()
	pending = w.count
	w.countMu.Unlock()
	w.healthMu.Lock()
	defer w.healthMu.Unlock()
	return pending, w.early
}

func (w *incidentWriter) loop() {
	defer close(w.done)
	batch := make([]*pendingWrite, 0, incidentBatchMax)
	timer := time.NewTimer(incidentGather)
	timer.Stop()
	for p := range w.ch {
		batch = append(batch[:0], p)
		waited := p.waited
	drain:
		for len(batch) < incidentBatchMax {
			select {
			case p, ok := <-w.ch:
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
				case p, ok := <-w.ch:
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
	m := w.m
	w.healthMu.Lock()
	w.started = w.clock()
	w.healthMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.StoreTimeout)
	defer cancel()
	writes := make([]store.IncidentWrite, len(batch))
	for i, p := range batch {
		inc := p.inc
		writes[i] = store.IncidentWrite{Incident: &inc, DedupeKey: p.dedupe}
	}
	m.guardCache.writingBatch(batch)
	steps, err := m.store.AddIncidents(ctx, writes)
	w.healthMu.Lock()
	w.started, w.failed = time.Time{}, err != nil
	if err == nil {
		w.lastOK = w.clock()
	}
	w.healthMu.Unlock()
	for i, p := range batch {
		p.stored, p.err = writes[i].Stored, err
		if p.stored {
			m.CountIncident(writes[i].Incident)
		}
	}
	if err != nil {
		m.metrics.storeErrs.WithLabelValues("write_incidents").Add(float64(len(batch)))
		m.log.Warn("storing incidents failed; they are lost", "count", len(batch), "err", err)
		for _, p := range batch {
			if p.lost != nil {
				p.lost()
			}
		}
	}
	m.guardCache.committed(batch, writes, steps)
	// The counts first: a writer told of its commit finds its incident
	// no longer counted as uncommitted.
	early := 0
	for _, p := range batch {
		if !p.waited {
			early++
		}
	}
	w.releaseEarly(early)
	w.ended(len(batch))
	for _, p := range batch {
		close(p.done)
	}
}

// writeIncident stores inc (with a dedupe key: once per key) through the
// writer and waits for its commit until ctx ends. With show, the incident
// is in the guard of the tenant's requests through this replica from now
// until its write commits (then it is read from the store) or fails (it
// is dated as it joins them, see guardCache.addPending), and, with
// DurabilityAsync, writeIncident may return once it is queued (see
// answerEarly): then it reports true. lost, if not nil, is called when
// the write fails after writeIncident returned. It logs, at debug, each
// incident it recorded (not one its dedupe key had recorded before).
func (m *Memory) writeIncident(budget *storeBudget, inc *store.Incident, dedupe string, show bool, lost func()) (bool, error) {
	stored, err := m.queueIncident(budget, inc, dedupe, show, lost)
	if stored {
		m.logRecorded(budget.parent, inc)
	}
	return stored, err
}

// logRecorded writes, at debug, that inc was recorded.
func (m *Memory) logRecorded(ctx context.Context, inc *store.Incident) {
	if !m.log.Enabled(ctx, slog.LevelDebug) {
		return // its attributes would be boxed for nothing, on every incident
	}
	m.log.DebugContext(ctx, "incident recorded", "workspace", inc.Workspace, "project", inc.Project,
		"conversation", inc.Session, "type", inc.Type, "provider", inc.Provider, "status", inc.StatusCode,
		"code", inc.Code, "fingerprint", inc.Fingerprint, "bytes", len(inc.Message))
}

// queueIncident is writeIncident without its log line. A write queued
// at once that nobody waits for (a provider failure's, most often) uses
// none of budget.
func (m *Memory) queueIncident(budget *storeBudget, inc *store.Incident, dedupe string, show bool, lost func()) (bool, error) {
	if !show {
		// A write the request waits for runs within its budget, started
		// before the write is queued (the writer's deadline for the batch
		// comes after it); once the budget is spent, no write starts, even
		// before its context says so (its timer may not have fired).
		if err := budget.spent(); err != nil {
			return false, err
		}
	}
	p := &pendingWrite{dedupe: dedupe, shown: show, lost: lost, done: make(chan struct{})}
	if err := m.prepare(p, inc); err != nil {
		return false, err
	}
	wait := !show || m.opts.Durability == DurabilitySync || !m.writer.answerEarly()
	p.waited = wait
	if !m.writer.offer(p) {
		if err := m.push(budget.context(), p); err != nil {
			if !wait {
				m.writer.releaseEarly(1)
			}
			return false, err
		}
	}
	if !wait {
		return true, nil
	}
	ctx := budget.context()
	select {
	case <-p.done:
		return p.stored, p.err
	case <-ctx.Done():
		// Still on its way: the writer stores it, or drops it from the
		// guard when it fails.
		return false, ctx.Err()
	}
}

// queueShown queues inc (with a dedupe key) and shows it in the guard of
// the tenant's requests through this replica until its write ends, as
// writeIncident does with show, without waiting: the caller waits for
// the returned write before the answer goes out (Memory.Committed), so
// it is not one of the answers out before their commit. lost is called
// if the write fails.
func (m *Memory) queueShown(ctx context.Context, inc *store.Incident, dedupe string, lost func()) (*pendingWrite, error) {
	p := &pendingWrite{dedupe: dedupe, shown: true, waited: true, lost: lost, done: make(chan struct{})}
	if err := m.prepare(p, inc); err != nil {
		return nil, err
	}
	if err := m.push(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// prepare makes inc p's incident, ready for the store: shown in its
// tenant's guard from now on when p is to be shown.
func (m *Memory) prepare(p *pendingWrite, inc *store.Incident) error {
	if p.shown {
		return m.guardCache.addPending(p, inc, m.opts.Now)
	}
	if err := store.PrepareIncident(inc, inc.Time); err != nil {
		return err
	}
	p.inc = *inc
	return nil
}

// push queues p for the writer; a p the queue refuses leaves the guard.
func (m *Memory) push(ctx context.Context, p *pendingWrite) error {
	err := m.writer.push(ctx, p)
	if err != nil && p.shown {
		m.guardCache.dropPending(p)
	}
	return err
}

// Committed waits, within StoreTimeout, for the writes of the turn's tool
// failures that were shown before their commit (see recordToolErrors):
// call it once the request went out and before its answer does. It
// reports false when one of them failed or did not commit in time: the
// answer then says X-Scar-Degraded: store.
func (m *Memory) Committed(ctx context.Context, tu *Turn) bool {
	if len(tu.commits) == 0 {
		return true
	}
	wctx, cancel := m.storeCtx(ctx)
	defer cancel()
	ok := true
	for _, p := range tu.commits {
		select {
		case <-p.done:
			ok = ok && p.err == nil
			if p.stored {
				m.logRecorded(ctx, &p.inc)
			}
		case <-wctx.Done():
			ok = false
		}
	}
	tu.commits = nil
	return ok
}

// Shutdown stops the background writers after they stored what their
// queues hold, and adds the token usage not yet in the store, or stops
// when ctx ends (then what is left is lost). Call it once
// no request is in flight (after http.Server.Shutdown): later captures are
// dropped and later incidents fail to record.
func (m *Memory) Shutdown(ctx context.Context) error {
	var err error
	m.shutdownOnce.Do(func() {
		err = errors.Join(m.captures.close(ctx), m.writer.close(ctx), m.FlushUsage(ctx))
	})
	return err
}

// Wait returns once every incident write and every capture queued so far
// has ended (stored, or failed), and the token usage counted so far was
// added to the store (or failed to be): what a request recorded is then
// in the store. It never waits for a duration; it waits forever on a store
// that hangs past its timeout only if the store ignores its context.
func (m *Memory) Wait() {
	m.writer.wait()
	m.captures.wait()
	_ = m.FlushUsage(context.Background()) // a failure is counted in store_errors_total
}
