package proxy

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/store"
)

// The dashboard in a real browser: headless Chromium, driven through the
// DevTools protocol by chromedp. SCARPROXY_TEST_CHROMIUM names the
// browser binary (.ci/run sets it); without it the test is skipped.
// With -screenshots it writes docs/screenshots/*.png, the README's
// pictures of each view.

var screenshots = flag.Bool("screenshots", false, "write the dashboard's screenshots to docs/screenshots")

func TestDashboardInBrowser(t *testing.T) {
	bin := os.Getenv("SCARPROXY_TEST_CHROMIUM")
	if bin == "" {
		t.Skip("SCARPROXY_TEST_CHROMIUM is not set")
	}
	// The store's clock stays an hour before the harness's: the fix the
	// seed stores was learned before the conversations it shows in.
	h := newHarnessOn(t, boltAt(t, harnessStart.Add(-time.Hour)), "http://127.0.0.1:9", withOptions(func(o *Options) {
		o.AdminToken = "admin-secret"
		o.GatewayKeys = []tenant.Key{{SHA256: sha("key-b"), Workspace: "team-b"}}
	}))
	usage := seedDashboard(t, h)

	// Chromium's helper processes may still write the profile as the
	// browser exits: remove it best effort, not with t.TempDir's check.
	profile, err := os.MkdirTemp("", "scarproxy-chromium-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) })
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	base := h.http.URL
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		if err := chromedp.Run(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		var s string
		run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
		return s
	}
	shot := func(name string) {
		t.Helper()
		if !*screenshots {
			return
		}
		var png []byte
		run("screenshot "+name, chromedp.FullScreenshot(&png, 100))
		dir := filepath.Join("..", "docs", "screenshots")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Log in: the dashboard sends an anonymous browser to its login form.
	run("open", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(`#token`, chromedp.ByQuery))
	shot("login")
	run("log in",
		chromedp.SendKeys(`#token`, "admin-secret", chromedp.ByQuery),
		chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`svg rect.s0`, chromedp.ByQuery))
	// The chart: one colour per pattern, and its numbers as a table.
	if got := text(`figcaption .legend`); !strings.Contains(got, "SYNTAX COMPLIANCE ERROR") || !strings.Contains(got, "API RATE LIMIT TRIGGER") {
		t.Fatalf("legend: %q", got)
	}
	shot("overview")

	// Filter the incidents by type.
	run("filter",
		chromedp.Navigate(base+"/ui/incidents"),
		chromedp.WaitVisible(`select[name=type]`, chromedp.ByQuery),
		chromedp.SetValue(`select[name=type]`, "http_error", chromedp.ByQuery),
		chromedp.Click(`form.filters button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitReady(`select[name=type] option[value=http_error][selected]`, chromedp.ByQuery))
	if got := text(`table.incidents tbody`); !strings.Contains(got, "Rate limit reached") || strings.Contains(got, "SyntaxError") {
		t.Fatalf("filtered by http_error: %q", got)
	}
	shot("incidents")

	// Open a conversation from the list: its failures and its guard.
	run("open conversation",
		chromedp.Navigate(base+"/ui/incidents?session=agent-run-1"),
		chromedp.Click(`table.incidents a[href^="/ui/conversations/agent-run-1"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`ol.turns`, chromedp.ByQuery))
	if got := text(`ol.turns`); !strings.Contains(got, "REPEAT FAILURE GUARD") || !strings.Contains(got, "Last time this was fixed by") {
		t.Fatalf("conversation: %q", got)
	}
	shot("conversation")

	run("group", chromedp.Click(`a[href^="/ui/incidents"]`, chromedp.ByQuery), chromedp.WaitVisible(`table.incidents`, chromedp.ByQuery),
		chromedp.Click(`table.incidents a[href^="/ui/groups/"]`, chromedp.ByQuery), chromedp.WaitVisible(`pre.example`, chromedp.ByQuery))
	shot("group")

	run("guard preview", chromedp.Navigate(base+"/ui/guard?conversation=agent-run-1"), chromedp.WaitVisible(`pre.block`, chromedp.ByQuery))
	if got := text(`pre.block`); !strings.HasPrefix(got, "### !!! REPEAT FAILURE GUARD") {
		t.Fatalf("guard preview: %q", got)
	}
	shot("guard")

	run("search solutions",
		chromedp.Navigate(base+"/ui/solutions"),
		chromedp.SendKeys(`input[name=q]`, "fetch a web page and list its links", chromedp.ByQuery),
		chromedp.Submit(`input[name=q]`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.scored`, chromedp.ByQuery)) // the list before it has no such line
	if got := text(`table.solutions`); !strings.Contains(got, "%") || !strings.Contains(got, "Download a web page") {
		t.Fatalf("search: %q", got)
	}
	shot("solutions")

	// Delete a solution.
	before, _ := h.store.ListSolutions(context.Background(), "default")
	run("delete solution",
		chromedp.Navigate(base+"/ui/solutions"),
		chromedp.Click(`table.solutions button.danger`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.notice`, chromedp.ByQuery))
	if got := text(`p.notice`); got != "Solution deleted." {
		t.Fatalf("notice: %q", got)
	}
	if after, _ := h.store.ListSolutions(context.Background(), "default"); len(after) != len(before)-1 {
		t.Fatalf("solutions: %d before, %d after", len(before), len(after))
	}

	run("fixes", chromedp.Navigate(base+"/ui/fixes"), chromedp.WaitVisible(`main h1`, chromedp.ByQuery))
	shot("fixes")

	// Usage: the prompt cache's hit ratio over time and per conversation,
	// each conversation a link to its page, which shows its own.
	run("usage", chromedp.Navigate(base+"/ui/usage"), chromedp.WaitVisible(`#conv-h`, chromedp.ByQuery))
	var in, read, answers int64
	for _, u := range usage {
		in, read = in+u.Input, read+u.CacheRead
		if u.Conversation == "agent-run-2" {
			answers += u.Requests
		}
	}
	pct := fmt.Sprintf("%d%%", (100*read+in/2)/in)
	if got := text(`section.cards`); !strings.Contains(got, pct+" cache hit ratio") {
		t.Fatalf("usage totals: %q, want the ratio %s", got, pct)
	}
	shot("usage")
	run("usage conversation",
		chromedp.Click(`a[href^="/ui/conversations/agent-run-2"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.cache meter`, chromedp.ByQuery))
	if got := text(`p.cache`); !strings.Contains(got, "Prompt cache:") || !strings.Contains(got, fmt.Sprintf("over %d answers", answers)) {
		t.Fatalf("conversation's cache: %q", got)
	}

	// Live: an incident recorded while the page is open appears in it.
	run("live", chromedp.Navigate(base+"/ui/live"), chromedp.WaitVisible(`body[data-live=on]`, chromedp.ByQuery))
	res := h.do(http.MethodPost, "/scar/v1/incidents", []byte(`{"type":"tool_error","session":"agent-run-2","message":"ENOENT: no such file or directory, open 'config.yml'"}`),
		map[string]string{"Authorization": "Bearer admin-secret"})
	var inc store.Incident
	json.NewDecoder(res.Body).Decode(&inc)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("post incident: %d", res.StatusCode)
	}
	run("live incident", chromedp.WaitVisible(`#inc-`+inc.ID, chromedp.ByID))
	if got := text(`#incident-rows tr:first-child`); !strings.Contains(got, "ENOENT") {
		t.Fatalf("first live row: %q", got)
	}
	shot("live")

	clickEveryLink(t, ctx, base)

	// A gateway key sees its own workspace and is refused another.
	run("log out", chromedp.Navigate(base+"/ui/"), chromedp.Click(`form.logout button`, chromedp.ByQuery), chromedp.WaitVisible(`#token`, chromedp.ByQuery))
	run("log in with a key",
		chromedp.SendKeys(`#token`, "key-b", chromedp.ByQuery),
		chromedp.Submit(`#token`, chromedp.ByQuery),
		chromedp.WaitVisible(`main h1 small`, chromedp.ByQuery))
	if got := text(`main h1 small`); got != "team-b / default" {
		t.Fatalf("key's overview: %q", got)
	}
	run("another workspace", chromedp.Navigate(base+"/ui/incidents?workspace=default"), chromedp.WaitVisible(`p.error`, chromedp.ByQuery))
	if got := text(`main h1`); !strings.HasPrefix(got, "403") {
		t.Fatalf("another workspace: %q", got)
	}
	if got := text(`main`); strings.Contains(got, "SyntaxError") {
		t.Fatalf("another workspace's incidents shown: %q", got)
	}
}

// sameOriginLinks is a script listing the links of a page a click
// follows to another page of the dashboard: same origin, not a download,
// not a fragment of the page itself.
const sameOriginLinks = `Array.from(document.querySelectorAll('a[href]')).filter(a =>
	a.origin === location.origin && !a.hasAttribute('download') && !(a.hash && a.pathname === location.pathname && a.search === location.search))`

// clickEveryLink opens every page of the dashboard's navigation and,
// from each, every page a link leads to, and so on: it clicks each link
// of each page reached (each target once, from the first page that links
// it), and every click answers 200.
func clickEveryLink(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	var pages []string
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/ui/"),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('header nav a')).map(a => a.href)`, &pages)); err != nil {
		t.Fatal(err)
	}
	if len(pages) < 7 {
		t.Fatalf("navigation: %q", pages)
	}
	open := func(what string, action chromedp.Action) {
		t.Helper()
		res, err := chromedp.RunResponse(ctx, action)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res == nil {
			t.Fatalf("%s: no answer", what)
		}
		if res.Status != http.StatusOK {
			t.Fatalf("%s: answered %d", what, res.Status)
		}
	}
	seen := map[string]bool{}
	for _, p := range pages {
		seen[p] = true
	}
	clicks := 0
	for len(pages) > 0 {
		page := pages[0]
		pages = pages[1:]
		open("open "+page, chromedp.Navigate(page))
		var links []string
		if err := chromedp.Run(ctx, chromedp.Evaluate(sameOriginLinks+`.map(a => a.href)`, &links)); err != nil {
			t.Fatal(err)
		}
		for i, link := range links {
			if seen[link] {
				continue
			}
			seen[link] = true
			pages = append(pages, link)
			if clicks > 0 {
				open("back to "+page, chromedp.Navigate(page))
			}
			open(fmt.Sprintf("click %s on %s", link, page), chromedp.Evaluate(fmt.Sprintf(`%s[%d].click()`, sameOriginLinks, i), nil))
			clicks++
		}
	}
	if clicks < 25 {
		t.Fatalf("only %d links clicked", clicks)
	}
	t.Logf("%d links clicked", clicks)
}

// seedDashboard records what an agent session and the demos leave: a
// conversation repeating a syntax error, rate limits, a loop, solutions,
// token usage (which it returns).
func seedDashboard(t *testing.T, h *harness) []store.Usage {
	t.Helper()
	post := func(path, body string) {
		t.Helper()
		res := h.do(http.MethodPost, path, []byte(body), map[string]string{"Authorization": "Bearer admin-secret"})
		res.Body.Close()
		if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
	}
	ctx := context.Background()
	// Earlier hours, straight into the store, so the chart has a shape.
	for i := range 40 {
		at := h.now.Add(-time.Duration(i%20+1) * time.Hour)
		msg := []string{"SyntaxError: Unexpected token } in parser.js:%d", "Error: 429 Too Many Requests (attempt %d)", "TypeError: cannot read properties of undefined (reading 'map') at render.js:%d", "ENOENT: no such file or directory, open 'fixtures/%d.json'"}[i%4]
		typ := []string{store.TypeToolError, store.TypeHTTPError, store.TypeToolError, store.TypeToolError}[i%4]
		status := []int{0, 429, 0, 0}[i%4]
		provider := []string{"", "openai", "", ""}[i%4]
		if err := h.store.AddIncident(ctx, &store.Incident{Time: at, Workspace: "default", Project: "default", Type: typ,
			StatusCode: status, Provider: provider, Model: "gpt-5", Session: fmt.Sprintf("agent-run-%d", 10+i%3),
			Message: fmt.Sprintf(msg, i), Fingerprint: fmt.Sprintf("seed%d", i%4)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		post("/scar/v1/incidents", fmt.Sprintf(`{"type":"tool_error","session":"agent-run-1","message":"run_syntax_check: SyntaxError: Unexpected end of input\n    at parser.js:%d:2"}`, 40+i*3))
	}
	// A conversation named by the proxy (c:…): its id holds a colon.
	post("/scar/v1/incidents", `{"type":"tool_error","session":"c:5f1d2e3a4b6c7d80","agent":"claude-code","message":"Bash: Exit code 1\nnpm ERR! missing script: lint"}`)
	post("/scar/v1/incidents", `{"type":"http_error","provider":"openai","model":"gpt-5","status_code":429,"message":"Rate limit reached for gpt-5"}`)
	post("/scar/v1/incidents", `{"type":"loop","session":"agent-run-1","code":"stop","message":"run_syntax_check({\"file\":\"parser.js\"}) called 4 times"}`)
	post("/scar/v1/incidents", `{"type":"loop","session":"agent-run-1","code":"broken","message":"run_syntax_check succeeded after the STOP block"}`)
	fix := store.Fix{Workspace: "default", Project: "default", Key: "p:run_syntax_check|SYNTAX COMPLIANCE ERROR",
		Pattern: "SYNTAX COMPLIANCE ERROR", Tool: "run_syntax_check", Failure: "SyntaxError: Unexpected end of input at parser.js:46:2",
		Call: `{"file":"parser.js","fix":"close the brace opened at line 12"}`, Explanation: "The config block was missing its closing brace.",
		Failures: 3, Session: "agent-run-1"}
	if err := h.store.PutFix(ctx, &fix); err != nil {
		t.Fatal(err)
	}
	// Token usage as a provider reports it: each run's first request
	// fills the prompt cache, the later ones read from it.
	var usage []store.Usage
	for i := range 30 {
		conv := fmt.Sprintf("agent-run-%d", 1+i%3)
		input := int64(18000 + 900*i)
		u := store.Usage{Workspace: "default", Project: "default", Conversation: conv, Provider: "anthropic", Model: "claude-sonnet-4-5",
			Hour: h.now.Add(-time.Duration(i%12) * time.Hour), Requests: 1, Input: input, Output: int64(120 + 7*i), CacheRead: input - 900}
		if i < 3 {
			u.CacheRead, u.CacheWrite = 0, input
		}
		usage = append(usage, u)
	}
	if err := h.store.AddUsage(ctx, usage); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		`{"goal":"Download a web page and extract all links from the HTML","approach":"http.Get the URL, parse with golang.org/x/net/html, walk <a href> nodes, resolve relative URLs","outcome":"Links extracted","confidence":0.9}`,
		`{"goal":"Fix the flaky TestServerShutdown test","approach":"Replaced time.Sleep with a channel closed by the handler","outcome":"Passed 1000 runs with -race","confidence":0.95}`,
		`{"goal":"Parse the YAML configuration file and reject unknown keys","approach":"yaml.v3 Decoder with KnownFields(true)","outcome":"Typos fail at start-up","confidence":0.85}`,
	} {
		post("/scar/v1/solutions", s)
	}
	return usage
}
