// Package ui is scarproxy's dashboard, served under /ui/: what a tenant's
// agents keep failing at, what the proxy told them, and what they learned.
//
// # What it owns
//
// The pages (server-rendered html/template, embedded with go:embed with
// their CSS and the one small script of the live view), the charts
// (inline SVG drawn on the server, each with a table of its numbers), the
// login and its session cookie, and the CSRF check of every form that
// changes something. It reads and changes memory only through [Source],
// which the proxy implements with the store, the guard, the recall index
// and the memory API's tenancy rules; every figure on a page comes from
// the store's aggregates (store.Store.IncidentGroups) or one page of
// incidents (store.Store.SearchIncidents), never from reading every
// incident.
//
// # Access
//
// With neither an admin token nor gateway keys configured (an open
// loopback proxy) every page is open, like the memory API. Otherwise the
// login form takes the admin token (every workspace) or a gateway key
// (its own workspace, and projects, only). The session cookie is
// HttpOnly, SameSite=Strict, Path=/ui and signed (HMAC-SHA256); it holds
// no token, only who logged in (the admin, or the SHA-256 of a key, which
// the configuration already holds) and when it expires, and it is checked
// against the configuration again on every request. Every form that
// changes something carries a CSRF token derived from the session, and is
// refused when its Origin is another site's. Every answer says
// Cache-Control: no-store.
//
// # Imports
//
// The standard library, and plain values of guard, recall and store. It
// must not import Echo, bbolt, pgx, nor the proxy package (the proxy
// imports it).
package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// Principal is who uses the dashboard.
type Principal struct {
	// Admin is true for the admin token and for an open dashboard: every
	// workspace.
	Admin bool
	// KeySHA256 names the gateway key of a principal that is not Admin
	// (hex SHA-256 of the key).
	KeySHA256 string
	// Workspace is a gateway key's workspace ("" for Admin).
	Workspace string
}

// Errors a [Source] returns. Match them with errors.Is.
var (
	// ErrForbidden is returned when the principal may not use the
	// workspace or project asked for.
	ErrForbidden = errors.New("ui: forbidden")
	// ErrBadInput is returned for a name or a record that is not valid;
	// the error's text says why and may be shown.
	ErrBadInput = errors.New("ui: bad input")
	// ErrNotFound is returned when the record asked for does not exist.
	ErrNotFound = errors.New("ui: not found")
)

// Group is an incident group of the store with the pattern its sample
// message is classified as.
type Group struct {
	store.IncidentGroup
	// Pattern is the guard's label for the group, or guard.RepeatedPattern
	// when no pattern matches it.
	Pattern string
}

// Turn is one failure of a conversation and the guard the conversation's
// next request got once it was recorded.
type Turn struct {
	Incident store.Incident
	Pattern  string
	// Guard is the guard block of the conversation's next request, as
	// the request path builds it ("" when it got none).
	Guard string
}

// Source is the memory the dashboard reads and changes. The proxy
// implements it. Methods taking a Principal check that it may use the
// workspace (and project) named, and return ErrForbidden otherwise;
// ErrBadInput, ErrNotFound, or a store error otherwise.
type Source interface {
	// Open reports whether the proxy has neither an admin token nor
	// gateway keys: then everyone is an admin.
	Open() bool
	// Login returns the principal a token gives: the admin token or a
	// gateway key.
	Login(token string) (Principal, bool)
	// Refresh returns a principal from a session as the configuration
	// says now (a key's workspace), or false when it no longer exists.
	Refresh(p Principal) (Principal, bool)
	// Tenant resolves the workspace and project of a page for p: the ones
	// asked, else the defaults (a key's workspace is its own).
	Tenant(p Principal, workspace, project string) (ws, proj string, err error)

	// Tenants returns the tenants holding records that p may use, the
	// most recently changed first (a workspace's solutions: Project "").
	Tenants(ctx context.Context, p Principal) ([]store.TenantRef, error)

	// Groups counts the tenant's incidents in [since, until) in groups,
	// each classified.
	Groups(ctx context.Context, workspace, project string, since, until time.Time) ([]Group, error)
	// Incidents returns a page of the tenant's incidents, each with its
	// pattern.
	Incidents(ctx context.Context, f store.IncidentFilter) (store.IncidentPage, []string, error)
	// Conversation returns the failures of one conversation, oldest first,
	// with the guard after each.
	Conversation(ctx context.Context, workspace, project, session string) ([]Turn, error)
	// GuardPreview returns the exact text of the blocks the next request
	// of the tenant (in conversation, "" for none) would get.
	GuardPreview(ctx context.Context, workspace, project, conversation string) (string, error)
	// Conversations returns the labels the tenant holds among ids (the
	// first words of each conversation's task, its agent, its start).
	Conversations(ctx context.Context, workspace, project string, ids []string) (map[string]store.Conversation, error)
	// Version changes whenever the tenant's incidents change.
	Version(ctx context.Context, workspace, project string) (int64, error)

	// Solutions lists the solutions of the workspace p may see.
	Solutions(ctx context.Context, p Principal, workspace string) ([]store.Solution, error)
	// SearchSolutions ranks the workspace's solutions against goal with
	// the recall scorer, best first, near misses included.
	SearchSolutions(ctx context.Context, p Principal, workspace, project, goal string) ([]recall.Match, float64, error)
	// SaveSolution stores a solution given by a person: a new one (empty
	// ID) or an edit of the one with that ID. It is verified.
	SaveSolution(ctx context.Context, p Principal, s store.Solution) (store.Solution, error)
	// VerifySolution marks a solution verified.
	VerifySolution(ctx context.Context, p Principal, workspace, id string) error
	// DeleteSolution removes a solution.
	DeleteSolution(ctx context.Context, p Principal, workspace, id string) error
	// MarkSolution marks a solution wrong, with a note, or (wrong false)
	// clears its mark: a marked solution is kept and never recalled.
	MarkSolution(ctx context.Context, p Principal, workspace, id string, wrong bool, note string) error

	// Usage returns the tenant's token usage records that q selects (its
	// Workspace and Project are the page's).
	Usage(ctx context.Context, q store.UsageQuery) ([]store.Usage, error)

	// Fixes lists the tenant's learned fixes, most recently updated first.
	Fixes(ctx context.Context, workspace, project string) ([]store.Fix, error)
	// DeleteFix removes a learned fix.
	DeleteFix(ctx context.Context, workspace, project, id string) error
	// MarkFix marks a learned fix wrong, with a note, or (wrong false)
	// clears its mark: a marked fix is kept and never shown to an agent.
	MarkFix(ctx context.Context, workspace, project, id string, wrong bool, note string) error
}

// Options configure a [Handler].
type Options struct {
	// Source is required.
	Source Source
	// Secret signs the session cookies: every replica behind one load
	// balancer needs the same one. Nil means a random secret per
	// process (a login then holds on the replica that made it).
	Secret []byte
	// Logger receives the dashboard's logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// LivePoll is how often the live view asks the store whether the
	// tenant's incidents changed. Default 1s.
	LivePoll time.Duration
	// SessionTTL is how long a login lasts. Default 12h.
	SessionTTL time.Duration
}

//go:embed templates/*.html static/*
var files embed.FS

// Handler serves the dashboard. Mount it at /ui/.
type Handler struct {
	opts   Options
	src    Source
	log    *slog.Logger
	secret []byte
	pages  map[string]*template.Template
	static http.Handler
	mux    *http.ServeMux
	done   chan struct{} // closed by Close: live streams end
	closed sync.Once
	logins loginLimiter // wrong logins per client address
}

// New builds the dashboard handler.
func New(opts Options) (*Handler, error) {
	if opts.Source == nil {
		return nil, errors.New("ui: Source is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LivePoll <= 0 {
		opts.LivePoll = time.Second
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	h := &Handler{opts: opts, src: opts.Source, log: opts.Logger, done: make(chan struct{})}
	if len(opts.Secret) > 0 {
		m := hmac.New(sha256.New, []byte("scarproxy ui session"))
		m.Write(opts.Secret)
		h.secret = m.Sum(nil)
	} else {
		h.secret = make([]byte, 32)
		_, _ = rand.Read(h.secret)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	h.pages = pages
	sub, err := fs.Sub(files, "static")
	if err != nil {
		return nil, err
	}
	h.static = http.StripPrefix("/ui/static/", http.FileServerFS(sub))
	h.mux = h.routes()
	return h, nil
}

// Close ends the live streams, so that a graceful shutdown does not wait
// for them. Pages are still served.
func (h *Handler) Close() {
	h.closed.Do(func() { close(h.done) })
}

// ServeHTTP serves a request under /ui/.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.mux.ServeHTTP(w, r)
}

// The session cookie.
const (
	cookieName = "scar_ui"
	csrfField  = "csrf"
)

// session is a logged-in (or open) user.
type session struct {
	p       Principal
	expires time.Time
	raw     string // the cookie's value
}

// csrf returns the CSRF token of the session.
func (h *Handler) csrf(s *session) string {
	m := hmac.New(sha256.New, h.secret)
	m.Write([]byte("csrf\x00" + s.raw))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sign makes the cookie value of p until expires:
// base64(kind|subject|expires|nonce) "." base64(HMAC).
func (h *Handler) sign(p Principal, expires time.Time) string {
	kind, subject := "a", ""
	if !p.Admin {
		kind, subject = "k", p.KeySHA256
	}
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	payload := kind + "|" + subject + "|" + strconv.FormatInt(expires.Unix(), 10) + "|" + hex.EncodeToString(nonce)
	m := hmac.New(sha256.New, h.secret)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// verify reads a cookie value made by sign, or returns false.
func (h *Handler) verify(v string) (*session, bool) {
	b64, mac, ok := strings.Cut(v, ".")
	if !ok {
		return nil, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(b64)
	sum, err2 := base64.RawURLEncoding.DecodeString(mac)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	m := hmac.New(sha256.New, h.secret)
	m.Write(payload)
	if subtle.ConstantTimeCompare(m.Sum(nil), sum) != 1 {
		return nil, false
	}
	parts := strings.Split(string(payload), "|")
	if len(parts) != 4 {
		return nil, false
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil || !h.opts.Now().Before(time.Unix(exp, 0)) {
		return nil, false
	}
	var p Principal
	switch parts[0] {
	case "a":
		p.Admin = true
	case "k":
		p.KeySHA256 = parts[1]
	default:
		return nil, false
	}
	return &session{p: p, expires: time.Unix(exp, 0), raw: v}, true
}

// sessionOf returns the request's session: from its cookie, checked
// against the configuration, or, on an open dashboard, a new one (set as
// a cookie on w so that its forms carry a CSRF token).
func (h *Handler) sessionOf(w http.ResponseWriter, r *http.Request) (*session, bool) {
	if c, err := r.Cookie(cookieName); err == nil {
		if s, ok := h.verify(c.Value); ok {
			if h.src.Open() {
				if s.p.Admin {
					return s, true
				}
			} else if p, ok := h.src.Refresh(s.p); ok {
				s.p = p
				return s, true
			}
		}
	}
	if h.src.Open() {
		return h.startSession(w, r, Principal{Admin: true}), true
	}
	return nil, false
}

// startSession sets a new session cookie for p and returns the session.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, p Principal) *session {
	exp := h.opts.Now().Add(h.opts.SessionTTL)
	v := h.sign(p, exp)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: v, Path: "/ui", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: int(h.opts.SessionTTL / time.Second), Secure: r.TLS != nil})
	return &session{p: p, expires: exp, raw: v}
}

// checkForm checks a state-changing request: its CSRF token, and its
// Origin when the browser sent one.
func (h *Handler) checkForm(r *http.Request, s *session) bool {
	if !fromThisSite(r) {
		return false
	}
	got := r.PostFormValue(csrfField)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(h.csrf(s))) == 1
}
