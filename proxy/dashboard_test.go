package proxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/store"
)

// uiClient is a browser-like client of the dashboard: a cookie jar, and
// redirects not followed unless asked.
type uiClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newUIClient(t *testing.T, h *harness) *uiClient {
	jar, _ := cookiejar.New(nil)
	return &uiClient{t: t, base: h.http.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// get fetches a page and returns its status, body and response.
func (u *uiClient) get(path string) (int, string, *http.Response) {
	u.t.Helper()
	res, err := u.c.Get(u.base + path)
	if err != nil {
		u.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res
}

// post submits a form (with Origin set like a browser's).
func (u *uiClient) post(path string, form url.Values, origin string) (int, string, *http.Response) {
	u.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := u.c.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of a page's forms.
func (u *uiClient) csrf(page string) string {
	u.t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		u.t.Fatalf("no CSRF token in page:\n%s", page)
	}
	return m[1]
}

func (u *uiClient) login(token string) int {
	u.t.Helper()
	status, _, _ := u.post("/ui/login", url.Values{"token": {token}, "next": {"/ui/"}}, "")
	return status
}

func keyedHarness(t *testing.T, opts ...harnessOpt) *harness {
	return newHarness(t, "http://127.0.0.1:9", append([]harnessOpt{withOptions(func(o *Options) {
		o.AdminToken = "admin-secret"
		o.GatewayKeys = []tenant.Key{
			{SHA256: sha("key-a"), Workspace: "team-a"},
			{SHA256: sha("key-b"), Workspace: "team-b"},
		}
	})}, opts...)...)
}

func TestDashboardAccess(t *testing.T) {
	h := keyedHarness(t)
	for _, ws := range []string{"team-a", "team-b"} {
		if err := h.store.AddIncident(context.Background(), &store.Incident{Time: h.now, Workspace: ws, Project: "default",
			Type: store.TypeToolError, Message: "SyntaxError in " + ws, Fingerprint: "fp-" + ws}); err != nil {
			t.Fatal(err)
		}
	}

	anon := newUIClient(t, h)
	status, _, res := anon.get("/ui/incidents?workspace=team-a")
	if status != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/ui/login?next=") {
		t.Fatalf("anonymous: %d %q", status, res.Header.Get("Location"))
	}
	if status, body, _ := anon.get("/ui/login"); status != 200 || !strings.Contains(body, `type="password"`) {
		t.Fatalf("login form: %d", status)
	}
	if status := anon.login("wrong"); status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", status)
	}
	if status, _, _ := anon.post("/ui/login", url.Values{"token": {"admin-secret"}}, "http://evil.example"); status != http.StatusForbidden {
		t.Fatalf("login posted from another site: %d", status)
	}

	admin := newUIClient(t, h)
	_, _, res = admin.post("/ui/login", url.Values{"token": {"admin-secret"}, "next": {"/ui/incidents"}}, "")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ui/incidents" {
		t.Fatalf("admin login: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	cookies := res.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}
	c := cookies[0]
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/ui" || strings.Contains(c.Value, "admin-secret") {
		t.Fatalf("session cookie: %+v", c)
	}
	for _, ws := range []string{"team-a", "team-b"} {
		status, body, res := admin.get("/ui/incidents?workspace=" + ws)
		if status != 200 || !strings.Contains(body, "SyntaxError in "+ws) || res.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("admin sees %s: %d %q", ws, status, res.Header.Get("Cache-Control"))
		}
	}

	keyA := newUIClient(t, h)
	if status := keyA.login("key-a"); status != http.StatusSeeOther {
		t.Fatalf("key login: %d", status)
	}
	status, body, _ := keyA.get("/ui/incidents")
	if status != 200 || !strings.Contains(body, "SyntaxError in team-a") || strings.Contains(body, "team-b") {
		t.Fatalf("key sees its own workspace: %d\n%s", status, body)
	}
	for _, path := range []string{"/ui/?workspace=team-b", "/ui/incidents?workspace=team-b", "/ui/solutions?workspace=team-b",
		"/ui/live/events?workspace=team-b", "/ui/guard?workspace=team-b", "/ui/solutions/export?workspace=team-b"} {
		status, body, res := keyA.get(path)
		if status != http.StatusForbidden || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") ||
			strings.Contains(body, "SyntaxError in team-b") || res.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("key A on %s: %d %q", path, status, res.Header.Get("Content-Type"))
		}
	}

	// A key's cookie edited to say "admin" is no session.
	u, _ := url.Parse(h.http.URL + "/ui/")
	keyCookie := keyA.c.Jar.Cookies(u)
	if len(keyCookie) != 1 {
		t.Fatalf("key cookies: %v", keyCookie)
	}
	payload, mac, _ := strings.Cut(keyCookie[0].Value, ".")
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || !strings.HasPrefix(string(raw), "k|") {
		t.Fatalf("cookie payload %q: %v", raw, err)
	}
	forgedValue := base64.RawURLEncoding.EncodeToString([]byte("a|"+strings.SplitN(string(raw), "|", 2)[1])) + "." + mac
	forged := newUIClient(t, h)
	forged.c.Jar.SetCookies(u, []*http.Cookie{{Name: "scar_ui", Value: forgedValue, Path: "/ui"}})
	if status, _, _ := forged.get("/ui/incidents?workspace=team-b"); status != http.StatusSeeOther {
		t.Fatalf("forged cookie: %d", status)
	}

	// Logging out needs the CSRF token and ends the session.
	_, page, _ := keyA.get("/ui/")
	if status, _, _ := keyA.post("/ui/logout", url.Values{"csrf": {keyA.csrf(page)}}, ""); status != http.StatusSeeOther {
		t.Fatalf("logout: %d", status)
	}
	if status, _, _ := keyA.get("/ui/"); status != http.StatusSeeOther {
		t.Fatalf("after logout: %d", status)
	}
}

func TestDashboardForms(t *testing.T) {
	h := keyedHarness(t)
	ctx := context.Background()
	for _, ws := range []string{"team-a", "team-b"} {
		sol := store.Solution{Workspace: ws, Key: "k", Goal: "parse a CSV file in " + ws, Approach: "encoding/csv", Outcome: "ok",
			Confidence: 0.8, Source: store.SourceAuto, Created: h.now, Updated: h.now}
		if err := h.store.PutSolution(ctx, &sol); err != nil {
			t.Fatal(err)
		}
	}
	idOf := func(ws string) string {
		sols, err := h.store.ListSolutions(ctx, ws)
		if err != nil || len(sols) != 1 {
			t.Fatalf("%s: %v %v", ws, sols, err)
		}
		return sols[0].ID
	}
	idA, idB := idOf("team-a"), idOf("team-b")

	u := newUIClient(t, h)
	u.login("key-a")
	_, page, _ := u.get("/ui/solutions")
	csrf := u.csrf(page)
	for _, tc := range []struct {
		name   string
		path   string
		form   url.Values
		origin string
		want   int
	}{
		{"no CSRF token", "/ui/solutions/" + idA + "/delete", url.Values{}, "", http.StatusForbidden},
		{"wrong CSRF token", "/ui/solutions/" + idA + "/delete", url.Values{"csrf": {"x" + csrf}}, "", http.StatusForbidden},
		{"another site", "/ui/solutions/" + idA + "/delete", url.Values{"csrf": {csrf}}, "http://evil.example", http.StatusForbidden},
		{"another workspace", "/ui/solutions/" + idB + "/delete", url.Values{"csrf": {csrf}, "workspace": {"team-b"}}, "", http.StatusForbidden},
		{"another workspace's id", "/ui/solutions/" + idB + "/delete", url.Values{"csrf": {csrf}}, "", http.StatusNotFound},
		{"verify", "/ui/solutions/" + idA + "/verify", url.Values{"csrf": {csrf}}, "", http.StatusSeeOther},
		{"bad confidence", "/ui/solutions/" + idA, url.Values{"csrf": {csrf}, "goal": {"g"}, "approach": {"a"}, "outcome": {"o"}, "confidence": {"lots"}}, "", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status, body, _ := u.post(tc.path, tc.form, tc.origin); status != tc.want {
				t.Fatalf("status %d, want %d\n%s", status, tc.want, body)
			}
		})
	}
	if sols, _ := h.store.ListSolutions(ctx, "team-b"); len(sols) != 1 {
		t.Fatalf("team-b's solution was touched: %v", sols)
	}
	if sol, err := h.store.GetSolution(ctx, "team-a", idA); err != nil || !sol.Verified {
		t.Fatalf("verify: %+v %v", sol, err)
	}

	// Edit: a new goal replaces the record; the API key (sk-...) is redacted.
	status, _, _ := u.post("/ui/solutions/"+idA, url.Values{"csrf": {csrf}, "goal": {"read a TSV file"},
		"approach": {"encoding/csv with Comma '\\t' and key sk-abcdefghijklmnopqrstuvwxyz0123"}, "outcome": {"ok"}, "confidence": {"90%"}}, "")
	if status != http.StatusSeeOther {
		t.Fatalf("edit: %d", status)
	}
	sols, _ := h.store.ListSolutions(ctx, "team-a")
	if len(sols) != 1 || sols[0].Goal != "read a TSV file" || sols[0].Confidence != 0.9 || strings.Contains(sols[0].Approach, "sk-abc") {
		t.Fatalf("after edit: %+v", sols)
	}

	// Search shows the recall scorer's score.
	_, page, _ = u.get("/ui/solutions?q=" + url.QueryEscape("read a TSV file"))
	if !strings.Contains(page, "100%") || !strings.Contains(page, "read a TSV file") {
		t.Fatalf("search:\n%s", page)
	}

	// Export, delete, import back.
	status, export, res := u.get("/ui/solutions/export")
	if status != 200 || !strings.Contains(res.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export: %d", status)
	}
	var ex struct{ Solutions []store.Solution }
	if err := json.Unmarshal([]byte(export), &ex); err != nil || len(ex.Solutions) != 1 {
		t.Fatalf("export: %v %s", err, export)
	}
	if status, _, _ := u.post("/ui/solutions/"+sols[0].ID+"/delete", url.Values{"csrf": {csrf}}, ""); status != http.StatusSeeOther {
		t.Fatalf("delete: %d", status)
	}
	if sols, _ := h.store.ListSolutions(ctx, "team-a"); len(sols) != 0 {
		t.Fatalf("not deleted: %v", sols)
	}
	status, _, res = u.post("/ui/solutions/import", url.Values{"csrf": {csrf}, "json": {export}}, "")
	if status != http.StatusSeeOther || !strings.Contains(res.Header.Get("Location"), "Imported+1") {
		t.Fatalf("import: %d %q", status, res.Header.Get("Location"))
	}
	if sols, _ := h.store.ListSolutions(ctx, "team-a"); len(sols) != 1 || sols[0].Goal != "read a TSV file" {
		t.Fatalf("imported: %v", sols)
	}
	if status, _, _ := u.post("/ui/solutions/import", url.Values{"csrf": {csrf}, "json": {"not json"}}, ""); status != http.StatusBadRequest {
		t.Fatalf("bad import: %d", status)
	}
}

// postIncident records an incident through the memory API.
func postIncident(t *testing.T, h *harness, body string) {
	t.Helper()
	res := h.do(http.MethodPost, "/scar/v1/incidents", []byte(body), nil)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("post incident: %d", res.StatusCode)
	}
}

func TestDashboardViews(t *testing.T) {
	h := newHarness(t, "http://127.0.0.1:9")
	for i := range 3 {
		postIncident(t, h, fmt.Sprintf(`{"type":"tool_error","session":"conv-1","message":"SyntaxError: Unexpected end of input at parser.js:%d:2"}`, 40+i))
	}
	postIncident(t, h, `{"type":"http_error","provider":"openai","model":"gpt-x","status_code":429,"message":"Rate limit reached"}`)
	postIncident(t, h, `{"type":"loop","session":"conv-1","code":"stop","message":"run_syntax_check called 4 times"}`)
	postIncident(t, h, `{"type":"tool_error","session":"conv-2","message":"curl failed: token sk-abcdefghijklmnopqrstuvwxyz0123 rejected"}`)

	u := newUIClient(t, h) // open dashboard: no login
	for _, tc := range []struct {
		name, path string
		want, not  []string
	}{
		{"overview", "/ui/", []string{"<svg", "<rect class=\"s0\"", "SYNTAX COMPLIANCE ERROR", "API RATE LIMIT TRIGGER", "<b>5</b> failures",
			"<b>1</b> loop signals", "429 ×1", "STOP block</th><td><a href=\"/ui/incidents?workspace=default&amp;project=default&amp;type=loop&amp;range=24h\">1<"}, nil},
		{"overview by day", "/ui/?range=7d", []string{"Each bar is one day", "<b>5</b> failures"}, nil},
		{"filter by type", "/ui/incidents?type=http_error", []string{"Rate limit reached"}, []string{"SyntaxError"}},
		{"filter by pattern", "/ui/incidents?pattern=" + url.QueryEscape("SYNTAX COMPLIANCE ERROR"), []string{"parser.js:42:2", "parser.js:40:2"}, []string{"Rate limit", "curl failed"}},
		{"filter by provider and model", "/ui/incidents?provider=openai&model=gpt-x", []string{"Rate limit reached"}, []string{"SyntaxError"}},
		{"filter by conversation", "/ui/incidents?session=conv-2", []string{"curl failed"}, []string{"SyntaxError"}},
		{"redacted", "/ui/incidents?session=conv-2", []string{"[REDACTED]"}, []string{"sk-abcdefghij"}},
		{"conversation", "/ui/conversations/conv-1", []string{"No guard yet: nothing repeated, and no learned fix applies.", "### !!! REPEAT FAILURE GUARD", "Failed 2 times", "Failed 3 times", "the next request opened with the STOP block"}, nil},
		{"guard preview", "/ui/guard?conversation=conv-1", []string{"<pre class=\"block\">### !!! REPEAT FAILURE GUARD", "SYNTAX COMPLIANCE ERROR (Failed 3 times)"}, nil},
		{"guard preview, no conversation", "/ui/guard", []string{"Nothing: the next request would be sent without a guard block"}, nil},
		{"fixes", "/ui/fixes", []string{"Learned fixes"}, nil},
		{"live", "/ui/live", []string{"/ui/static/live.js", "run_syntax_check called 4 times"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, res := u.get(tc.path)
			if status != 200 || res.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("%d %q", status, res.Header.Get("Cache-Control"))
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("missing %q", w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("has %q", n)
				}
			}
			if t.Failed() {
				t.Log(body)
			}
		})
	}

	// The conversation's guard after each failure is the one the request
	// path gives: the same text as GET /scar/v1/guard.
	res := h.do(http.MethodGet, "/scar/v1/guard?session=conv-1", nil, nil)
	var g struct {
		Block string `json:"block"`
	}
	json.NewDecoder(res.Body).Decode(&g)
	res.Body.Close()
	if _, body, _ := u.get("/ui/guard?conversation=conv-1"); !strings.Contains(body, strings.TrimSpace(htmlEscape(g.Block))) {
		t.Fatalf("preview differs from the memory API's block %q", g.Block)
	}

	// A fingerprint group: every occurrence and a sanitised example.
	_, body, _ := u.get("/ui/incidents?session=conv-1&type=tool_error")
	m := regexp.MustCompile(`/ui/groups/([0-9a-f]+)\?`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no group link:\n%s", body)
	}
	status, body, _ := u.get("/ui/groups/" + m[1])
	if status != 200 || strings.Count(body, "<tr id=\"inc-") != 3 || !strings.Contains(body, "3 failures") {
		t.Fatalf("group: %d\n%s", status, body)
	}
	for _, path := range []string{"/ui/groups/nope", "/ui/nope", "/ui/incidents?cursor=bogus", "/ui/conversations/" + url.PathEscape("bad name")} {
		status, body, res := u.get(path)
		if status < 400 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, "<h1>") {
			t.Fatalf("%s: %d %q", path, status, res.Header.Get("Content-Type"))
		}
	}
}

func TestDashboardFixes(t *testing.T) {
	h := keyedHarness(t)
	ctx := context.Background()
	for _, ws := range []string{"team-a", "team-b"} {
		f := store.Fix{Workspace: ws, Project: "default", Key: "p:run_syntax_check|SYNTAX COMPLIANCE ERROR", Pattern: "SYNTAX COMPLIANCE ERROR",
			Tool: "run_syntax_check", Failure: "SyntaxError in " + ws, Call: `{"file":"parser.js","fix":true}`, Failures: 3, Session: "conv-1"}
		if err := h.store.PutFix(ctx, &f); err != nil {
			t.Fatal(err)
		}
	}
	fixID := func(ws string) string {
		fx, err := h.store.ListFixes(ctx, store.FixQuery{Workspace: ws, Project: "default"})
		if err != nil || len(fx) != 1 {
			t.Fatalf("%s: %v %v", ws, fx, err)
		}
		return fx[0].ID
	}
	idA, idB := fixID("team-a"), fixID("team-b")
	u := newUIClient(t, h)
	u.login("key-a")
	status, page, _ := u.get("/ui/fixes")
	if status != 200 || !strings.Contains(page, "SyntaxError in team-a") || !strings.Contains(page, "run_syntax_check") ||
		strings.Contains(page, "team-b") || !strings.Contains(page, htmlEscape(`{"file":"parser.js","fix":true}`)) {
		t.Fatalf("fixes: %d\n%s", status, page)
	}
	csrf := u.csrf(page)
	if status, _, _ := u.post("/ui/fixes/"+idB+"/delete", url.Values{"csrf": {csrf}}, ""); status != http.StatusNotFound {
		t.Fatalf("another workspace's fix: %d", status)
	}
	if status, _, _ := u.post("/ui/fixes/"+idB+"/delete", url.Values{"csrf": {csrf}, "workspace": {"team-b"}}, ""); status != http.StatusForbidden {
		t.Fatalf("another workspace: %d", status)
	}
	if status, _, _ := u.post("/ui/fixes/"+idA+"/delete", url.Values{}, ""); status != http.StatusForbidden {
		t.Fatalf("no CSRF: %d", status)
	}
	if status, _, res := u.post("/ui/fixes/"+idA+"/delete", url.Values{"csrf": {csrf}}, ""); status != http.StatusSeeOther ||
		!strings.HasPrefix(res.Header.Get("Location"), "/ui/fixes?") {
		t.Fatalf("delete: %d", status)
	}
	if fx, _ := h.store.ListFixes(ctx, store.FixQuery{Workspace: "team-a", Project: "default"}); len(fx) != 0 {
		t.Fatalf("not deleted: %v", fx)
	}
	fixID("team-b")
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
}

func TestDashboardPaging(t *testing.T) {
	h := newHarness(t, "http://127.0.0.1:9")
	for i := range 120 {
		if err := h.store.AddIncident(context.Background(), &store.Incident{Time: h.now.Add(-time.Duration(i) * time.Second),
			Workspace: "default", Project: "default", Type: store.TypeToolError, Message: fmt.Sprintf("failure #%03d", i), Fingerprint: "fp"}); err != nil {
			t.Fatal(err)
		}
	}
	u := newUIClient(t, h)
	next := "/ui/incidents"
	var seen []int
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		status, body, _ := u.get(next)
		if status != 200 {
			t.Fatalf("%s: %d", next, status)
		}
		for _, m := range regexp.MustCompile(`failure #(\d+)`).FindAllStringSubmatch(body, -1) {
			n, _ := strconv.Atoi(m[1])
			seen = append(seen, n)
		}
		next = ""
		if m := regexp.MustCompile(`<a href="([^"]+)" rel="next">`).FindStringSubmatch(body); m != nil {
			next = strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != 120 {
		t.Fatalf("saw %d incidents", len(seen))
	}
	for i, n := range seen {
		if n != i {
			t.Fatalf("order: %v", seen)
		}
	}
}

func TestDashboardLive(t *testing.T) {
	h := newHarness(t, "http://127.0.0.1:9")
	u := newUIClient(t, h)
	status, page, _ := u.get("/ui/live")
	if status != 200 {
		t.Fatal(status)
	}
	m := regexp.MustCompile(`data-events="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no events URL:\n%s", page)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.base+strings.ReplaceAll(m[1], "&amp;", "&"), nil)
	res, err := u.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	rd := bufio.NewReader(res.Body)
	// readEvent returns the next event's name and data.
	readEvent := func() (string, string) {
		var name, data string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "" && name != "":
				return name, data
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data += line[len("data: "):] + "\n"
			}
		}
	}
	if name, _ := readEvent(); name != "ready" {
		t.Fatalf("first event %q", name)
	}
	postIncident(t, h, `{"type":"tool_error","session":"conv-9","message":"ENOENT: no such file parser.js"}`)
	name, data := readEvent()
	if name != "incident" || !strings.Contains(data, "ENOENT: no such file parser.js") || !strings.Contains(data, `<tr id="inc-`) {
		t.Fatalf("event %q: %s", name, data)
	}
	// Another tenant's incident never reaches this stream; the next one of
	// this tenant does.
	postIncident(t, h, `{"type":"tool_error","workspace":"other","message":"other tenant"}`)
	postIncident(t, h, `{"type":"tool_error","message":"second of this tenant"}`)
	name, data = readEvent()
	if name != "incident" || strings.Contains(data, "other tenant") || !strings.Contains(data, "second of this tenant") {
		t.Fatalf("event %q: %s", name, data)
	}
}
