// Package memoryapi serves the memory to people and tools: the REST API
// under /scar/v1 (incidents, guard, patterns, solutions, recall, fixes,
// usage, workspaces), the same calls as MCP tools at /mcp, and the
// dashboard's data source (proxy/ui renders it). Every entry point checks
// credentials and tenancy the same way, through proxy/tenant: the admin
// token reaches every workspace, a gateway key its own, an open API
// (neither configured) anything.
//
// # Imports
//
// It imports Echo (its handlers), the MCP SDK, proxy/memory, proxy/tenant,
// proxy/body, proxy/wire, proxy/ui, guard, recall and store's types; never
// a store driver, and nothing of the proxied routes.
package memoryapi

import (
	"errors"
	"log/slog"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/scarproxy/scarproxy/proxy/body"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/ui"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// Options configure an [API]. Memory, Tenants, Bodies and WriteError are
// required.
type Options struct {
	Memory  *memory.Memory
	Tenants *tenant.Policy
	// Bodies reads the bodies of the API's requests (bounded as the
	// proxied routes' are).
	Bodies *body.Reader
	// WriteError answers an error in the shape the server answers every
	// error of its own in.
	WriteError func(echo.Context, *wire.Error) error
	// AdminToken signs the dashboard's sessions ("" : a random secret per
	// process).
	AdminToken string
	// FixesLimit caps the learned fixes scar_fixes reads per project (the
	// retention cap, retention.fixes_max_per_project); 0 means the store's
	// maximum.
	FixesLimit int
	// Version is the version the MCP server reports. Default "dev".
	Version string
	// Logger receives the API's logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the API's metrics; nil: none.
	Registerer prometheus.Registerer
}

// API is the memory API, its MCP tools and the dashboard's source.
type API struct {
	opts    Options
	log     *slog.Logger
	memory  *memory.Memory
	store   store.Store
	tenants *tenant.Policy
	// The MCP streamable HTTP transport, for an open memory and for one
	// that requires credentials (tenant.Policy.Open, which a reload may
	// change).
	mcpOpen, mcpClosed http.Handler
	mcpCalls           *prometheus.CounterVec
}

// New builds the API.
func New(opts Options) (*API, error) {
	if opts.Memory == nil || opts.Tenants == nil || opts.Bodies == nil || opts.WriteError == nil {
		return nil, errors.New("memoryapi: Memory, Tenants, Bodies and WriteError are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	a := &API{opts: opts, log: opts.Logger, memory: opts.Memory, store: opts.Memory.Store(), tenants: opts.Tenants,
		mcpCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_mcp_calls_total",
			Help: "MCP tool calls, by tool and outcome (ok, error).",
		}, []string{"tool", "outcome"})}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(a.mcpCalls)
	}
	a.mcpOpen, a.mcpClosed = a.mcpHTTPHandlers()
	return a, nil
}

// Register adds the API's routes to e: /scar/v1, and MCP at /mcp and
// /w/{workspace}/{project}/mcp, each behind the middleware mw first.
func (a *API) Register(e *echo.Echo, mw ...echo.MiddlewareFunc) {
	g := e.Group("/scar/v1", append(slices.Clip(mw), a.answerErrors, a.adminAuth)...)
	g.POST("/incidents", a.postIncident)
	g.GET("/incidents", a.listIncidents)
	g.DELETE("/incidents", a.deleteIncidents)
	g.GET("/guard", a.getGuard)
	g.GET("/patterns", a.listPatterns)
	g.POST("/solutions", a.postSolution)
	g.GET("/solutions", a.listSolutions)
	g.DELETE("/solutions", a.deleteSolutions)
	g.DELETE("/solutions/:id", a.deleteSolution)
	g.POST("/solutions/:id/wrong", a.markSolution)
	g.DELETE("/solutions/:id/wrong", a.markSolution)
	g.GET("/recall", a.recallPreview)
	g.POST("/fixes", a.postFix)
	g.GET("/fixes", a.listFixes)
	g.DELETE("/fixes", a.deleteFixes)
	g.DELETE("/fixes/:id", a.deleteFix)
	g.POST("/fixes/:id/wrong", a.markFix)
	g.DELETE("/fixes/:id/wrong", a.markFix)
	g.GET("/usage", a.listUsage)
	g.GET("/workspaces", a.listWorkspaces)

	// MCP (streamable HTTP); the handler checks the memory API's credentials.
	mcpMW := append(slices.Clip(mw), a.answerErrors)
	e.Any("/mcp", a.serveMCP, mcpMW...)
	e.Any("/w/:workspace/:project/mcp", a.serveMCP, mcpMW...)
}

// Dashboard returns the dashboard's handler, on the API as its source.
func (a *API) Dashboard() (*ui.Handler, error) {
	var secret []byte
	if a.opts.AdminToken != "" {
		secret = []byte(a.opts.AdminToken)
	}
	return ui.New(ui.Options{Source: dashSource{a}, Secret: secret, Logger: a.log, Now: a.memory.Now})
}

// answerErrors gives every handler of the API one shape: it returns a
// *wire.Error for what it refuses or fails, answered here in the server's
// error shape; any other error goes on to Echo's error handler.
func (a *API) answerErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if e, ok := err.(*wire.Error); ok && e != nil {
			return a.opts.WriteError(c, e)
		}
		return err
	}
}
