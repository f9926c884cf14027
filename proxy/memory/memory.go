// Package memory is a replica's memory in front of the store: what the
// proxy remembers of failures and solutions between requests, and what it
// decides for each request from it. One [Memory.Decide] call gives a
// request its blocks, in one order written once: record the request's new
// tool failures, follow its conversation's loop, learn the fixes its
// successes show, derive the guard, then recall.
//
// It owns the guard windows (each tenant's incidents, kept with the
// store's version they were read at and following this replica's own
// writes), the pending set (a provider failure is in the guard from the
// moment it is observed), the incident writer (group commit) and the
// capture queue (solutions stored in the background), the loop tracker,
// learned fixes, the recall index and its per-conversation cache, the
// goal vectors of semantic recall and their embedding (embed.go), and
// retention.
//
// # Failing open
//
// A store that fails or is slow never fails a request: [Turn.Degraded]
// says the request goes out unchanged.
//
// # Imports
//
// It imports guard, recall, store's types, proxy/wire and proxy/tenant;
// never Echo, net/http handlers or a store driver.
package memory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// Defaults of [Options].
const (
	DefaultIndexPoll       = 500 * time.Millisecond
	DefaultRetentionMaxAge = 30 * 24 * time.Hour
	DefaultRetentionEvery  = 10 * time.Minute
	DefaultGuardReadLimit  = 1000
	DefaultStoreTimeout    = 2 * time.Second
	DefaultUsageFlush      = 10 * time.Second

	// DefaultRetentionSolutionsMaxAge: an auto-captured solution nobody
	// captured again in a quarter describes code and tools that moved on.
	DefaultRetentionSolutionsMaxAge = 90 * 24 * time.Hour
	// DefaultRetentionSolutionsMaxPerWorkspace is the configuration's
	// default cap (retention.solutions_max_per_workspace); in [Options], 0
	// means no cap. Every replica holds every solution in its recall
	// index: the cap bounds that memory (BENCHMARKS.md gives the bytes).
	DefaultRetentionSolutionsMaxPerWorkspace = 10_000

	// DefaultRetentionFixesMaxAge: a fix nobody learned again in a quarter
	// was for code and tools that moved on.
	DefaultRetentionFixesMaxAge = 90 * 24 * time.Hour
	// DefaultRetentionFixesMaxPerProject is the configuration's default
	// cap (retention.fixes_max_per_project); in [Options], 0 means no cap.
	DefaultRetentionFixesMaxPerProject = 1000
)

// Durability says when a provider's failure is in the store compared with
// its answer to the client (see writer.go).
type Durability string

// Durabilities.
const (
	// DurabilityAsync lets the answer go out as soon as the failure is
	// queued while the store commits: a crash loses at most
	// AsyncLossBound failures whose answers were delivered.
	DurabilityAsync Durability = "async"
	// DurabilitySync holds the answer until the failure is committed, at
	// most StoreTimeout (then the answer says X-Scar-Degraded: store): a
	// crash loses none whose answer was delivered without that header.
	DurabilitySync Durability = "sync"
)

// Options configure a [Memory]. Store and Guard are required; a zero
// duration or limit means its default.
type Options struct {
	Store store.Store
	Guard *guard.Guard
	// Recall configures recall and auto-capture; nil means recall.DefaultConfig().
	Recall *recall.Config
	// Logger receives the memory's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// IndexPoll is how often the recall index follows the store's change
	// feed (solutions written by other replicas). Default 500ms.
	IndexPoll time.Duration
	// RetentionMaxAge prunes incidents older than it. Default 30 days.
	RetentionMaxAge time.Duration
	// RetentionMaxPerTenant caps incidents kept per tenant; 0 means no cap.
	RetentionMaxPerTenant int
	// RetentionSolutionsMaxAge prunes unverified solutions not updated for
	// longer than it; verified ones (stored by a person) are kept whatever
	// their age. Default 90 days.
	RetentionSolutionsMaxAge time.Duration
	// RetentionSolutionsMaxPerWorkspace caps the solutions kept per
	// workspace, and so the recall index's memory: the least recently
	// updated unverified ones go first, verified ones only when they alone
	// are over the cap (see store.Store.PruneSolutions). Every write of a
	// solution keeps it ([Memory.PutSolutions]), so neither the store nor
	// a recall index ever holds more; pruning brings a workspace down to a
	// cap lowered since its solutions were written. 0 means no cap.
	RetentionSolutionsMaxPerWorkspace int
	// RetentionFixesMaxAge prunes learned fixes not updated for longer
	// than it. Default 90 days.
	RetentionFixesMaxAge time.Duration
	// RetentionFixesMaxPerProject caps the learned fixes kept per
	// (workspace, project), the least recently updated going first. Every
	// write of a fix keeps it ([Memory.PutFixes]), as for solutions. 0
	// means no cap.
	RetentionFixesMaxPerProject int
	// RetentionEvery is the pruning period (incidents, solutions and
	// fixes). Default 10 minutes.
	RetentionEvery time.Duration
	// GuardReadLimit caps the incidents read per request for the guard.
	// Default 1000.
	GuardReadLimit int
	// StoreTimeout bounds every store call on a request path: the guard
	// read while a body arrives and, together, the calls made once it is
	// read (past it the request is forwarded unchanged: fail open); the
	// recording of a provider's failure (past it the answer says
	// X-Scar-Degraded: store); each memory API call and /readyz (503).
	// Default 2s.
	StoreTimeout time.Duration
	// Durability says whether a provider's failure answer waits for the
	// commit of its incident: DurabilityAsync (the default when empty) or
	// DurabilitySync.
	Durability Durability
	// UsageFlush is how often the token usage summed in memory is added
	// to the store (see [Memory.CountUsage]). Default 10s.
	UsageFlush time.Duration
	// Embedder embeds goals for semantic recall (recall.embeddings); nil:
	// off. [Memory.SetEmbedder] changes it.
	Embedder recall.Embedder
	// EmbedBackoff is the wait before the first retry of a failed
	// embedding of solutions, doubling up to a minute. Default 1s.
	EmbedBackoff time.Duration
}

// withDefaults returns o with its zero values set to their defaults, or
// an error naming the first value that is out of range.
func (o Options) withDefaults() (Options, error) {
	if o.Store == nil || o.Guard == nil {
		return o, errors.New("memory: Store and Guard are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"RetentionMaxPerTenant", o.RetentionMaxPerTenant}, {"RetentionSolutionsMaxPerWorkspace", o.RetentionSolutionsMaxPerWorkspace}, {"RetentionFixesMaxPerProject", o.RetentionFixesMaxPerProject}} {
		if n.v < 0 {
			return o, fmt.Errorf("memory: %s must not be negative", n.name)
		}
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&o.IndexPoll, DefaultIndexPoll}, {&o.RetentionMaxAge, DefaultRetentionMaxAge}, {&o.RetentionSolutionsMaxAge, DefaultRetentionSolutionsMaxAge},
		{&o.RetentionFixesMaxAge, DefaultRetentionFixesMaxAge}, {&o.RetentionEvery, DefaultRetentionEvery}, {&o.StoreTimeout, DefaultStoreTimeout},
		{&o.UsageFlush, DefaultUsageFlush}, {&o.EmbedBackoff, DefaultEmbedBackoff}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	switch o.Durability {
	case "":
		o.Durability = DurabilityAsync
	case DurabilityAsync, DurabilitySync:
	default:
		return o, fmt.Errorf("memory: Durability %q is not %q or %q", o.Durability, DurabilityAsync, DurabilitySync)
	}
	if o.GuardReadLimit <= 0 {
		o.GuardReadLimit = DefaultGuardReadLimit
	}
	if o.Recall == nil {
		rc := recall.DefaultConfig()
		o.Recall = &rc
	}
	if err := o.Recall.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// Memory is a replica's memory. Build it with [New], run [Memory.Run] for
// its background work, and [Memory.Shutdown] it.
type Memory struct {
	opts  Options
	log   *slog.Logger
	store store.Store
	// quickVersions: the store's IncidentVersion never waits (see
	// store.MemoryVersions).
	quickVersions bool
	// guard and recall are replaced as a whole by Reconfigure.
	guard   atomic.Pointer[guard.Guard]
	recall  atomic.Pointer[recall.Config]
	index   *recall.Index
	metrics *metrics
	seen    *seenSet
	texts   textMemo // what incidents store of recent messages
	// loops keeps each conversation's latest tool calls; recovered, when
	// each provider last answered well after failing.
	loops     *loopTracker
	recovered *recoveries
	// captured remembers what auto-capture last stored per conversation.
	captured *captureMemo
	usage    *usageBook // token usage not yet in the store
	labels   *labelBook // conversation labels not yet in the store

	// vectors, embed, embedMetrics and taskVecs are semantic recall's
	// (embed.go).
	vectors      *recall.Vectors
	embed        atomic.Pointer[embedderBox]
	embedMetrics *embedMetrics
	taskVecs     *taskVectors

	guardCache   *guardCache
	recallCache  *recallCache
	writer       *incidentWriter // incidents, in batches (writer.go)
	captures     *captureQueue   // solutions, in the background (capture.go)
	shutdownOnce sync.Once
	indexVersion atomic.Int64 // moves whenever the recall index changes

	syncMu sync.Mutex
	cursor int64
}

// New builds a memory and registers its metrics with reg (nil: none). It
// loads the recall index from the store; a store that is down is not an
// error (the index loads when the store returns: see [Memory.SyncIndex]).
func New(ctx context.Context, opts Options, reg prometheus.Registerer) (*Memory, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	versions, inMemory := opts.Store.(store.MemoryVersions)
	m := &Memory{
		opts:          opts,
		log:           opts.Logger,
		store:         opts.Store,
		quickVersions: inMemory && versions.VersionsInMemory(),
		index:         recall.NewIndex(),
		metrics:       newMetrics(reg),
		seen:          newSeenSet(1 << 17),
		loops:         newLoopTracker(1<<14, maxLoopBytes),
		recovered:     newRecoveries(),
		captured:      newCaptureMemo(1 << 14),
		usage:         newUsageBook(),
		labels:        newLabelBook(),

		guardCache:  newGuardCache(maxGuardCacheBytes),
		recallCache: newRecallCache(1<<14, maxRecallCacheBytes),
	}
	m.guard.Store(opts.Guard)
	rc := *opts.Recall
	m.recall.Store(&rc)
	m.vectors, m.taskVecs = recall.NewVectors(), newTaskVectors(taskVectorsKept, maxTaskVectorBytes)
	m.embedMetrics = newEmbedMetrics(reg, m.vectors)
	m.SetEmbedder(opts.Embedder) // before the index loads: its vectors are of this model
	if err := m.SyncIndex(ctx); err != nil {
		m.log.Warn("recall index not loaded; will retry", "err", err)
	}
	m.writer = newIncidentWriter(m)
	registerWriterGauges(reg, m.writer)
	registerStateGauges(reg, m)
	m.captures = newCaptureQueue(m)
	return m, nil
}

// Store returns the store the memory is in front of.
func (m *Memory) Store() store.Store { return m.store }

// Guard returns the guard the memory derives its blocks with.
func (m *Memory) Guard() *guard.Guard { return m.guard.Load() }

// Index returns the recall index. Read it only: [Memory.SyncIndex] and
// the capture queue change it.
func (m *Memory) Index() *recall.Index { return m.index }

// Recall returns the recall configuration.
func (m *Memory) Recall() recall.Config { return *m.recall.Load() }

// Reconfigure makes g the guard and rc the recall configuration of the
// requests that follow (a configuration reload); an invalid rc changes
// nothing. Guards are derived anew under g: the windows read under the
// old guard are read again. A conversation keeps the recall block it was
// given on its first request (the provider caches it); new conversations
// are recalled with rc.
func (m *Memory) Reconfigure(g *guard.Guard, rc recall.Config) error {
	if g == nil {
		return errors.New("memory: Reconfigure: nil guard")
	}
	if err := rc.Validate(); err != nil {
		return err
	}
	m.guard.Store(g)
	m.recall.Store(&rc)
	return nil
}

// Now reads the memory's clock.
func (m *Memory) Now() time.Time { return m.opts.Now() }

// StoreTimeout is the budget of the store calls made for one request or
// one memory call.
func (m *Memory) StoreTimeout() time.Duration { return m.opts.StoreTimeout }

// Run does the server's background work until ctx ends: following the
// store's solution change feed; embedding the solutions' goals when
// semantic recall is on (see [Memory.EmbedPending]); adding the token
// usage summed in memory to the store every UsageFlush; and pruning
// incidents, solutions, learned fixes and usage (see the Retention
// options), once at start and then every RetentionEvery.
func (m *Memory) Run(ctx context.Context) {
	poll := time.NewTicker(m.opts.IndexPoll)
	defer poll.Stop()
	prune := time.NewTicker(m.opts.RetentionEvery)
	defer prune.Stop()
	flush := time.NewTicker(m.opts.UsageFlush)
	defer flush.Stop()
	go m.embedLoop(ctx)
	m.prune(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if err := m.SyncIndex(ctx); err != nil && ctx.Err() == nil {
				m.log.Debug("recall index sync failed", "err", err)
			}
		case <-flush.C:
			m.flushUsage(ctx)
		case <-prune.C:
			m.prune(ctx)
		}
	}
}

// prune applies retention: incidents, then solutions, then learned fixes,
// then token usage (kept as long as incidents), each within a minute. The solutions it removes leave this replica's
// recall index at once (the other replicas' at their next sync).
func (m *Memory) prune(ctx context.Context) {
	now := m.opts.Now()
	m.pruneOne(ctx, "incidents", "prune", func(ctx context.Context) (int, error) {
		return m.store.PruneIncidents(ctx, now.Add(-m.opts.RetentionMaxAge), m.opts.RetentionMaxPerTenant)
	})
	n := m.pruneOne(ctx, "solutions", "prune_solutions", func(ctx context.Context) (int, error) {
		return m.store.PruneSolutions(ctx, now.Add(-m.opts.RetentionSolutionsMaxAge), m.opts.RetentionSolutionsMaxPerWorkspace)
	})
	if n > 0 {
		if err := m.SyncIndex(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("recall index sync after pruning failed", "err", err)
		}
	}
	m.pruneOne(ctx, "fixes", "prune_fixes", func(ctx context.Context) (int, error) {
		return m.store.PruneFixes(ctx, now.Add(-m.opts.RetentionFixesMaxAge), m.opts.RetentionFixesMaxPerProject)
	})
	m.pruneOne(ctx, "token usage", "prune_usage", func(ctx context.Context) (int, error) {
		return m.store.PruneUsage(ctx, now.Add(-m.opts.RetentionMaxAge))
	})
	m.pruneOne(ctx, "conversation labels", "prune_conversations", func(ctx context.Context) (int, error) {
		return m.store.PruneConversations(ctx, now.Add(-m.opts.RetentionMaxAge))
	})
}

// pruneOne runs one memory's pruning, logs and counts its outcome, and
// returns how many records it removed (some may be, even on an error).
func (m *Memory) pruneOne(ctx context.Context, what, op string, prune func(context.Context) (int, error)) int {
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := prune(pctx)
	if err != nil && ctx.Err() == nil {
		m.metrics.storeErrs.WithLabelValues(op).Inc()
		m.log.Warn("pruning "+what+" failed", "err", err, "pruned", n)
	}
	if n > 0 {
		m.log.Info("pruned "+what, "count", n)
	}
	return n
}

// SyncIndex applies the store's solution changes since the last sync.
func (m *Memory) SyncIndex(ctx context.Context) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	next, applied, err := m.index.Follow(ctx, m.vectors.Tee(m.store), m.cursor)
	m.cursor = next
	if applied > 0 {
		m.indexVersion.Add(1) // after the changes: a reader of the old version recomputes
	}
	if err != nil {
		return fmt.Errorf("proxy: sync recall index: %w", err)
	}
	return nil
}

// SyncIndexWithin is [Memory.SyncIndex] for a caller that must not wait past ctx:
// the index may be held by a sync that waits on the store (Run's, which
// has no deadline), and SyncIndex waits for it without looking at ctx.
// When ctx ends first, the sync left behind runs once the index is free
// and returns at once (its ctx is over).
func (m *Memory) SyncIndexWithin(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- m.SyncIndex(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("proxy: sync recall index: %w", ctx.Err())
	}
}
