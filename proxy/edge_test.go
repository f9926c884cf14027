package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/store"
)

func TestPassThroughPaths(t *testing.T) {
	rec := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	h := newHarness(t, rec.srv.URL+"/api/v1")
	for _, tc := range []struct{ path, want string }{
		{"/w/v1/proj/v1/embeddings", "/api/v1/embeddings"},                         // a workspace named v1
		{"/w/team/v1/v1/embeddings", "/api/v1/embeddings"},                         // a project named v1
		{"/v1//files/abc", "/api/v1//files/abc"},                                   // an empty segment is kept
		{"/w/a/b/v1/files/x%2Fy", "/api/v1/files/x%2Fy"},                           // escapes are kept
		{"/v1/models/meta-llama%2FLlama-3", "/api/v1/models/meta-llama%2FLlama-3"}, // an encoded slash alone too
		{"/v1/files/file-1%2520x", "/api/v1/files/file-1%2520x"},                   // a literal "%" is fine
		{"/v1/files/x%25zz", "/api/v1/files/x%25zz"},                               // ...even when it is no escape
		{"/v1/files/...", "/api/v1/files/..."},                                     // not a dot segment
	} {
		res := h.do(http.MethodPost, tc.path, []byte(`{"input":"x"}`), nil)
		res.Body.Close()
		if got := rec.last(t).RawPath; got != tc.want {
			t.Errorf("%s: upstream path %q, want %q", tc.path, got, tc.want)
		}
	}
	n := rec.count()
	for _, p := range []string{
		"/v1/%2e%2e/%2E%2e/admin/keys", "/v1/files/%2e/x", "/v1/files/%2E%2E",
		"/v1/files/..%2F..%2Fadmin",       // one segment that decodes to ../../admin
		"/v1/files/%2e%2e%2fsecret",       // the same, all encoded
		"/v1/files/%2E%2E%2Fsecret",       // upper case
		"/w/a/b/v1/files/..%2F..%2Fadmin", // tenant form
		"/v1/files/x%2F..",                // a dot segment once an encoded slash separates
		"/v1/files/a%5Cb",                 // an encoded backslash: a slash to some servers
		"/v1/files/%252e%252e/admin",      // double-encoded: ".." to a server that decodes twice
		"/v1/files/%252e%252e%252fadmin",  // double-encoded slash too
		"/v1/files/%25252e%25252e",        // triple-encoded
		"/v1/files/..%5C..%5Cadmin",       // encoded backslashes
		"/v1/files/..%255C..%255Cadmin",   // double-encoded backslashes
		`/v1/files/..\..\admin`,           // raw backslashes
	} {
		// Sent as they are on the request line: the client must not
		// normalise them.
		req, _ := http.NewRequest(http.MethodGet, h.http.URL, nil)
		req.URL.Opaque = p
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		t.Run(p, func(t *testing.T) { assertOpenAIError(t, res, b, http.StatusBadRequest) })
	}
	if rec.count() != n {
		t.Fatalf("%d refused paths reached the provider", rec.count()-n)
	}
}

func TestGatewayKeyProjectAllowListOnSolutions(t *testing.T) {
	h := newHarness(t, "", withProviders(providerAt("up", "http://127.0.0.1:1")), withOptions(func(o *Options) {
		o.GatewayKeys = []tenant.Key{{SHA256: sha("key-a"), Workspace: "team-a", Projects: []string{"api"}}}
		o.AdminToken = "admin"
	}))
	status := func(method, path, body, key string) int {
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		res := h.do(method, path, b, map[string]string{"Authorization": "Bearer " + key})
		res.Body.Close()
		return res.StatusCode
	}
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/scar/v1/solutions", `{"project":"web","goal":"deploy web","approach":"a","outcome":"o","confidence":0.9}`, 403},
		{"POST", "/scar/v1/solutions", `{"goal":"deploy anything","approach":"a","outcome":"o","confidence":0.9}`, 403},
		{"POST", "/scar/v1/solutions", `{"project":"api","goal":"deploy api","approach":"a","outcome":"o","confidence":0.9}`, 201},
		{"GET", "/scar/v1/recall?project=web&goal=deploy+web", "", 403},
		{"GET", "/scar/v1/recall?project=api&goal=deploy+api", "", 200},
	} {
		if got := status(tc.method, tc.path, tc.body, "key-a"); got != tc.want {
			t.Errorf("%s %s %s: %d, want %d", tc.method, tc.path, tc.body, got, tc.want)
		}
	}
	// A solution of project web stored by the admin is invisible to the key.
	if s := status("POST", "/scar/v1/solutions", `{"workspace":"team-a","project":"web","goal":"deploy web","approach":"a","outcome":"o","confidence":0.9}`, "admin"); s != 201 {
		t.Fatalf("admin store: %d", s)
	}
	res := h.do("GET", "/scar/v1/solutions", nil, map[string]string{"Authorization": "Bearer key-a"})
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if strings.Contains(string(b), `"project":"web"`) || !strings.Contains(string(b), `"project":"api"`) {
		t.Fatalf("key lists: %s", b)
	}
	sols, _ := h.store.ListSolutions(context.Background(), "team-a")
	for _, s := range sols {
		if s.Project == "web" {
			if got := status("DELETE", "/scar/v1/solutions/"+s.ID, "", "key-a"); got != 403 {
				t.Fatalf("key deleted another project's solution: %d", got)
			}
		}
	}
}

// hangStore is a store whose incident reads block until their context ends.
type hangStore struct{ store.Store }

func (s hangStore) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

var _ store.Store = hangStore{}

func TestHungStoreFailsOpen(t *testing.T) {
	up := newRecorder(t, okCompletion)
	bolt := tempBolt(t)
	h := newHarnessOn(t, hangStore{bolt}, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = 50 * time.Millisecond }))
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	res, _ := h.chat(body, nil)
	if res.StatusCode != 200 || res.Header.Get(HeaderDegraded) != "store" || string(up.last(t).Body) != body {
		t.Fatalf("status %d degraded %q", res.StatusCode, res.Header.Get(HeaderDegraded))
	}
}

// pruneStore reports what each prune call receives.
type pruneStore struct {
	store.Store
	caps    chan int
	solArgs chan pruneArgs
	fixArgs chan pruneArgs
}

type pruneArgs struct {
	before time.Time
	max    int
}

func (s *pruneStore) PruneIncidents(ctx context.Context, before time.Time, maxPerTenant int) (int, error) {
	s.caps <- maxPerTenant
	return 0, nil
}

func (s *pruneStore) PruneSolutions(ctx context.Context, before time.Time, maxPerWorkspace int) (int, error) {
	s.solArgs <- pruneArgs{before, maxPerWorkspace}
	return 0, nil
}

func (s *pruneStore) PruneFixes(ctx context.Context, before time.Time, maxPerTenant int) (int, error) {
	s.fixArgs <- pruneArgs{before, maxPerTenant}
	return 0, nil
}

// TestRetentionZeroMeansNoCap: zero caps reach the store as no cap, and
// solutions and fixes are pruned at the default age.
func TestRetentionZeroMeansNoCap(t *testing.T) {
	bolt := tempBolt(t)
	ps := &pruneStore{Store: bolt, caps: make(chan int, 1), solArgs: make(chan pruneArgs, 1), fixArgs: make(chan pruneArgs, 1)}
	h := newHarnessOn(t, ps, "http://127.0.0.1:1")
	start := h.now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.srv.Run(ctx); close(done) }()
	got := <-ps.caps
	sol := <-ps.solArgs
	fix := <-ps.fixArgs
	cancel()
	<-done
	if got != 0 {
		t.Fatalf("PruneIncidents got maxPerTenant=%d, want 0 (no cap)", got)
	}
	if sol.max != 0 {
		t.Fatalf("PruneSolutions got maxPerWorkspace=%d, want 0 (no cap)", sol.max)
	}
	if age := start.Sub(sol.before); age > memory.DefaultRetentionSolutionsMaxAge || age < memory.DefaultRetentionSolutionsMaxAge-time.Minute {
		t.Fatalf("PruneSolutions got before = now - %v, want now - %v", age, memory.DefaultRetentionSolutionsMaxAge)
	}
	if fix.max != 0 {
		t.Fatalf("PruneFixes got maxPerTenant=%d, want 0 (no cap)", fix.max)
	}
	if age := start.Sub(fix.before); age > memory.DefaultRetentionFixesMaxAge || age < memory.DefaultRetentionFixesMaxAge-time.Minute {
		t.Fatalf("PruneFixes got before = now - %v, want now - %v", age, memory.DefaultRetentionFixesMaxAge)
	}
}

func TestNewRejectsBadDefaults(t *testing.T) {
	bolt := tempBolt(t)
	g, _ := guard.New(guard.DefaultConfig())
	r, _ := providers.NewRouter([]providers.Config{{Name: "m", Type: providers.TypeMock}}, nil)
	_, err := New(context.Background(), Options{Router: r, Options: memory.Options{Store: bolt, Guard: g}, Config: tenant.Config{DefaultWorkspace: "my team"}})
	if err == nil || !strings.Contains(err.Error(), "DefaultWorkspace") {
		t.Fatalf("err = %v", err)
	}
}

// TestGuardCacheFollowsStoreAndWindow: the cached guard changes when the
// store's incidents change (even written by someone else) and when the
// incidents counted leave the window, and not otherwise.
func TestGuardCacheFollowsStoreAndWindow(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	ctx := context.Background()
	plain := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	guardOf := func() string {
		res, _ := h.chat(plain, nil)
		return res.Header.Get(HeaderGuard)
	}
	add := func(at time.Time) {
		if err := h.store.AddIncident(ctx, &store.Incident{Time: at, Workspace: "default", Project: "default", Type: "http_error", StatusCode: 429, Message: "slow down"}); err != nil {
			t.Fatal(err)
		}
	}
	if g := guardOf(); g != "0" {
		t.Fatalf("empty store: guard %s", g)
	}
	h.mu.Lock()
	start := h.now
	h.mu.Unlock()
	add(start)
	add(start)
	if g := guardOf(); g != "1" {
		t.Fatalf("after two direct writes: guard %s (stale cache)", g)
	}
	if g := guardOf(); g != "1" {
		t.Fatalf("cached: guard %s", g)
	}
	h.mu.Lock()
	h.now = start.Add(time.Hour + time.Minute) // both incidents left the 1h window
	h.mu.Unlock()
	if g := guardOf(); g != "0" {
		t.Fatalf("after the window passed: guard %s (stale cache)", g)
	}
}

// TestRecallIsFrozenPerConversation: a conversation's recall is decided
// on its first request and re-sent unchanged: a solution stored meanwhile
// does not change it (a new conversation, or the task run again, gets
// it), and a solution deleted meanwhile leaves it.
func TestRecallIsFrozenPerConversation(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	// turn sends a turn of a conversation of task: its first (no
	// history), or a later one (the model answered once).
	turn := func(task string, later bool) string {
		msgs := `{"role":"user","content":"` + task + `"}`
		if later {
			msgs += `,{"role":"assistant","content":"Which cluster?"},{"role":"user","content":"prod"}`
		}
		res, _ := h.chat(`{"model":"m","messages":[`+msgs+`]}`, nil)
		return res.Header.Get(HeaderRecall)
	}
	recalled := func(task string) string { return turn(task, false) }
	const running, next = "rotate the TLS certificates of the ingress", "rotate the TLS certificates of the ingress controller"
	if r := recalled(running); r != "0" {
		t.Fatalf("empty memory: recall %s", r)
	}
	res := h.do("POST", "/scar/v1/solutions", []byte(`{"goal":"Rotate the ingress TLS certificates","approach":"cert-manager renew","outcome":"ok","confidence":0.9}`), nil)
	res.Body.Close()
	if r := turn(running, true); r != "0" {
		t.Fatalf("a solution stored during the conversation changed its recall: %s", r)
	}
	if r := recalled(next); r != "1" {
		t.Fatalf("a new conversation: recall %s", r)
	}
	if r := recalled(running); r != "1" {
		t.Fatalf("the running task run again: recall %s", r)
	}
	sols, _ := h.store.ListSolutions(context.Background(), "default")
	res = h.do("DELETE", "/scar/v1/solutions/"+sols[0].ID, nil, nil)
	res.Body.Close()
	if r := turn(next, true); r != "0" {
		t.Fatalf("after deleting: recall %s (stale cache)", r)
	}
}

// slowStore lets each incident write take all the time its context has,
// then succeed; it notes whether each write started with time left.
type slowStore struct {
	store.Store
	mu     sync.Mutex
	starts []bool
}

func (s *slowStore) AddIncidentOnce(ctx context.Context, in *store.Incident, key string) (bool, error) {
	s.mu.Lock()
	s.starts = append(s.starts, ctx.Err() == nil)
	s.mu.Unlock()
	<-ctx.Done()
	return s.Store.AddIncidentOnce(context.WithoutCancel(ctx), in, key)
}

func (s *slowStore) AddIncidents(ctx context.Context, batch []store.IncidentWrite) ([]store.VersionStep, error) {
	s.mu.Lock()
	s.starts = append(s.starts, ctx.Err() == nil)
	s.mu.Unlock()
	<-ctx.Done()
	return s.Store.AddIncidents(context.WithoutCancel(ctx), batch)
}

func TestStoreBudgetIsSharedByTheRequestsWrites(t *testing.T) {
	up := newRecorder(t, okCompletion)
	bolt := tempBolt(t)
	slow := &slowStore{Store: bolt}
	// A budget long enough that the request's first write starts within
	// it on a loaded machine.
	h := newHarnessOn(t, slow, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = time.Second }))
	// Three new failed tool results: three writes, one budget.
	res, _ := h.chat(agentTurns(t, 3, nil), nil)
	if res.StatusCode != 200 || res.Header.Get(HeaderDegraded) != "store" {
		t.Fatalf("status %d degraded %q", res.StatusCode, res.Header.Get(HeaderDegraded))
	}
	// The writes run in the incident writer: let it finish them.
	h.srv.Close()
	slow.mu.Lock()
	defer slow.mu.Unlock()
	live := 0
	for _, ok := range slow.starts {
		if ok {
			live++
		}
	}
	if live != 1 {
		t.Fatalf("%d writes started with time left (of %d): each write had a budget of its own", live, len(slow.starts))
	}
}

// versionlessStore fails every incident version lookup: the guard cannot
// be read, everything else works.
type versionlessStore struct{ store.Store }

func (versionlessStore) IncidentVersion(context.Context, string, string) (int64, error) {
	return 0, errors.New("version lookup failed")
}

func TestNoCaptureWhenTheStoreFailed(t *testing.T) {
	up := newRecorder(t, okCompletion)
	bolt := tempBolt(t)
	h := newHarnessOn(t, versionlessStore{bolt}, up.srv.URL)
	res, _ := h.chat(toolConversation(t, "Parse the YAML configuration file", false, 1), nil)
	if res.StatusCode != 200 || res.Header.Get(HeaderDegraded) != "store" {
		t.Fatalf("status %d degraded %q", res.StatusCode, res.Header.Get(HeaderDegraded))
	}
	// Its tool results were not read for failures: a solution stored now
	// would say it had none.
	if sols, _ := bolt.ListSolutions(context.Background(), "default"); len(sols) != 0 {
		t.Fatalf("captured %+v from a request the store failed on", sols)
	}
}

// TestAToolResultOfEscapesAloneIsAnswered: a tool result that is nothing
// but terminal escapes is judged (it cannot say it failed) and the turn
// is answered, on every turn it is resent.
func TestAToolResultOfEscapesAloneIsAnswered(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	body := `{"model":"m","messages":[{"role":"user","content":"run it"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"run_shell","arguments":"{\"cmd\":\"tput sgr0\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"\u001b0"}]}`
	for turn := range 2 {
		res, b := h.chat(body, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: status %d: %s", turn+1, res.StatusCode, b)
		}
	}
}

// panickyStore panics on a read of one conversation's incidents, which
// only the guard's derivation makes, once armed.
type panickyStore struct {
	store.Store
	armed atomic.Bool
}

func (s *panickyStore) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	if q.Session != "" && s.armed.Load() {
		panic("a bug in the memory")
	}
	return s.Store.ListIncidents(ctx, q)
}

// TestAPanicInTheMemoryForwardsTheRequestAsSent: should the memory panic
// while deciding a request's blocks, the request goes out as the client
// sent it, byte for byte, says X-Scar-Degraded: memory, and the proxy goes
// on serving.
func TestAPanicInTheMemoryForwardsTheRequestAsSent(t *testing.T) {
	up := newRecorder(t, okCompletion)
	st := &panickyStore{Store: tempBolt(t)}
	// A window of one incident is full with two: the guard then reads the
	// conversation's own incidents.
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) { o.GuardReadLimit = 1 }))
	for i := range 2 {
		in := store.Incident{Time: time.Now().Add(-time.Minute), Workspace: "default", Project: "default", Session: "other",
			Type: store.TypeToolError, Message: fmt.Sprintf("run_tests: FAIL %d", i)}
		if err := st.AddIncident(context.Background(), &in); err != nil {
			t.Fatal(err)
		}
	}
	st.armed.Store(true)
	body := `{"model":"m","messages":[{"role":"user","content":"fix the tests"}]}`
	res, b := h.chat(body, map[string]string{"X-Scar-Session": "s1"})
	if res.StatusCode != http.StatusOK || res.Header.Get(HeaderDegraded) != "memory" {
		t.Fatalf("status %d, X-Scar-Degraded %q: %s", res.StatusCode, res.Header.Get(HeaderDegraded), b)
	}
	if got := up.last(t).Body; string(got) != body {
		t.Fatalf("forwarded\n%s\nwant the request as sent\n%s", got, body)
	}
	st.armed.Store(false)
	if res, b := h.chat(body, map[string]string{"X-Scar-Session": "s1"}); res.StatusCode != http.StatusOK || res.Header.Get(HeaderDegraded) != "" {
		t.Fatalf("after the panic: status %d, X-Scar-Degraded %q: %s", res.StatusCode, res.Header.Get(HeaderDegraded), b)
	}
}
