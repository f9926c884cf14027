package ui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/store"
)

// page is what every template gets.
type page struct {
	Title   string
	Nav     string // the active section
	CSRF    string
	Admin   bool // every workspace may be chosen
	Auth    bool // a login exists (not an open dashboard)
	WS      string
	Proj    string
	Tenant  template.URL // "workspace=...&project=..." for links
	Message string       // a notice at the top of the page
	Picker  picker       // the tenants the header offers
	Data    any
}

// picker is the header's choice of tenant: the workspaces and projects
// that hold records, which its inputs suggest, and a link to each.
type picker struct {
	Workspaces []string // every workspace listed, for the workspace input
	Projects   []string // the current workspace's projects, for the project input
	Tenants    []tenantLink
}

// tenantLink is one tenant of the picker.
type tenantLink struct {
	store.TenantRef
	URL     template.URL // its overview
	Current bool
}

// pickerOf builds the picker of a page of tenant (ws, proj) from the
// tenants p may use; the current tenant is always offered.
func pickerOf(refs []store.TenantRef, ws, proj string) picker {
	var pk picker
	seenWS := map[string]bool{}
	current := false
	for _, r := range refs {
		if !seenWS[r.Workspace] {
			seenWS[r.Workspace] = true
			pk.Workspaces = append(pk.Workspaces, r.Workspace)
		}
		if r.Workspace == ws && r.Project != "" {
			pk.Projects = append(pk.Projects, r.Project)
		}
		l := tenantLink{TenantRef: r, URL: template.URL("/ui/?workspace=" + url.QueryEscape(r.Workspace))}
		if r.Project != "" {
			l.URL += template.URL("&project=" + url.QueryEscape(r.Project))
		}
		l.Current = r.Workspace == ws && r.Project == proj
		current = current || l.Current
		pk.Tenants = append(pk.Tenants, l)
	}
	if !seenWS[ws] {
		pk.Workspaces = append(pk.Workspaces, ws)
	}
	if !current {
		pk.Projects = append(pk.Projects, proj)
	}
	slices.Sort(pk.Workspaces)
	slices.Sort(pk.Projects)
	pk.Projects = slices.Compact(pk.Projects)
	return pk
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"ago": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"short": func(s string, n int) string {
		return guard.Sanitize(guard.Redact(s), n)
	},
	"pct":   func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
	"num":   thousands,
	"p":     url.PathEscape,
	"rowOf": func(r incidentRow, t template.URL) rowView { return rowView{r, t} },
	"table": func(rows []incidentRow, t template.URL) tableView { return tableView{rows, t} },
	"rowsOf": func(incs []store.Incident, pats []string, labels map[string]store.Conversation, t template.URL) tableView {
		return tableView{rows(incs, pats, labels), t}
	},
	"convOf": func(id string, label store.Conversation, t template.URL) convView { return convView{id, label, t} },
	"solOf":  func(s store.Solution, csrf string, t template.URL) solView { return solView{s, csrf, t} },
}

// thousands writes n with a comma between each group of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// The data of the shared templates (partials.html, solutions.html).
type (
	rowView struct {
		incidentRow
		Tenant template.URL
	}
	tableView struct {
		Rows   []incidentRow
		Tenant template.URL
	}
	solView struct {
		S      store.Solution
		CSRF   string
		Tenant template.URL
	}
	// convView is a link to a conversation, named by its label when it
	// has one.
	convView struct {
		ID     string
		Label  store.Conversation // zero: none stored
		Tenant template.URL
	}
)

// parsePages parses every page with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := make(map[string]*template.Template)
	for _, n := range names {
		base := path.Base(n)
		if base == "layout.html" || base == "partials.html" {
			continue
		}
		t, err := template.New("").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/partials.html", n)
		if err != nil {
			return nil, fmt.Errorf("ui: parse %s: %w", base, err)
		}
		pages[strings.TrimSuffix(base, ".html")] = t
	}
	return pages, nil
}

// render writes a page with status.
func (h *Handler) render(w http.ResponseWriter, status int, name string, p *page) {
	var buf bytes.Buffer
	t := h.pages[name]
	if t == nil {
		h.log.Error("ui: no page", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		h.log.Error("ui: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage answers with an HTML error page.
func (h *Handler) errorPage(w http.ResponseWriter, status int, msg string, p *page) {
	if p == nil {
		p = &page{}
	}
	p.Title = http.StatusText(status)
	p.Data = struct {
		Status int
		Text   string
	}{status, msg}
	h.render(w, status, "error", p)
}

// fail answers a failed Source call.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, p *page, err error) {
	switch {
	case errors.Is(err, ErrForbidden):
		h.errorPage(w, http.StatusForbidden, "You do not have access to this workspace or project. "+strings.TrimPrefix(err.Error(), ErrForbidden.Error()+": "), p)
	case errors.Is(err, ErrBadInput):
		h.errorPage(w, http.StatusBadRequest, strings.TrimPrefix(err.Error(), ErrBadInput.Error()+": "), p)
	case errors.Is(err, ErrNotFound):
		h.errorPage(w, http.StatusNotFound, "Nothing here by that name: it may have been deleted or pruned.", p)
	case errors.Is(err, context.Canceled):
		// the client left
	default:
		h.log.Warn("ui: memory store failed", "path", r.URL.Path, "err", err)
		h.errorPage(w, http.StatusServiceUnavailable, "The memory store is unavailable; try again in a moment.", p)
	}
}

// handlerFunc is a page that needs a session and a tenant.
type handlerFunc func(w http.ResponseWriter, r *http.Request, s *session, p *page)

// page wraps a page handler: it checks the session (else sends the
// browser to the login form), resolves the tenant from the query, and
// fills the common page data.
func (h *Handler) page(nav string, fn handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.sessionOf(w, r)
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			h.errorPage(w, http.StatusUnauthorized, "Your session has ended. Log in again.", &page{})
			return
		}
		p := &page{Nav: nav, CSRF: h.csrf(s), Admin: s.p.Admin, Auth: !h.src.Open()}
		if r.Method == http.MethodPost {
			if err := r.ParseMultipartForm(8 << 20); err != nil && !errors.Is(err, http.ErrNotMultipart) {
				h.errorPage(w, http.StatusBadRequest, "The form could not be read.", p)
				return
			}
			if !h.checkForm(r, s) {
				h.errorPage(w, http.StatusForbidden, "This form has expired or came from another site. Reload the page and try again.", p)
				return
			}
		}
		ws, proj, err := h.src.Tenant(s.p, r.FormValue("workspace"), r.FormValue("project"))
		if err != nil {
			h.fail(w, r, p, err)
			return
		}
		p.WS, p.Proj = ws, proj
		p.Tenant = template.URL("workspace=" + url.QueryEscape(ws) + "&project=" + url.QueryEscape(proj))
		if r.Method == http.MethodGet {
			refs, err := h.src.Tenants(r.Context(), s.p)
			if err != nil && !errors.Is(err, context.Canceled) {
				h.log.Warn("ui: list tenants", "err", err) // the picker offers the current tenant alone
			}
			p.Picker = pickerOf(refs, ws, proj)
		}
		fn(w, r, s, p)
	}
}

// routes maps the dashboard's paths.
func (h *Handler) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.Handle("GET /ui/static/", h.static)
	m.HandleFunc("GET /ui/login", h.loginForm)
	m.HandleFunc("POST /ui/login", h.login)
	m.HandleFunc("POST /ui/logout", h.logout)
	m.HandleFunc("GET /ui/{$}", h.page("overview", h.overview))
	m.HandleFunc("GET /ui/incidents", h.page("incidents", h.incidents))
	m.HandleFunc("GET /ui/groups/{fp}", h.page("incidents", h.group))
	m.HandleFunc("GET /ui/conversations/{session}", h.page("incidents", h.conversation))
	m.HandleFunc("GET /ui/guard", h.page("guard", h.guardPreview))
	m.HandleFunc("GET /ui/solutions", h.page("solutions", h.solutions))
	m.HandleFunc("GET /ui/solutions/export", h.page("solutions", h.exportSolutions))
	m.HandleFunc("POST /ui/solutions/import", h.page("solutions", h.importSolutions))
	m.HandleFunc("GET /ui/solutions/{id}/edit", h.page("solutions", h.editSolution))
	m.HandleFunc("POST /ui/solutions/{id}", h.page("solutions", h.saveSolution))
	m.HandleFunc("POST /ui/solutions/{id}/verify", h.page("solutions", h.verifySolution))
	m.HandleFunc("POST /ui/solutions/{id}/delete", h.page("solutions", h.deleteSolution))
	m.HandleFunc("POST /ui/solutions/{id}/wrong", h.page("solutions", h.markSolution(true)))
	m.HandleFunc("POST /ui/solutions/{id}/right", h.page("solutions", h.markSolution(false)))
	m.HandleFunc("GET /ui/fixes", h.page("fixes", h.fixes))
	m.HandleFunc("POST /ui/fixes/{id}/delete", h.page("fixes", h.deleteFix))
	m.HandleFunc("POST /ui/fixes/{id}/wrong", h.page("fixes", h.markFix(true)))
	m.HandleFunc("POST /ui/fixes/{id}/right", h.page("fixes", h.markFix(false)))
	m.HandleFunc("GET /ui/usage", h.page("usage", h.usage))
	m.HandleFunc("GET /ui/live", h.page("live", h.live))
	m.HandleFunc("GET /ui/live/events", h.page("live", h.liveEvents))
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		h.errorPage(w, http.StatusNotFound, "There is no page at "+r.URL.Path+".", &page{})
	})
	return m
}

// loginForm shows the login form (or, on an open dashboard, the overview).
func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	if h.src.Open() {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	h.render(w, http.StatusOK, "login", &page{Title: "Log in", Data: loginData{Next: safeNext(r.FormValue("next"))}})
}

type loginData struct {
	Next  string
	Error string
}

// safeNext keeps a redirect target inside the dashboard.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

// login checks the token posted and starts a session. A login form
// cannot carry a session's CSRF token; SameSite=Strict and the Origin
// check keep other sites from posting it. Wrong tokens are logged and
// slowed per client address (see loginLimiter).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if !fromThisSite(r) {
		h.errorPage(w, http.StatusForbidden, "This form came from another site.", &page{})
		return
	}
	addr, now := clientAddr(r), h.opts.Now()
	if ok, wait, first := h.logins.allow(addr, now); !ok {
		if first {
			h.log.Warn("ui: dashboard logins refused for a while: too many wrong tokens", "addr", addr, "retry_after", wait.Round(time.Second))
		}
		w.Header().Set("Retry-After", retryAfter(wait))
		h.errorPage(w, http.StatusTooManyRequests, "Too many wrong tokens from your address. Wait a moment and try again.", &page{})
		return
	}
	next := safeNext(r.PostFormValue("next"))
	p, ok := h.src.Login(strings.TrimSpace(r.PostFormValue("token")))
	if !ok {
		left := h.logins.failed(addr, now)
		h.log.Warn("ui: dashboard login with a wrong token", "addr", addr, "attempts_left", left)
		h.render(w, http.StatusUnauthorized, "login", &page{Title: "Log in",
			Data: loginData{Next: next, Error: "That is neither the admin token nor a gateway key."}})
		return
	}
	h.startSession(w, r, p)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	s, ok := h.sessionOf(w, r)
	if ok && !h.checkForm(r, s) {
		h.errorPage(w, http.StatusForbidden, "This form has expired. Reload the page and try again.", &page{})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
