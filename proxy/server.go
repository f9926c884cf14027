// Package proxy is scarproxy's HTTP server: the routes, the request
// pipeline of the rewritten routes (prepare → forward → finish, in
// pipeline.go), pass-through, the one error writer and the metrics
// registry. It only wires the packages that do the work:
//
//   - proxy/chat, proxy/responses, proxy/messages, proxy/gemini: one
//     [wire.Format] per API (read a request, place blocks, observe the
//     answer, shape errors);
//   - proxy/tenant: whose memory a request uses (paths, headers, keys);
//   - proxy/body: bounded request bodies and their buffers;
//   - proxy/memory: the replica's memory, which decides each request's
//     blocks ([memory.Memory.Decide]) and records what it observes;
//   - proxy/upstream: provider chains, fallbacks, timeouts, delivering;
//   - proxy/memoryapi: the memory REST API under /scar/v1, MCP at /mcp
//     and the dashboard's data;
//   - proxy/ui: the dashboard's pages under /ui/.
//
// # Request path
//
// POST /v1/chat/completions, /v1/responses, /v1/messages and the Gemini
// API's /v1beta/models/{model}:generateContent and :streamGenerateContent
// (/v1/ too) go through one pipeline: prepare resolves the tenant, reads
// the body in its wire format, asks the memory for the request's blocks
// and places them; forward sends the body to the providers that serve the
// format's API for its model; finish delivers the answer and observes it
// as it streams through. Every other /v1/* and /v1beta/* request passes
// through untouched.
//
// # Failing open
//
// When the store fails the request is still forwarded, unchanged, with the
// header X-Scar-Degraded: store.
//
// # Logs, traces and reloads
//
// Every request has an id (requestid.go), in its answer and in each line
// it logs; each proxied request makes one access line (access.go) and,
// with a tracer provider, its spans (trace.go). [Server.Reload] gives a
// running server new providers, tenancy, guard and recall.
//
// # Imports
//
// Only this package, proxy/memoryapi and cmd import Echo. It must not
// import bbolt or pgx.
package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/body"
	"github.com/scarproxy/scarproxy/proxy/chat"
	"github.com/scarproxy/scarproxy/proxy/gemini"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/memoryapi"
	"github.com/scarproxy/scarproxy/proxy/messages"
	"github.com/scarproxy/scarproxy/proxy/responses"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/ui"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a [Server]. Router, Store and Guard are required.
type Options struct {
	Router *providers.Router
	// Store, Guard, Recall, Logger, Now, StoreTimeout, GuardReadLimit,
	// IndexPoll and the Retention settings configure the memory.
	memory.Options
	// DefaultWorkspace, DefaultProject, GatewayKeys and AdminToken configure
	// tenancy.
	tenant.Config
	// MaxBodyBytes bounds request bodies; larger ones get 413. Default
	// body.DefaultMaxBytes.
	MaxBodyBytes int64
	// MaxBodyBytesInFlight bounds the bytes of request bodies held at
	// once, across requests; a request whose body would pass it gets 503
	// with Retry-After. Default body.DefaultMaxBytesInFlight.
	MaxBodyBytesInFlight int64
	// Version is the version the MCP server reports. Default "dev".
	Version string
	// CloseOpenMemory makes the memory API, MCP and the dashboard answer
	// 403, saying what to configure, while they would be open to anyone
	// who can reach the server (neither an admin token nor gateway keys;
	// see tenant.Policy.Open). Set it when the server listens on an
	// address other than loopback and an open memory is not meant. The
	// proxied APIs are served either way.
	CloseOpenMemory bool
	// TracerProvider receives a span per request of a rewritten route and
	// one per provider call (see trace.go); nil: no spans.
	TracerProvider trace.TracerProvider
}

// Server is the proxy. Build it with [New], serve [Server.Handler], run
// [Server.Run] for its background work, and [Server.Close] it.
type Server struct {
	opts    Options
	log     *slog.Logger
	router  atomic.Pointer[providers.Router] // replaced by Reload
	memory  *memory.Memory
	tenants *tenant.Policy // updated by Reload
	bodies  *body.Reader   // request bodies, bounded one by one and in all
	metrics *metrics
	// The wire formats of the rewritten routes; chat, responses and
	// messages remember conversations between turns, gemini the system
	// instructions it read lately.
	chat, responses, messages, gemini wire.Format
	formats                           map[string]wire.Format // by API name (providers.API*)
	echo                              *echo.Echo
	api                               *memoryapi.API // /scar/v1, /mcp and the dashboard's data
	ui                                *ui.Handler    // the dashboard under /ui/
	tracer                            trace.Tracer   // nil without Options.TracerProvider
}

// New builds a server. It loads the recall index from the store; a store
// that is down is not an error (the server starts, /readyz says why it is
// not ready, and the index loads when the store returns).
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Router == nil {
		return nil, errors.New("proxy: Router is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// Every line logged with a request's context says its id.
	opts.Logger = withRequestIDs(opts.Logger)
	tenants, err := tenant.New(opts.Config)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		tenants:   tenants,
		bodies:    body.NewReader(opts.MaxBodyBytes, opts.MaxBodyBytesInFlight),
		metrics:   newMetrics(),
		chat:      chat.New(),
		responses: responses.New(),
		messages:  messages.New(),
		gemini:    gemini.New(),
	}
	s.router.Store(opts.Router)
	if opts.TracerProvider != nil {
		s.tracer = opts.TracerProvider.Tracer(tracerName, trace.WithInstrumentationVersion(opts.Version))
	}
	s.formats = map[string]wire.Format{s.chat.Name(): s.chat, s.responses.Name(): s.responses, s.messages.Name(): s.messages, s.gemini.Name(): s.gemini}
	s.metrics.registerMemos(s.formats)
	if s.memory, err = memory.New(ctx, opts.Options, s.metrics.registry); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	s.api, err = memoryapi.New(memoryapi.Options{Memory: s.memory, Tenants: tenants, Bodies: s.bodies, WriteError: s.writeError,
		AdminToken: opts.AdminToken, FixesLimit: opts.RetentionFixesMaxPerProject, Version: opts.Version, Logger: s.log,
		Registerer: s.metrics.registry})
	if err != nil {
		return nil, err
	}
	if s.ui, err = s.api.Dashboard(); err != nil {
		return nil, err
	}
	s.echo = s.routes()
	return s, nil
}

// Handler returns the HTTP handler serving every route.
func (s *Server) Handler() http.Handler { return s.echo }

// providers returns the providers requests go to now.
func (s *Server) providers() *providers.Router { return s.router.Load() }

// placeInSystem reports whether the blocks go into the system text
// (guard.placement: system) rather than the newest turn.
func (s *Server) placeInSystem() bool {
	return s.memory.Guard().Config().Placement == guard.PlacementSystem
}

// Reload makes the settings of opts that a running server can take anew
// those of the requests that follow: the providers (Router), tenancy
// (the default workspace and project, the gateway keys), the guard and
// recall. It checks them all first: when one is invalid it changes
// nothing and says why. Requests under way finish with the settings they
// started with. Every other option (the store, the admin token, which
// signs the dashboard's sessions, limits, retention) is the server's for
// life: a change to it needs a new server.
func (s *Server) Reload(opts Options) error {
	if opts.Router == nil || opts.Guard == nil {
		return errors.New("proxy: Reload: Router and Guard are required")
	}
	rc := recall.DefaultConfig()
	if opts.Recall != nil {
		rc = *opts.Recall
	}
	if err := rc.Validate(); err != nil {
		return err
	}
	tc := opts.Config
	tc.AdminToken = s.opts.AdminToken
	if _, err := tenant.New(tc); err != nil {
		return err
	}
	if err := s.memory.Reconfigure(opts.Guard, rc); err != nil {
		return err
	}
	s.memory.SetEmbedder(opts.Embedder) // semantic recall: the reloaded provider and model
	if err := s.tenants.Update(tc); err != nil {
		return err // checked above: not reached
	}
	// The old providers' requests under way keep their connections.
	s.router.Swap(opts.Router).CloseIdleConnections()
	return nil
}

// Run does the server's background work until ctx ends (the memory's:
// following the store's solution change feed, and retention).
func (s *Server) Run(ctx context.Context) { s.memory.Run(ctx) }

// Shutdown stores what the memory's background writers hold, or stops
// when ctx ends (then what is left is lost). Call it once no request is
// in flight (after http.Server.Shutdown).
func (s *Server) Shutdown(ctx context.Context) error { return s.memory.Shutdown(ctx) }

// Close stores what the background writers hold (see [Server.Shutdown];
// here each write within StoreTimeout) unless Shutdown did, ends the
// dashboard's live streams and releases the providers' idle connections.
// The store belongs to the caller: close it after.
func (s *Server) Close() error {
	err := s.Shutdown(context.Background())
	s.providers().CloseIdleConnections()
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
	e.Use(requestID)

	for _, prefix := range []string{"/v1", "/w/:workspace/:project/v1"} {
		e.POST(prefix+"/chat/completions", s.pipeline(s.chat))
		e.POST(prefix+"/responses", s.pipeline(s.responses))
		e.POST(prefix+"/messages", s.pipeline(s.messages))
		e.GET(prefix+"/models", s.models)
		e.Any(prefix+"/*", s.passThrough)
	}
	// The Gemini API's paths name their version and the model.
	generate := s.pipeline(s.gemini)
	for _, prefix := range []string{"", "/w/:workspace/:project"} {
		for _, version := range []string{"/v1", "/v1beta"} {
			e.Any(prefix+version+"/models/:call", s.modelCall(generate))
		}
		e.Any(prefix+"/v1beta/*", s.passThrough)
	}

	for _, root := range []string{"/", "/w/:workspace/:project", "/w/:workspace/:project/"} {
		// Clients such as Claude Code probe their base URL, which may be
		// a tenant's root.
		e.GET(root, s.root)
		e.HEAD(root, s.root)
	}
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{})))

	s.api.Register(e, s.memoryGate)

	// The dashboard checks its own sessions (proxy/ui, proxy/memoryapi).
	e.GET("/ui", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/ui/") }, s.memoryGate)
	e.Any("/ui/*", echo.WrapHandler(s.ui), s.memoryGate)
	return e
}

// errMemoryClosed answers the memory API, MCP and the dashboard of a
// server that closes an open memory (Options.CloseOpenMemory).
var errMemoryClosed = &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "memory_closed",
	Message: "The memory API, MCP and the dashboard are closed: this proxy listens on an address other than loopback " +
		"and has neither an admin token nor gateway keys, so anyone who can reach it could read and delete every workspace's memory. " +
		"Set admin.token_env (and that variable) or gateway.keys in its configuration; or admin.open: true " +
		"(env SCARPROXY_ADMIN_OPEN=true) if an open memory is meant."}

// memoryGate answers 403 (errMemoryClosed) on the routes of the memory
// API, MCP and the dashboard while they are open to anyone and the server
// closes an open memory (Options.CloseOpenMemory). A reload that
// configures gateway keys opens them.
func (s *Server) memoryGate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opts.CloseOpenMemory && s.tenants.Open() {
			return s.writeError(c, errMemoryClosed)
		}
		return next(c)
	}
}

// modelCall serves /v1beta/models/{model} and /v1/models/{model}, with a
// method or without: a POST of the Gemini API's generateContent or
// streamGenerateContent goes to generate, the pipeline; everything else
// (countTokens, GET of a model, the OpenAI APIs' /v1/models/{model})
// passes through.
func (s *Server) modelCall(generate echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		api, path, aerr := target(r.Method, r.URL.EscapedPath(), c.Param("workspace") != "")
		if aerr == nil && api == providers.APIGemini && r.Method == http.MethodPost {
			if _, _, err := gemini.ParsePath(path); err == nil {
				return generate(c)
			}
		}
		return s.passThrough(c)
	}
}

// httpError answers Echo's own errors (404, 405) in the shape of the API
// of the path (see writeError).
func (s *Server) httpError(err error, c echo.Context) {
	var he *echo.HTTPError
	status, msg := http.StatusInternalServerError, "internal error"
	if errors.As(err, &he) {
		status = he.Code
		msg = fmt.Sprint(he.Message)
	} else {
		s.log.ErrorContext(c.Request().Context(), "request failed", "path", c.Path(), "err", err)
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
POST /v1/messages (Anthropic Messages), POST /v1beta/models/{model}:generateContent and
:streamGenerateContent (Gemini); every other /v1/* and /v1beta/* path is passed through.
Per project: /w/{workspace}/{project}/v1/...  Memory: /scar/v1/...  MCP: /mcp  Health: /healthz, /readyz.
`

func (s *Server) root(c echo.Context) error {
	return c.String(http.StatusOK, rootText)
}

// readyz checks the store and the recall index within StoreTimeout in all.
// The index follows the store's change feed, so a sync that fails or does
// not end in time is the store's doing, and the reason says so.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.memory.StoreTimeout())
	defer cancel()
	err := s.memory.Store().Ping(ctx)
	if err == nil {
		if err = s.memory.SyncIndexWithin(ctx); err != nil {
			err = cmp.Or(errors.Unwrap(err), err) // the store's error, not the index's
		}
	}
	if err != nil {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": storeUnavailable(err)})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// storeUnavailable is /readyz's reason for a store call that failed with
// err.
func storeUnavailable(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "store unavailable: no answer within store.request_timeout"
	}
	return "store unavailable: " + err.Error()
}

// ServeMCP runs the memory's MCP tools on transport t (such as
// &mcp.StdioTransport{}) until ctx ends or the client disconnects; see
// memoryapi.API.ServeMCP.
func (s *Server) ServeMCP(ctx context.Context, t mcp.Transport, workspace, project string) error {
	return s.api.ServeMCP(ctx, t, workspace, project)
}
