package memory

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// Semantic recall (recall.embeddings): the goals of the solutions are
// embedded in the background, a new task's goal on its run's first
// request, and the two rankings fused (recall.Fuse).
const (
	// DefaultEmbedBackoff is the wait before the first retry of a failed
	// embedding of solutions; it doubles up to maxEmbedBackoff.
	DefaultEmbedBackoff = time.Second
	maxEmbedBackoff     = time.Minute
	// embedAttempts is how often a batch of solutions is tried before it
	// is given up (until the next restart or change of model).
	embedAttempts = 6
	// embedBatch is the most goals embedded by one call.
	embedBatch = 32
	// embedCallTimeout bounds one background call.
	embedCallTimeout = 30 * time.Second
	// embedRunes caps the text embedded, as the lexical ranking caps the
	// goal it reads: models have a context limit.
	embedRunes = 2000
	// taskVectorsKept is how many tasks' vectors are kept (a few MB at
	// 1,536 dimensions).
	taskVectorsKept = 1024
)

// Fallback reasons of scarproxy_recall_embedding_fallbacks_total.
const (
	fallbackError   = "error"
	fallbackTimeout = "timeout"
)

// embedMetrics are the series of semantic recall.
type embedMetrics struct {
	fallbacks *prometheus.CounterVec
	embedded  prometheus.Counter
	failed    prometheus.Counter
}

func newEmbedMetrics(reg prometheus.Registerer, vs *recall.Vectors) *embedMetrics {
	m := &embedMetrics{
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_recall_embedding_fallbacks_total",
			Help: "Recalls made on words alone because embedding the new task failed (error) or took longer than recall.embeddings.timeout (timeout).",
		}, []string{"reason"}),
		embedded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scarproxy_recall_solutions_embedded_total",
			Help: "Solution goals embedded and stored with their solution.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scarproxy_recall_solutions_embedding_failed_total",
			Help: "Solution goals given up after every retry of their embedding (tried again after a restart or a change of model).",
		}),
	}
	m.fallbacks.WithLabelValues(fallbackError)
	m.fallbacks.WithLabelValues(fallbackTimeout)
	if reg != nil {
		reg.MustRegister(m.fallbacks, m.embedded, m.failed, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "scarproxy_recall_solutions_embedding_pending",
			Help: "Solutions whose goal has no vector of the configured embedding model yet.",
		}, func() float64 { return float64(vs.PendingLen()) }))
	}
	return m
}

// embedderBox holds the embedder in an atomic pointer (nil: off).
type embedderBox struct{ e recall.Embedder }

func (m *Memory) embedder() recall.Embedder {
	if b := m.embed.Load(); b != nil {
		return b.e
	}
	return nil
}

// SetEmbedder makes e the embedder of semantic recall, nil turning it off
// (a configuration reload). With another model than before, every
// solution is embedded again in the background; until its vector is
// stored, a solution is found by its words only.
func (m *Memory) SetEmbedder(e recall.Embedder) {
	if e == nil {
		m.embed.Store(nil)
		m.vectors.SetModel("")
		return
	}
	m.embed.Store(&embedderBox{e})
	m.vectors.SetModel(e.Model())
}

// Vectors returns the goal vectors of semantic recall. Read it only.
func (m *Memory) Vectors() *recall.Vectors { return m.vectors }

// Search ranks the solutions of q.Workspace for q.Goal as recall does:
// with semantic recall on and vectors in the workspace, q.Goal is embedded
// within recall.embeddings.timeout and both rankings are fused
// (recall.Fuse); without, or when the embedding fails or comes too late
// (counted in scarproxy_recall_embedding_fallbacks_total), by its words
// alone (recall.Index.Search). The vectors of the latest 1,024 tasks are
// kept: a task run again is not embedded again.
func (m *Memory) Search(ctx context.Context, q recall.Query) []recall.Match {
	e := m.embedder()
	if e == nil || m.vectors.Len(q.Workspace) == 0 {
		return m.index.Search(q)
	}
	ec := m.recall.Load().Embeddings
	budget := ec.Timeout
	if budget <= 0 {
		budget = recall.DefaultEmbeddingsTimeout
	}
	text := capRunes(q.Goal, embedRunes)
	if vec := m.taskVecs.get(e.Model(), text); vec != nil {
		return recall.Fuse(m.index, m.vectors, q, vec, ec.MinSimilarity)
	}
	ectx, cancel := context.WithTimeout(ctx, budget)
	vecs, err := e.Embed(ectx, []string{text})
	timedOut := ectx.Err() == context.DeadlineExceeded
	cancel()
	if err != nil || len(vecs) != 1 {
		if ctx.Err() == nil { // a client gone is no fallback
			reason := fallbackError
			if timedOut || errors.Is(err, context.DeadlineExceeded) {
				reason = fallbackTimeout
			}
			m.embedMetrics.fallbacks.WithLabelValues(reason).Inc()
			m.log.DebugContext(ctx, "recall on words alone: embedding the task failed", "workspace", q.Workspace, "reason", reason, "err", err)
		}
		return m.index.Search(q)
	}
	m.taskVecs.put(e.Model(), text, vecs[0])
	return recall.Fuse(m.index, m.vectors, q, vecs[0], ec.MinSimilarity)
}

// taskVectors keeps the vectors of the latest tasks embedded, so that a
// task run again (a script or CI job repeating one prompt) is not
// embedded again. It is bounded in entries and bytes (see generations).
type taskVectors struct {
	mu sync.Mutex
	m  *generations[taskKey, []float32]
}

type taskKey struct{ model, text string }

func newTaskVectors(maxEntries int, maxBytes int64) *taskVectors {
	return &taskVectors{m: newGenerations(maxEntries, maxBytes, func(k taskKey, v []float32) int64 {
		return int64(len(k.model)+len(k.text)+4*len(v)) + 64
	})}
}

func (c *taskVectors) get(model, text string) []float32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, _ := c.m.get(taskKey{model, text})
	return v
}

func (c *taskVectors) put(model, text string, vec []float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m.put(taskKey{model, text}, vec)
}

// bytes returns the bytes the vectors kept hold.
func (c *taskVectors) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m.bytes()
}

// capRunes returns s cut to at most n runes.
func capRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// embedLoop embeds the solutions waiting for a vector until ctx ends.
func (m *Memory) embedLoop(ctx context.Context) {
	for {
		if m.embedder() != nil && m.vectors.PendingLen() > 0 {
			if m.EmbedPending(ctx) {
				continue
			}
			// A batch was given up, or the store failed: the provider or
			// the store is likely down, wait before the next batch.
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(maxEmbedBackoff, 60*m.opts.EmbedBackoff)):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-m.vectors.Wake():
		}
	}
}

// EmbedPending embeds the goals of the solutions waiting for a vector, a
// batch at a time, and stores each vector with its solution
// (store.Store.SetSolutionEmbedding); the recall index then follows the
// store. A batch whose embedding fails is tried again after a backoff
// (EmbedBackoff, doubling up to a minute), 6 times in all, then given up
// (counted in scarproxy_recall_solutions_embedding_failed_total). It
// returns true when nothing is pending, false when ctx ends, a batch is
// given up, or the store fails (the batch is pending again).
func (m *Memory) EmbedPending(ctx context.Context) bool {
	for ctx.Err() == nil {
		e := m.embedder()
		if e == nil {
			return true
		}
		batch := m.stored(ctx, e.Model(), m.vectors.Next(embedBatch))
		if len(batch) == 0 {
			if m.vectors.PendingLen() == 0 {
				return true
			}
			continue
		}
		vecs, ok := m.embedGoals(ctx, e, batch)
		if !ok {
			return false
		}
		if !m.storeVectors(ctx, e.Model(), batch, vecs) {
			return false
		}
		if err := m.SyncIndex(ctx); err != nil && ctx.Err() == nil {
			m.log.Debug("recall index sync after embedding failed", "err", err)
		}
	}
	return false
}

// stored returns the solutions of batch whose vector of model is not in
// the store already; those that are (semantic recall turned off and on
// again) are searched with it, without a call.
func (m *Memory) stored(ctx context.Context, model string, batch []recall.Pending) []recall.Pending {
	rest := batch[:0]
	for _, p := range batch {
		sctx, cancel := context.WithTimeout(ctx, m.opts.StoreTimeout)
		s, err := m.store.GetSolution(sctx, p.Workspace, p.ID)
		cancel()
		if err == nil && s.Goal == p.Goal && s.Embedding != nil && s.Embedding.Model == model &&
			m.vectors.Offer(p.Workspace, p.ID, p.Goal, s.Embedding) {
			continue
		}
		rest = append(rest, p)
	}
	return rest
}

// embedGoals embeds the goals of batch, with retries; false when it gave
// up or ctx ended.
func (m *Memory) embedGoals(ctx context.Context, e recall.Embedder, batch []recall.Pending) ([][]float32, bool) {
	goals := make([]string, len(batch))
	for i, p := range batch {
		goals[i] = capRunes(p.Goal, embedRunes)
	}
	wait := m.opts.EmbedBackoff
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, embedCallTimeout)
		vecs, err := e.Embed(cctx, goals)
		cancel()
		if err == nil && len(vecs) != len(goals) {
			err = errors.New("memory: embedder returned another number of vectors than of texts")
		}
		if err == nil {
			return vecs, true
		}
		if ctx.Err() != nil {
			m.vectors.Retry(batch)
			return nil, false
		}
		if attempt == embedAttempts {
			m.embedMetrics.failed.Add(float64(len(batch)))
			m.log.Warn("embedding solutions failed; given up until a restart or another model", "solutions", len(batch), "attempts", attempt, "err", err)
			return nil, false
		}
		m.log.Debug("embedding solutions failed; will retry", "solutions", len(batch), "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			m.vectors.Retry(batch)
			return nil, false
		case <-time.After(wait):
		}
		wait = min(2*wait, maxEmbedBackoff)
	}
}

// storeVectors stores the vectors of batch; false when the store failed
// (what was not stored is pending again).
func (m *Memory) storeVectors(ctx context.Context, model string, batch []recall.Pending, vecs [][]float32) bool {
	for i, p := range batch {
		sctx, cancel := context.WithTimeout(ctx, m.opts.StoreTimeout)
		err := m.store.SetSolutionEmbedding(sctx, p.Workspace, p.ID, p.Goal, store.Embedding{Model: model, Vector: vecs[i]})
		cancel()
		switch {
		case err == nil:
			m.embedMetrics.embedded.Inc()
		case errors.Is(err, store.ErrNotFound):
			// Deleted, or its goal changed: the feed brings the new goal.
		case errors.Is(err, store.ErrInvalid):
			m.embedMetrics.failed.Inc()
			m.log.Warn("embedding of a solution refused by the store", "workspace", p.Workspace, "id", p.ID, "err", err)
		default:
			if ctx.Err() == nil {
				m.metrics.storeErrs.WithLabelValues("set_solution_embedding").Inc()
				m.log.Warn("storing a solution's embedding failed; will retry", "workspace", p.Workspace, "id", p.ID, "err", err)
			}
			m.vectors.Retry(batch[i:])
			return false
		}
	}
	return true
}
