package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy"
	"github.com/scarproxy/scarproxy/proxy/logline"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/bolt"
	"github.com/scarproxy/scarproxy/store/postgres"
)

// commonFlags are the flags every command that touches the store takes.
type commonFlags struct {
	config, listen, data, logFormat string
	mock                            bool
}

func (f *commonFlags) register(fs *flag.FlagSet, serve bool) {
	fs.StringVar(&f.config, "config", "", "YAML configuration file (env SCARPROXY_CONFIG)")
	fs.StringVar(&f.data, "data", "", "data directory of the embedded store (env SCARPROXY_DATA; default ./data)")
	if serve {
		fs.StringVar(&f.listen, "listen", "", "address to listen on (env SCARPROXY_LISTEN; default 127.0.0.1:8080)")
		fs.BoolVar(&f.mock, "mock", false, "use the offline mock provider (env SCARPROXY_MOCK)")
		fs.StringVar(&f.logFormat, "log-format", "", "text or json (env SCARPROXY_LOG_FORMAT)")
	}
}

// load builds the configuration: Default, YAML, SCARPROXY_* env, flags, Validate.
func (f *commonFlags) load(fs *flag.FlagSet, getenv func(string) string) (Config, error) {
	cfg := Default()
	path := f.config
	if path == "" {
		path = getenv("SCARPROXY_CONFIG")
	}
	if path != "" {
		if err := cfg.loadFile(path); err != nil {
			return cfg, err
		}
	}
	if err := cfg.applyEnv(getenv); err != nil {
		return cfg, err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["listen"] {
		cfg.Listen = f.listen
	}
	if set["data"] {
		cfg.DataDir = f.data
	}
	if set["mock"] {
		cfg.Mock = f.mock
	}
	if set["log-format"] {
		cfg.Log.Format = f.logFormat
	}
	return cfg, nil
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	lvl, _ := parseLevel(cfg.Log.Level)
	// slog's text or JSON handler; the proxy writes its access lines
	// through the handler's WriteLine.
	return slog.New(logline.New(w, cfg.Log.Format == "json", &slog.HandlerOptions{Level: slog.Level(lvl)}))
}

// openStore opens the configured backend. A PostgreSQL server that is down
// is not an error; a malformed DSN is.
func openStore(ctx context.Context, cfg Config, log *slog.Logger) (store.Store, error) {
	switch cfg.Store.Driver {
	case "postgres":
		return postgres.Open(ctx, cfg.Store.DSN, postgres.Options{Logger: log, VersionMaxAge: cfg.Store.ReplicaDelay})
	default:
		return bolt.Open(filepath.Join(cfg.DataDir, "scarproxy.db"), bolt.Options{})
	}
}

func gatewayKeys(cfg Config, getenv func(string) string) ([]tenant.Key, error) {
	var out []tenant.Key
	for i, k := range cfg.Gateway.Keys {
		sum := strings.ToLower(strings.TrimSpace(k.KeySHA256))
		if k.KeyEnv != "" {
			v := getenv(k.KeyEnv)
			if v == "" {
				return nil, fmt.Errorf("gateway.keys[%d].key_env: %s is not set", i, k.KeyEnv)
			}
			s := sha256.Sum256([]byte(v))
			sum = hex.EncodeToString(s[:])
		}
		out = append(out, tenant.Key{SHA256: sum, Workspace: k.Workspace, Projects: k.Projects})
	}
	return out, nil
}

// buildServer wires the proxy from a validated configuration.
func buildServer(ctx context.Context, cfg Config, st store.Store, getenv func(string) string, log *slog.Logger) (*proxy.Server, error) {
	opts, err := serverOptions(cfg, st, getenv, log)
	if err != nil {
		return nil, err
	}
	return proxy.New(ctx, opts)
}

// serverOptions builds the proxy's options from a validated
// configuration: its providers, guard, keys and the rest.
func serverOptions(cfg Config, st store.Store, getenv func(string) string, log *slog.Logger) (proxy.Options, error) {
	router, err := providers.NewRouter(cfg.providerConfigs(), getenv)
	if err != nil {
		return proxy.Options{}, err
	}
	g, err := guard.New(cfg.Guard)
	if err != nil {
		return proxy.Options{}, err
	}
	keys, err := gatewayKeys(cfg, getenv)
	if err != nil {
		return proxy.Options{}, err
	}
	var adminToken string
	if cfg.Admin.TokenEnv != "" {
		adminToken = getenv(cfg.Admin.TokenEnv)
		if adminToken == "" {
			return proxy.Options{}, fmt.Errorf("admin.token_env: %s is not set", cfg.Admin.TokenEnv)
		}
	}
	rc := cfg.Recall
	embedder, err := recallEmbedder(router, rc.Embeddings, cfg.Mock)
	if err != nil {
		return proxy.Options{}, err
	}
	return proxy.Options{
		Router: router,
		Options: memory.Options{
			Store: st, Guard: g, Recall: &rc, Logger: log, Embedder: embedder,
			RetentionMaxAge: cfg.Retention.MaxAge, RetentionMaxPerTenant: cfg.Retention.MaxPerTenant,
			RetentionEvery: cfg.Retention.Every, StoreTimeout: cfg.Store.RequestTimeout,
			RetentionSolutionsMaxAge:          cfg.Retention.SolutionsMaxAge,
			RetentionSolutionsMaxPerWorkspace: cfg.Retention.SolutionsMaxPerWorkspace,
			RetentionFixesMaxAge:              cfg.Retention.FixesMaxAge,
			RetentionFixesMaxPerProject:       cfg.Retention.FixesMaxPerProject,
			Durability:                        memory.Durability(cfg.Store.Durability),
		},
		Config: tenant.Config{
			DefaultWorkspace: cfg.Tenant.DefaultWorkspace, DefaultProject: cfg.Tenant.DefaultProject,
			GatewayKeys: keys, AdminToken: adminToken,
		},
		MaxBodyBytes:         cfg.MaxBodyBytes,
		MaxBodyBytesInFlight: cfg.Server.MaxBodyBytesInFlight,
		Version:              moduleVersion(buildInfo),
		CloseOpenMemory:      cfg.closesOpenMemory(),
	}, nil
}

// recallEmbedder returns the embedder of semantic recall
// (recall.embeddings), built on the router's provider of that name (with
// mock on, the mock, which stands in for every provider); nil when it is
// off.
func recallEmbedder(router *providers.Router, c recall.EmbeddingsConfig, mock bool) (recall.Embedder, error) {
	if !c.Enabled() {
		return nil, nil
	}
	for _, p := range router.Providers() {
		if p.Name() == c.Provider || mock {
			e, err := providers.NewEmbedder(p, c.Model)
			if err != nil {
				return nil, fmt.Errorf("recall.embeddings.provider: %w", err)
			}
			return e, nil
		}
	}
	return nil, fmt.Errorf("recall.embeddings.provider: no provider named %q", c.Provider)
}

func newServeFlags() (*flag.FlagSet, *commonFlags) {
	fs := newFlagSet("serve")
	f := &commonFlags{}
	f.register(fs, true)
	return fs, f
}

func cmdServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs, f := newServeFlags()
	if err := fs.Parse(args); err != nil {
		return parseError(err, "serve", fs, stdout)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("serve: unexpected argument %q", fs.Arg(0))}
	}
	cfg, err := f.load(fs, getenv)
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	// The log's lines are written by a goroutine of their own, so that no
	// request waits for its access line to reach stderr.
	lw := newLogWriter(stderr)
	defer lw.Close()
	log := newLogger(cfg, lw)
	warnExposure(cfg, log)

	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer st.Close()
	tp, err := newTracerProvider(ctx, cfg.Tracing, moduleVersion(buildInfo))
	if err != nil {
		return err
	}
	if tp != nil {
		defer shutdownTracing(tp, cfg.ShutdownTimeout, log)
	}
	opts, err := serverOptions(cfg, st, getenv, log)
	if err != nil {
		return err
	}
	if tp != nil {
		opts.TracerProvider = tp
	}
	srv, err := proxy.New(ctx, opts)
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	hs := &http.Server{
		Handler:           bodyDeadlines(srv.Handler(), cfg.Server.ReadBodyTimeout, cfg.Server.ReadBodyIdleTimeout),
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	go srv.Run(bg)
	reloadOnHangup(bg, &reloader{load: func() (Config, error) { return f.load(fs, getenv) },
		getenv: getenv, srv: srv, st: st, log: log, started: cfg})

	names := make([]string, 0, len(cfg.providerConfigs()))
	for _, p := range cfg.providerConfigs() {
		names = append(names, p.Name+" ("+p.Type+")")
	}
	where := cfg.Store.Driver
	if where == "bolt" {
		where = "bolt " + filepath.Join(cfg.DataDir, "scarproxy.db")
	}
	fmt.Fprintf(stdout, "scarproxy listening on http://%s/v1 — providers: %s — store: %s\n",
		ln.Addr(), strings.Join(names, ", "), where)
	log.Info("listening", "addr", ln.Addr().String(), "store", cfg.Store.Driver, "providers", len(names))
	lw.Flush() // the start-up lines (a warning, say) are out before any request

	hs.RegisterOnShutdown(srv.EndStreams)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down; letting in-flight requests finish", "deadline", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("shutdown deadline passed; closing remaining connections", "err", err)
		hs.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// No request is in flight: store the incidents and captured solutions
	// still queued before the store closes.
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown deadline passed before the queued writes were stored", "err", err)
	}
	return nil
}

// bodyDeadlines bounds how long a request body may take to arrive: total
// from the handler's start (the end of the headers, which
// ReadHeaderTimeout bounds), and idle between two reads. Both are read
// deadlines on the connection (http.ResponseController), set before each
// read of the body and cleared once it is read to its end, so the answer,
// a stream may last many minutes, never runs into them. An idle deadline
// alone would let a client trickle one byte at a time for ever; a total
// one alone (http.Server.ReadTimeout, which also counts the headers) would
// keep a client that went silent for all of it, so it could not be both
// short for those and generous for a large upload on a slow link.
func bodyDeadlines(h http.Handler, total, idle time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			b := &deadlineBody{ReadCloser: r.Body, rc: http.NewResponseController(w), idle: idle, end: time.Now().Add(total)}
			// Also bounds the reading of a body the handler leaves unread,
			// which net/http does after it to reuse the connection.
			b.extend()
			r.Body = b
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody sets the read deadlines of bodyDeadlines around each Read.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	end  time.Time
	done bool // read to its end: deadlines cleared
}

func (b *deadlineBody) extend() {
	d := time.Now().Add(b.idle)
	if d.After(b.end) {
		d = b.end
	}
	_ = b.rc.SetReadDeadline(d) // an error means no connection to bound
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	b.extend()
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		// Cleared only at the end: after a failure (a deadline passed, the
		// client left) net/http may read on to drain the body, and that
		// must stay bounded.
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// warnExposure says at start-up, and after a reload, when the memory API,
// MCP and the dashboard are closed (403) or open to anyone beyond
// loopback, and what to set.
func warnExposure(cfg Config, log *slog.Logger) {
	switch {
	case !cfg.openMemory() || loopbackListen(cfg.Listen):
	case cfg.closesOpenMemory():
		log.Warn("the memory API (/scar/v1), MCP and the dashboard answer 403: this listen address is not loopback, and "+
			"neither admin.token_env nor gateway.keys is set; set one of them, or admin.open: true if an open memory is meant "+
			"(the proxied APIs are served)", "listen", cfg.Listen)
	default:
		log.Warn("the memory API (/scar/v1), MCP and the dashboard are open to anyone who can reach the listen address (admin.open)", "listen", cfg.Listen)
	}
}
