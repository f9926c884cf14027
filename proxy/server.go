// Package proxy is scarproxy's HTTP server: routes, tenant resolution, the
// request pipeline that rewrites outgoing requests (guard and recall
// blocks) and observes the provider's answers (incidents, auto-captured
// solutions), and the memory API under /scar/v1, whose calls are also MCP
// tools at /mcp (mcp.go). The dashboard under /ui/ is package proxy/ui;
// dashboard.go gives it the store, the guard, the recall index and the
// memory API's tenancy rules.
//
// # Request path
//
// POST /v1/chat/completions, /v1/responses and /v1/messages go through one
// pipeline (pipeline.go), in three phases: prepare resolves the tenant,
// reads the body (bounded) in its wire format, records new tool-error
// payloads, builds the guard block from the tenant's recent incidents and
// the recall block from similar solutions, and rewrites the system text;
// forward sends it to the providers that serve the format's API for its
// model (falling back on 429, 5xx, timeouts and unreachable providers
// before any byte reached the client); finish delivers the answer and
// observes it as it streams through. What differs between the APIs is
// behind [wire.Format], one package per format (proxy/chat,
// proxy/responses, proxy/messages). Every other /v1/* request passes
// through untouched.
//
// # Failing open
//
// When the store fails the request is still forwarded, unchanged, with the
// header X-Scar-Degraded: store.
//
// # Write path
//
// Incidents are stored by one writer that commits each batch of what
// queued in one transaction; a provider's failure is in this replica's
// guard from the moment it is observed (the pending set), and the guard's
// window follows this replica's writes without reading the store again.
// Captured solutions are stored in the background through a bounded
// queue. [Server.Shutdown] stores what both queues hold. See writer.go
// and guardcache.go.
//
// # Imports
//
// Only this package and cmd import Echo. It must not import bbolt or pgx.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/body"
	"github.com/scarproxy/scarproxy/proxy/chat"
	"github.com/scarproxy/scarproxy/proxy/messages"
	"github.com/scarproxy/scarproxy/proxy/responses"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/ui"
	"github.com/scarproxy/scarproxy/proxy/wire"
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

	// DefaultRetentionSolutionsMaxAge: an auto-captured solution nobody
	// captured again in a quarter describes code and tools that moved on.
	DefaultRetentionSolutionsMaxAge = 90 * 24 * time.Hour
	// DefaultRetentionSolutionsMaxPerWorkspace is the configuration's
	// default cap (retention.solutions_max_per_workspace); in [Options], 0
	// means no cap. Every replica holds every solution in its recall index,
	// about 3.2 KB each: 31 MiB for a workspace at this cap, 296 MiB at
	// 100,000 (BenchmarkRecallIndexHeap).
	DefaultRetentionSolutionsMaxPerWorkspace = 10_000

	// DefaultRetentionFixesMaxAge: a fix nobody learned again in a quarter
	// was for code and tools that moved on.
	DefaultRetentionFixesMaxAge = 90 * 24 * time.Hour
	// DefaultRetentionFixesMaxPerProject is the configuration's default
	// cap (retention.fixes_max_per_project); in [Options], 0 means no cap.
	DefaultRetentionFixesMaxPerProject = 1000
)

// Options configure a [Server]. Router, Store and Guard are required.
type Options struct {
	Router *providers.Router
	Store  store.Store
	Guard  *guard.Guard
	// Recall configures recall and auto-capture; zero means recall.DefaultConfig().
	Recall *recall.Config
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxBodyBytes bounds request bodies; larger ones get 413. Default body.DefaultMaxBytes.
	MaxBodyBytes int64
	// DefaultWorkspace and DefaultProject apply when neither the path nor
	// headers name them. Default "default".
	DefaultWorkspace, DefaultProject string
	// GatewayKeys, when set, make a valid key mandatory on /v1 and decide
	// the workspace.
	GatewayKeys []tenant.Key
	// AdminToken, when set, is required (as a bearer token) on /scar/v1;
	// a gateway key may also use /scar/v1 for its own workspace.
	AdminToken string
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
	// are over the cap (see store.Store.PruneSolutions). 0 means no cap.
	RetentionSolutionsMaxPerWorkspace int
	// RetentionFixesMaxAge prunes learned fixes not updated for longer
	// than it. Default 90 days.
	RetentionFixesMaxAge time.Duration
	// RetentionFixesMaxPerProject caps the learned fixes kept per
	// (workspace, project), the least recently updated going first. 0
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
	// MaxBodyBytesInFlight bounds the bytes of request bodies held at
	// once, across requests; a request whose body would pass it gets 503
	// with Retry-After. Default body.DefaultMaxBytesInFlight.
	MaxBodyBytesInFlight int64
	// Version is the version the MCP server reports. Default "dev".
	Version string
}

// Server is the proxy. Build it with [New], serve [Server.Handler], run
// [Server.Run] for its background work, and [Server.Close] it.
type Server struct {
	opts    Options
	log     *slog.Logger
	recall  recall.Config
	router  *providers.Router
	store   store.Store
	guard   *guard.Guard
	index   *recall.Index
	tenants *tenant.Policy
	metrics *metrics
	seen    *seenSet
	texts   textMemo // what incidents store of recent messages
	// loops keeps each conversation's latest tool calls; recovered, when
	// each provider last answered well after failing.
	loops     *loopTracker
	recovered *recoveries
	// captured remembers what auto-capture last stored per conversation.
	captured *captureMemo
	// The wire formats of the rewritten routes; chat and responses
	// remember conversations between turns.
	chat, responses, messages wire.Format
	formats                   map[string]wire.Format // by API name (providers.API*)
	echo                      *echo.Echo
	mcpHTTP                   http.Handler // the MCP streamable HTTP transport
	ui                        *ui.Handler  // the dashboard under /ui/

	guardCache   *guardCache
	recallCache  *recallCache
	writer       *incidentWriter // incidents, in batches (writer.go)
	captures     *captureQueue   // solutions, in the background (writer.go)
	shutdownOnce sync.Once
	indexVersion atomic.Int64 // moves whenever the recall index changes

	syncMu sync.Mutex
	cursor int64

	bodies *body.Reader // request bodies, bounded one by one and in all
}

// New builds a server. It loads the recall index from the store; a store
// that is down is not an error (the server starts, /readyz says why it is
// not ready, and the index loads when the store returns).
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Router == nil || opts.Store == nil || opts.Guard == nil {
		return nil, errors.New("proxy: Router, Store and Guard are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DefaultWorkspace == "" {
		opts.DefaultWorkspace = "default"
	}
	if opts.DefaultProject == "" {
		opts.DefaultProject = "default"
	}
	if opts.IndexPoll <= 0 {
		opts.IndexPoll = DefaultIndexPoll
	}
	if opts.RetentionMaxAge <= 0 {
		opts.RetentionMaxAge = DefaultRetentionMaxAge
	}
	if opts.RetentionMaxPerTenant < 0 {
		return nil, errors.New("proxy: RetentionMaxPerTenant must not be negative")
	}
	if opts.RetentionSolutionsMaxAge <= 0 {
		opts.RetentionSolutionsMaxAge = DefaultRetentionSolutionsMaxAge
	}
	if opts.RetentionSolutionsMaxPerWorkspace < 0 {
		return nil, errors.New("proxy: RetentionSolutionsMaxPerWorkspace must not be negative")
	}
	if opts.RetentionFixesMaxAge <= 0 {
		opts.RetentionFixesMaxAge = DefaultRetentionFixesMaxAge
	}
	if opts.RetentionFixesMaxPerProject < 0 {
		return nil, errors.New("proxy: RetentionFixesMaxPerProject must not be negative")
	}
	if opts.RetentionEvery <= 0 {
		opts.RetentionEvery = DefaultRetentionEvery
	}
	if opts.StoreTimeout <= 0 {
		opts.StoreTimeout = DefaultStoreTimeout
	}
	if opts.GuardReadLimit <= 0 {
		opts.GuardReadLimit = DefaultGuardReadLimit
	}
	rc := recall.DefaultConfig()
	if opts.Recall != nil {
		rc = *opts.Recall
	}
	if err := rc.Validate(); err != nil {
		return nil, err
	}
	tenants, err := tenant.New(tenant.Config{DefaultWorkspace: opts.DefaultWorkspace, DefaultProject: opts.DefaultProject, Keys: opts.GatewayKeys, AdminToken: opts.AdminToken})
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		recall:    rc,
		router:    opts.Router,
		store:     opts.Store,
		guard:     opts.Guard,
		index:     recall.NewIndex(),
		tenants:   tenants,
		bodies:    body.NewReader(opts.MaxBodyBytes, opts.MaxBodyBytesInFlight),
		metrics:   newMetrics(),
		seen:      newSeenSet(1 << 17),
		loops:     newLoopTracker(1 << 14),
		recovered: newRecoveries(),
		captured:  newCaptureMemo(1 << 14),
		chat:      chat.New(),
		responses: responses.New(),
		messages:  messages.New(),

		guardCache:  newGuardCache(1 << 17),
		recallCache: newRecallCache(1 << 14),
	}
	s.formats = map[string]wire.Format{s.chat.Name(): s.chat, s.responses.Name(): s.responses, s.messages.Name(): s.messages}
	if err := s.syncIndex(ctx); err != nil {
		s.log.Warn("recall index not loaded; will retry", "err", err)
	}
	s.writer = newIncidentWriter(s)
	s.captures = newCaptureQueue(s)
	s.mcpHTTP = s.mcpHTTPHandler()
	if s.ui, err = s.dashboard(); err != nil {
		return nil, err
	}
	s.echo = s.routes()
	return s, nil
}

// Handler returns the HTTP handler serving every route.
func (s *Server) Handler() http.Handler { return s.echo }

// Run does the server's background work until ctx ends: following the
// store's solution change feed, and pruning incidents, solutions and
// learned fixes (see the Retention options), once at start and then every
// RetentionEvery.
func (s *Server) Run(ctx context.Context) {
	poll := time.NewTicker(s.opts.IndexPoll)
	defer poll.Stop()
	prune := time.NewTicker(s.opts.RetentionEvery)
	defer prune.Stop()
	s.prune(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			if err := s.syncIndex(ctx); err != nil && ctx.Err() == nil {
				s.log.Debug("recall index sync failed", "err", err)
			}
		case <-prune.C:
			s.prune(ctx)
		}
	}
}

// prune applies retention: incidents, then solutions, then learned fixes,
// each within a minute. The solutions it removes leave this replica's
// recall index at once (the other replicas' at their next sync).
func (s *Server) prune(ctx context.Context) {
	now := s.opts.Now()
	s.pruneOne(ctx, "incidents", "prune", func(ctx context.Context) (int, error) {
		return s.store.PruneIncidents(ctx, now.Add(-s.opts.RetentionMaxAge), s.opts.RetentionMaxPerTenant)
	})
	n := s.pruneOne(ctx, "solutions", "prune_solutions", func(ctx context.Context) (int, error) {
		return s.store.PruneSolutions(ctx, now.Add(-s.opts.RetentionSolutionsMaxAge), s.opts.RetentionSolutionsMaxPerWorkspace)
	})
	if n > 0 {
		if err := s.syncIndex(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("recall index sync after pruning failed", "err", err)
		}
	}
	s.pruneOne(ctx, "fixes", "prune_fixes", func(ctx context.Context) (int, error) {
		return s.store.PruneFixes(ctx, now.Add(-s.opts.RetentionFixesMaxAge), s.opts.RetentionFixesMaxPerProject)
	})
}

// pruneOne runs one memory's pruning, logs and counts its outcome, and
// returns how many records it removed (some may be, even on an error).
func (s *Server) pruneOne(ctx context.Context, what, op string, prune func(context.Context) (int, error)) int {
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := prune(pctx)
	if err != nil && ctx.Err() == nil {
		s.metrics.storeErrs.WithLabelValues(op).Inc()
		s.log.Warn("pruning "+what+" failed", "err", err, "pruned", n)
	}
	if n > 0 {
		s.log.Info("pruned "+what, "count", n)
	}
	return n
}

// syncIndex applies the store's solution changes since the last sync.
func (s *Server) syncIndex(ctx context.Context) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	next, applied, err := s.index.Follow(ctx, s.store, s.cursor)
	s.cursor = next
	if applied > 0 {
		s.indexVersion.Add(1) // after the changes: a reader of the old version recomputes
	}
	if err != nil {
		return fmt.Errorf("proxy: sync recall index: %w", err)
	}
	return nil
}

// Close stores what the background writers hold (see [Server.Shutdown];
// here each write within StoreTimeout) unless Shutdown did, ends the
// dashboard's live streams and releases the providers' idle connections.
// The store belongs to the caller: close it after.
func (s *Server) Close() error {
	err := s.Shutdown(context.Background())
	s.router.CloseIdleConnections()
	s.ui.Close()
	return err
}

// EndStreams ends the dashboard's live streams, which never end by
// themselves: call it when a graceful shutdown starts (for example with
// http.Server.RegisterOnShutdown), so that the shutdown waits only for
// the proxied requests in flight.
func (s *Server) EndStreams() { s.ui.Close() }

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.httpError

	for _, prefix := range []string{"/v1", "/w/:workspace/:project/v1"} {
		e.POST(prefix+"/chat/completions", s.rewritten(s.chat))
		e.POST(prefix+"/responses", s.rewritten(s.responses))
		e.POST(prefix+"/messages", s.rewritten(s.messages))
		e.GET(prefix+"/models", s.models)
		e.Any(prefix+"/*", s.passThrough)
	}

	e.GET("/", s.root)
	e.HEAD("/", s.root)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})))

	a := e.Group("/scar/v1", s.adminAuth)
	a.POST("/incidents", s.postIncident)
	a.GET("/incidents", s.listIncidents)
	a.DELETE("/incidents", s.deleteIncidents)
	a.GET("/guard", s.getGuard)
	a.GET("/patterns", s.listPatterns)
	a.POST("/solutions", s.postSolution)
	a.GET("/solutions", s.listSolutions)
	a.DELETE("/solutions", s.deleteSolutions)
	a.DELETE("/solutions/:id", s.deleteSolution)
	a.GET("/recall", s.recallPreview)
	a.POST("/fixes", s.postFix)
	a.GET("/fixes", s.listFixes)
	a.DELETE("/fixes", s.deleteFixes)
	a.DELETE("/fixes/:id", s.deleteFix)

	// The dashboard checks its own sessions (proxy/ui, dashboard.go).
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/") })
	e.Any("/ui/*", echo.WrapHandler(s.ui))

	// MCP (streamable HTTP); the handler checks the memory API's credentials.
	e.Any("/mcp", s.serveMCP)
	e.Any("/w/:workspace/:project/mcp", s.serveMCP)
	return e
}

// httpError answers Echo's own errors (404, 405) in OpenAI's shape.
func (s *Server) httpError(err error, c echo.Context) {
	var he *echo.HTTPError
	status, msg := http.StatusInternalServerError, "internal error"
	if errors.As(err, &he) {
		status = he.Code
		msg = fmt.Sprint(he.Message)
	} else {
		s.log.Error("request failed", "path", c.Path(), "err", err)
	}
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "api_error"
	}
	_ = s.writeError(c, &apiError{Status: status, Message: msg, Type: typ, Code: http.StatusText(status)})
}

// rootText answers GET and HEAD / : what this is and where the API lives.
// Clients such as Claude Code probe the root before their first request.
const rootText = `scarproxy: a reverse proxy for LLM APIs that remembers failures and solutions.
APIs: POST /v1/chat/completions (OpenAI Chat), POST /v1/responses (OpenAI Responses),
POST /v1/messages (Anthropic Messages); every other /v1/* path is passed through.
Per project: /w/{workspace}/{project}/v1/...  Memory: /scar/v1/...  MCP: /mcp  Health: /healthz, /readyz.
`

func (s *Server) root(c echo.Context) error {
	return c.String(http.StatusOK, rootText)
}

// readyz checks the store and the recall index within StoreTimeout in all.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.opts.StoreTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": "store unavailable: " + err.Error()})
	}
	if err := s.syncIndexWithin(ctx); err != nil {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": "recall index not loaded: " + err.Error()})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// seenSet remembers tool results already processed per tenant, so a
// history re-sent every turn is classified and stored once. It is bounded:
// when the current generation is full it becomes the previous one. A
// result is known by a 64-bit hash (seeded per process) of its tenant and
// dedupe key: the set holds no pointers for the garbage collector to
// trace, about 10 bytes a result.
type seenSet struct {
	seed      maphash.Seed
	mu        sync.Mutex
	max       int
	cur, prev map[uint64]bool // key -> the tool failed
}

func newSeenSet(max int) *seenSet {
	return &seenSet{seed: maphash.MakeSeed(), max: max, cur: make(map[uint64]bool)}
}

// key names the tool result with the given dedupe key in a conversation
// of a tenant.
func (s *seenSet) key(workspace, project, conversation, dedupeKey string) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(workspace)
	h.WriteByte(0)
	h.WriteString(project)
	h.WriteByte(0)
	h.WriteString(conversation)
	h.WriteByte(0)
	h.WriteString(dedupeKey)
	return h.Sum64()
}

// get reports whether k was seen and whether that tool result failed.
func (s *seenSet) get(k uint64) (failed, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if failed, ok = s.cur[k]; ok {
		return failed, true
	}
	failed, ok = s.prev[k]
	return failed, ok
}

func (s *seenSet) add(k uint64, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cur) >= s.max {
		s.prev, s.cur = s.cur, make(map[uint64]bool, s.max)
	}
	s.cur[k] = failed
}
