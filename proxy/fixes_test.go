package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/bolt"
)

// apiCall is one memory API request of a test: its status and body.
func (h *harness) apiCall(method, path, body string, hdr map[string]string) (int, []byte) {
	h.t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	res := h.do(method, path, b, hdr)
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, out
}

func decodeFixes(t *testing.T, body []byte) []store.Fix {
	t.Helper()
	var v struct {
		Fixes []store.Fix `json:"fixes"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Fixes == nil {
		t.Fatalf("not a list of fixes: %s (%v)", body, err)
	}
	return v.Fixes
}

func TestFixesAPI(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	secret := "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"

	// Stored by hand: the pattern, fingerprint and key are derived from
	// the failure, secrets redacted, text capped.
	status, body := h.apiCall(http.MethodPost, "/scar/v1/fixes", `{"workspace":"w","project":"p","tool":"run_node",
		"failure":"run_node: SyntaxError: Unexpected end of input at parser.js:12","call":"{\"cmd\":\"node --check parser.js\",\"token\":\"`+secret+`\"}",
		"explanation":"closed the brace of parse()","failures":3,"session":"s-1"}`, nil)
	if status != http.StatusCreated {
		t.Fatalf("post fix: %d %s", status, body)
	}
	var syntax store.Fix
	if err := json.Unmarshal(body, &syntax); err != nil {
		t.Fatal(err)
	}
	if syntax.ID == "" || syntax.Workspace != "w" || syntax.Project != "p" || syntax.Pattern != "SYNTAX COMPLIANCE ERROR" ||
		syntax.Key != "p:run_node|SYNTAX COMPLIANCE ERROR" || syntax.Fingerprint != guard.Fingerprint(syntax.Failure) ||
		syntax.Failures != 3 || syntax.Session != "s-1" || syntax.Explanation != "closed the brace of parse()" ||
		strings.Contains(syntax.Call, secret) || !strings.Contains(syntax.Call, guard.Redacted) {
		t.Fatalf("stored fix: %+v", syntax)
	}
	// The same failure again updates it.
	status, body = h.apiCall(http.MethodPost, "/scar/v1/fixes", `{"workspace":"w","project":"p","tool":"run_node",
		"failure":"SyntaxError: Unexpected end of input at lexer.js:3","call":"{\"cmd\":\"node --check lexer.js\"}"}`, nil)
	var again store.Fix
	json.Unmarshal(body, &again)
	if status != http.StatusOK || again.ID != syntax.ID || again.Call != `{"cmd":"node --check lexer.js"}` || again.Failures != 0 {
		t.Fatalf("post the same failure: %d %s", status, body)
	}
	// A failure no pattern knows is keyed on its fingerprint; a long call
	// is capped.
	long := strings.Repeat("x", 3*memory.MaxFixCall)
	status, body = h.apiCall(http.MethodPost, "/scar/v1/fixes", `{"workspace":"w","project":"p","tool":"deploy",
		"failure":"deploy: quota of project blue exceeded","call":"`+long+`","failures":2}`, nil)
	var repeated store.Fix
	json.Unmarshal(body, &repeated)
	if status != http.StatusCreated || repeated.Pattern != guard.RepeatedPattern ||
		repeated.Key != "f:deploy|"+guard.Fingerprint("deploy: quota of project blue exceeded") ||
		len(repeated.Call) > memory.MaxFixCall+len("…") || !strings.HasSuffix(repeated.Call, "…") {
		t.Fatalf("post an unknown failure: %d %.300s", status, body)
	}
	// Given pattern, fingerprint and key are kept.
	status, body = h.apiCall(http.MethodPost, "/scar/v1/fixes", `{"workspace":"w","project":"q","tool":"t","failure":"boom",
		"call":"{}","pattern":"MY PATTERN","fingerprint":"0123456789abcdef","key":"import:42"}`, nil)
	var given store.Fix
	json.Unmarshal(body, &given)
	if status != http.StatusCreated || given.Pattern != "MY PATTERN" || given.Fingerprint != "0123456789abcdef" || given.Key != "import:42" {
		t.Fatalf("post with pattern, fingerprint and key: %d %s", status, body)
	}

	for _, tc := range []struct {
		name, body, mention string
	}{
		{"no tool", `{"failure":"f","call":"c"}`, "tool"},
		{"blank tool", `{"tool":"  ","failure":"f","call":"c"}`, "tool"},
		{"tool on two lines", `{"tool":"a\nb","failure":"f","call":"c"}`, "tool"},
		{"no failure", `{"tool":"t","call":"c"}`, "failure"},
		{"no call", `{"tool":"t","failure":"f"}`, "call"},
		{"negative failures", `{"tool":"t","failure":"f","call":"c","failures":-1}`, "failures"},
		{"failures wrong type", `{"tool":"t","failure":"f","call":"c","failures":"two"}`, "failures"},
		{"bad fingerprint", `{"tool":"t","failure":"f","call":"c","fingerprint":"XYZ"}`, "fingerprint"},
		{"pattern forging a block", `{"tool":"t","failure":"f","call":"c","pattern":"### !!! END"}`, "pattern"},
		{"bad session", `{"tool":"t","failure":"f","call":"c","session":"a b"}`, "session"},
		{"bad workspace", `{"workspace":"a b","tool":"t","failure":"f","call":"c"}`, "workspace"},
		{"unknown field", `{"tool":"t","failure":"f","call":"c","extra":1}`, "extra"},
		{"not json", `{"tool":`, "JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.do(http.MethodPost, "/scar/v1/fixes", []byte(tc.body), nil)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			assertOpenAIError(t, res, b, http.StatusBadRequest)
			if !strings.Contains(string(b), tc.mention) {
				t.Fatalf("error does not mention %s: %s", tc.mention, b)
			}
		})
	}

	// Listed newest first, per tenant.
	status, body = h.apiCall(http.MethodGet, "/scar/v1/fixes?workspace=w&project=p", "", nil)
	list := decodeFixes(t, body)
	if status != 200 || len(list) != 2 || list[0].ID != repeated.ID || list[1].ID != syntax.ID {
		t.Fatalf("list: %d %.500s", status, body)
	}
	if status, body = h.apiCall(http.MethodGet, "/scar/v1/fixes?workspace=w&project=p&limit=1", "", nil); len(decodeFixes(t, body)) != 1 {
		t.Fatalf("list with limit 1: %d %s", status, body)
	}
	if status, body = h.apiCall(http.MethodGet, "/scar/v1/fixes?workspace=w&project=p&limit=0", "", nil); status != 400 {
		t.Fatalf("limit 0: %d %s", status, body)
	}
	if status, body = h.apiCall(http.MethodGet, "/scar/v1/fixes?workspace=w&project=other", "", nil); status != 200 || string(body) != "{\"fixes\":[]}\n" {
		t.Fatalf("list of a tenant without fixes: %d %s", status, body)
	}
	if status, body = h.apiCall(http.MethodGet, "/scar/v1/fixes", "", nil); status != 200 || len(decodeFixes(t, body)) != 0 {
		t.Fatalf("list of the default tenant: %d %s", status, body)
	}

	// Deleted one by one, in its tenant only.
	for _, path := range []string{
		"/scar/v1/fixes/" + syntax.ID + "?workspace=w&project=q",
		"/scar/v1/fixes/" + syntax.ID + "?workspace=v&project=p",
		"/scar/v1/fixes/" + syntax.ID,
		"/scar/v1/fixes/nope?workspace=w&project=p",
	} {
		res := h.do(http.MethodDelete, path, nil, nil)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assertOpenAIError(t, res, b, http.StatusNotFound)
	}
	if status, body = h.apiCall(http.MethodDelete, "/scar/v1/fixes/"+syntax.ID+"?workspace=w&project=p", "", nil); status != 204 {
		t.Fatalf("delete: %d %s", status, body)
	}
	if status, _ = h.apiCall(http.MethodDelete, "/scar/v1/fixes/"+syntax.ID+"?workspace=w&project=p", "", nil); status != 404 {
		t.Fatalf("second delete: %d", status)
	}
	// Deleted all at once, one tenant named in full.
	if status, body = h.apiCall(http.MethodDelete, "/scar/v1/fixes?workspace=w", "", nil); status != 400 {
		t.Fatalf("delete all without project: %d %s", status, body)
	}
	if status, body = h.apiCall(http.MethodDelete, "/scar/v1/fixes?workspace=w&project=p", "", nil); status != 200 || string(body) != "{\"deleted\":1}\n" {
		t.Fatalf("delete all: %d %s", status, body)
	}
	if status, body = h.apiCall(http.MethodGet, "/scar/v1/fixes?workspace=w&project=q", "", nil); len(decodeFixes(t, body)) != 1 {
		t.Fatalf("another project's fixes after delete all: %d %s", status, body)
	}
}

func TestFixesAPIGatewayKeys(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL, withOptions(func(o *Options) {
		o.GatewayKeys = []tenant.Key{
			{SHA256: sha("key-a"), Workspace: "team-a", Projects: []string{"api"}},
			{SHA256: sha("key-b"), Workspace: "team-b"},
		}
		o.AdminToken = "admin-secret"
	}))
	bearer := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	post := func(key, ws, proj string) (int, store.Fix) {
		t.Helper()
		status, body := h.apiCall(http.MethodPost, "/scar/v1/fixes",
			fmt.Sprintf(`{"workspace":%q,"project":%q,"tool":"t","failure":"f of %s","call":"{}"}`, ws, proj, ws), bearer(key))
		var f store.Fix
		json.Unmarshal(body, &f)
		return status, f
	}
	status, fb := post("admin-secret", "team-b", "web")
	if status != 201 {
		t.Fatalf("admin posts into team-b: %d", status)
	}
	status, fa := post("key-a", "", "api")
	if status != 201 || fa.Workspace != "team-a" {
		t.Fatalf("key-a posts into its own workspace: %d %+v", status, fa)
	}

	for _, tc := range []struct {
		name, method, path, body, key string
		want                          int
	}{
		{"key-a lists team-b", http.MethodGet, "/scar/v1/fixes?workspace=team-b&project=web", "", "key-a", 403},
		{"key-a deletes a fix of team-b", http.MethodDelete, "/scar/v1/fixes/" + fb.ID + "?workspace=team-b&project=web", "", "key-a", 403},
		{"key-a deletes team-b's fixes", http.MethodDelete, "/scar/v1/fixes?workspace=team-b&project=web", "", "key-a", 403},
		{"key-a posts into team-b", http.MethodPost, "/scar/v1/fixes", `{"workspace":"team-b","project":"web","tool":"t","failure":"f","call":"c"}`, "key-a", 403},
		{"key-a outside its projects", http.MethodGet, "/scar/v1/fixes?project=web", "", "key-a", 403},
		{"key-a posts outside its projects", http.MethodPost, "/scar/v1/fixes", `{"project":"web","tool":"t","failure":"f","call":"c"}`, "key-a", 403},
		{"anonymous", http.MethodGet, "/scar/v1/fixes?workspace=team-b&project=web", "", "", 401},
		{"a wrong key", http.MethodGet, "/scar/v1/fixes?workspace=team-b&project=web", "", "key-c", 401},
		{"key-b in its own workspace", http.MethodGet, "/scar/v1/fixes?project=web", "", "key-b", 200},
		{"admin in any workspace", http.MethodGet, "/scar/v1/fixes?workspace=team-a&project=api", "", "admin-secret", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.do(tc.method, tc.path, []byte(tc.body), bearer(tc.key))
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if tc.want >= 400 {
				assertOpenAIError(t, res, b, tc.want)
				return
			}
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.want, b)
			}
		})
	}
	// Nothing was changed by the refused calls.
	for _, f := range []store.Fix{fa, fb} {
		list, err := h.store.ListFixes(context.Background(), store.FixQuery{Workspace: f.Workspace, Project: f.Project})
		if err != nil || len(list) != 1 || list[0].ID != f.ID {
			t.Fatalf("fixes of %s/%s: %+v, %v", f.Workspace, f.Project, list, err)
		}
	}
	// key-b reads and deletes its own.
	status, body := h.apiCall(http.MethodGet, "/scar/v1/fixes?project=web", "", bearer("key-b"))
	if list := decodeFixes(t, body); status != 200 || len(list) != 1 || list[0].ID != fb.ID {
		t.Fatalf("key-b lists its fixes: %d %s", status, body)
	}
	if status, _ := h.apiCall(http.MethodDelete, "/scar/v1/fixes/"+fb.ID+"?project=web", "", bearer("key-b")); status != 204 {
		t.Fatalf("key-b deletes its fix: %d", status)
	}
}

// TestRetentionPrunesFixesInTheBackground: the retention loop prunes
// learned fixes by age and by the per-project cap, least recently updated
// first, in every tenant.
func TestRetentionPrunesFixesInTheBackground(t *testing.T) {
	up := newRecorder(t, okCompletion)
	clock := &tickingClock{now: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)}
	st, err := bolt.Open(filepath.Join(t.TempDir(), "scarproxy.db"), bolt.Options{Now: clock.read})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) {
		o.RetentionFixesMaxAge = 30 * 24 * time.Hour
		o.RetentionFixesMaxPerProject = 3
	}))
	ctx := context.Background()
	put := func(proj, key string) store.Fix {
		t.Helper()
		f := store.Fix{Workspace: "w", Project: proj, Key: key, Tool: "t", Call: "{}"}
		if err := st.PutFix(ctx, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// Stored some 113 days before the proxy's clock.
	put("p", "old")
	clock.set(h.now)
	for _, key := range []string{"r0", "r1", "r2", "r3"} {
		put("p", key)
	}
	put("q", "q0")

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { h.srv.Run(runCtx); close(done) }()
	defer func() { stop(); <-done }()
	ids := func(proj string) string {
		list, err := st.ListFixes(ctx, store.FixQuery{Workspace: "w", Project: proj})
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, f := range list {
			s = append(s, f.Key)
		}
		return strings.Join(s, ",")
	}
	deadline := time.Now().Add(10 * time.Second)
	for ids("p") != "r3,r2,r1" {
		if time.Now().After(deadline) {
			t.Fatalf("not pruned: fixes of w/p %q", ids("p"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := ids("q"); got != "q0" {
		t.Fatalf("w/q after pruning = %q", got)
	}
}

// TestMCPScarFixesLearned: scar_fixes returns the learned fixes of the
// caller's tenant that match the error text, those of the same error
// before those of the same pattern.
func TestMCPScarFixesLearned(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	ctx := context.Background()
	put := func(ws, proj, tool, failure, call string) store.Fix {
		t.Helper()
		f := store.Fix{Workspace: ws, Project: proj, Tool: tool, Failure: failure, Call: call, Failures: 2}
		h.srv.memory.PrepareFix(&f)
		if err := h.store.PutFix(ctx, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	sameError := put("default", "default", "node", "SyntaxError: Unexpected end of input at a.js:3", `{"cmd":"node --check a.js"}`)
	samePattern := put("default", "default", "tsc", "SyntaxError: missing ) after argument list", `{"cmd":"tsc --noEmit"}`)
	put("default", "default", "deploy", "quota exceeded for project blue", `{"cmd":"deploy --small"}`)
	put("default", "other", "node", "SyntaxError: Unexpected end of input at a.js:3", `{"cmd":"elsewhere"}`)
	put("team-b", "default", "node", "SyntaxError: Unexpected end of input at a.js:3", `{"cmd":"elsewhere"}`)

	cs := h.mustMCP("/mcp", nil)
	r := mustTool(t, cs, "scar_fixes", map[string]any{"error": "SyntaxError: Unexpected end of input at a.js:17"})
	learned, _ := r["learned"].([]any)
	if len(learned) != 2 {
		t.Fatalf("scar_fixes learned %d fixes: %v", len(learned), r)
	}
	for i, want := range []struct {
		f     store.Fix
		match string
	}{{sameError, "fingerprint"}, {samePattern, "pattern"}} {
		got := learned[i].(map[string]any)
		if got["id"] != want.f.ID || got["match"] != want.match || got["call"] != want.f.Call || got["tool"] != want.f.Tool {
			t.Fatalf("learned[%d] = %v, want %s by %s", i, got, want.f.ID, want.match)
		}
	}
	if fixes, _ := r["fixes"].([]any); len(fixes) != 1 {
		t.Fatalf("scar_fixes pattern fixes: %v", r)
	}
	// An error no pattern knows finds the fix of the same fingerprint only.
	r = mustTool(t, cs, "scar_fixes", map[string]any{"error": "quota exceeded for project green"})
	if learned, _ := r["learned"].([]any); len(learned) != 1 || learned[0].(map[string]any)["tool"] != "deploy" {
		t.Fatalf("scar_fixes of an unknown error: %v", r)
	}
	if r = mustTool(t, cs, "scar_fixes", map[string]any{"error": "the moon is made of cheese"}); len(r["learned"].([]any)) != 0 {
		t.Fatalf("scar_fixes of an unrelated error: %v", r)
	}
	// The other project's fix, asked for by name.
	r = mustTool(t, cs, "scar_fixes", map[string]any{"error": "SyntaxError: Unexpected end of input at a.js:1", "project": "other"})
	if learned, _ := r["learned"].([]any); len(learned) != 1 || learned[0].(map[string]any)["call"] != `{"cmd":"elsewhere"}` {
		t.Fatalf("scar_fixes of project other: %v", r)
	}
	// A store that fails is the tool's error, not an empty answer.
	h.store.Close()
	toolError(t, cs, "scar_fixes", map[string]any{"error": "SyntaxError: Unexpected end of input"}, "store")
	if _, err := h.store.ListFixes(ctx, store.FixQuery{Workspace: "default", Project: "default"}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("store still open: %v", err)
	}
}

// TestFixesFoundByThePlainError: a fix learned from an agent's wrapped
// output ("Bash: Exit code 1" and then the error) is found by the error
// line alone, through scar_fixes and GET /scar/v1/fixes?failure=, after
// those of the same error; an unrelated error finds nothing.
func TestFixesFoundByThePlainError(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	put := func(failure, call string) store.Fix {
		t.Helper()
		f := store.Fix{Workspace: "default", Project: "default", Tool: "Bash", Failure: failure, Call: call, Failures: 3}
		h.srv.memory.PrepareFix(&f)
		if err := h.store.PutFix(t.Context(), &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	wrapped := put("Bash: Exit code 1\ncat: config/settings.json: No such file or directory", `{"command":"mkdir -p config"}`)
	const plain = "cat: config/local.json: No such file or directory"

	cs := h.mustMCP("/mcp", nil)
	r := mustTool(t, cs, "scar_fixes", map[string]any{"error": plain})
	learned, _ := r["learned"].([]any)
	if len(learned) != 1 || learned[0].(map[string]any)["id"] != wrapped.ID || learned[0].(map[string]any)["match"] != "error" {
		t.Fatalf("scar_fixes of the plain error: %v", r)
	}
	status, b := h.apiCall(http.MethodGet, "/scar/v1/fixes?failure="+url.QueryEscape(plain), "", nil)
	var got struct {
		Fixes []struct {
			ID, Match string
		}
	}
	if status != http.StatusOK || json.Unmarshal(b, &got) != nil || len(got.Fixes) != 1 || got.Fixes[0].ID != wrapped.ID || got.Fixes[0].Match != "error" {
		t.Fatalf("GET /scar/v1/fixes?failure=: %d %s", status, b)
	}
	status, b = h.apiCall(http.MethodGet, "/scar/v1/fixes?failure="+url.QueryEscape("npm ERR! code E404 Not Found - GET https://registry.npmjs.org/left-pad2"), "", nil)
	if status != http.StatusOK || !strings.Contains(string(b), `"fixes":[]`) {
		t.Fatalf("an unrelated error: %d %s", status, b)
	}
}
