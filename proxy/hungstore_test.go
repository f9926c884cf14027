package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/store"
)

// stuckStore is a store whose chosen calls block, once stick is called,
// until their context ends (or the test does): a database whose tables are
// locked. An empty set of calls means every call.
type stuckStore struct {
	store.Store
	calls   map[string]bool
	on      atomic.Bool
	release chan struct{}
	resume  chan struct{} // closed by unstick: blocked calls go on
	blocked chan string   // the name of each call that starts to block

	// With ignoreCtx, a blocked call waits past its context's end, as a
	// database driver that does not honour cancellation.
	ignoreCtx bool

	// With failFast, a chosen call fails at once instead of blocking, and
	// budgets notes how long its context had left (-1: no deadline).
	failFast bool
	mu       sync.Mutex
	budgets  map[string]time.Duration
}

var _ store.Store = (*stuckStore)(nil)

func newStuckStore(t *testing.T, calls ...string) *stuckStore {
	s := &stuckStore{Store: tempBolt(t), calls: map[string]bool{}, release: make(chan struct{}), resume: make(chan struct{}),
		blocked: make(chan string, 64)}
	for _, c := range calls {
		s.calls[c] = true
	}
	return s
}

// stick makes the chosen calls block from now on, until the test ends.
// Call it once the proxy is built: its cleanup then runs before the
// proxy's, so a proxy that waits on the store is released and its test
// fails instead of hanging.
func (s *stuckStore) stick(t *testing.T) {
	s.on.Store(true)
	t.Cleanup(func() { close(s.release) })
}

// unstick lets the blocked calls, and every later one, go on to the store.
func (s *stuckStore) unstick() {
	s.on.Store(false)
	close(s.resume)
}

func (s *stuckStore) wait(ctx context.Context, call string) error {
	if !s.on.Load() || (len(s.calls) > 0 && !s.calls[call]) {
		return nil
	}
	if s.failFast {
		left := time.Duration(-1)
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		s.mu.Lock()
		if s.budgets == nil {
			s.budgets = map[string]time.Duration{}
		}
		s.budgets[call] = left
		s.mu.Unlock()
		return errors.New("store failed")
	}
	select {
	case s.blocked <- call:
	default:
	}
	done := ctx.Done()
	if s.ignoreCtx {
		done = nil
	}
	select {
	case <-done:
		return ctx.Err()
	case <-s.release:
		return errors.New("stuck store released")
	case <-s.resume:
		return nil
	}
}

func (s *stuckStore) AddIncident(ctx context.Context, inc *store.Incident) error {
	if err := s.wait(ctx, "AddIncident"); err != nil {
		return err
	}
	return s.Store.AddIncident(ctx, inc)
}

func (s *stuckStore) AddIncidentOnce(ctx context.Context, inc *store.Incident, key string) (bool, error) {
	if err := s.wait(ctx, "AddIncidentOnce"); err != nil {
		return false, err
	}
	return s.Store.AddIncidentOnce(ctx, inc, key)
}

// AddIncidents blocks as AddIncident does when the batch holds an
// incident without a dedupe key, as AddIncidentOnce does when it holds one
// with a key.
func (s *stuckStore) AddIncidents(ctx context.Context, batch []store.IncidentWrite) ([]store.VersionStep, error) {
	for _, w := range batch {
		call := "AddIncident"
		if w.DedupeKey != "" {
			call = "AddIncidentOnce"
		}
		if err := s.wait(ctx, call); err != nil {
			return nil, err
		}
	}
	if s.ignoreCtx {
		ctx = context.WithoutCancel(ctx) // the database goes on with the write
	}
	return s.Store.AddIncidents(ctx, batch)
}

func (s *stuckStore) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	if err := s.wait(ctx, "ListIncidents"); err != nil {
		return nil, err
	}
	return s.Store.ListIncidents(ctx, q)
}

func (s *stuckStore) IncidentVersion(ctx context.Context, workspace, project string) (int64, error) {
	if err := s.wait(ctx, "IncidentVersion"); err != nil {
		return 0, err
	}
	return s.Store.IncidentVersion(ctx, workspace, project)
}

func (s *stuckStore) DeleteIncidents(ctx context.Context, workspace, project string) (int, error) {
	if err := s.wait(ctx, "DeleteIncidents"); err != nil {
		return 0, err
	}
	return s.Store.DeleteIncidents(ctx, workspace, project)
}

func (s *stuckStore) PutSolution(ctx context.Context, sol *store.Solution) error {
	if err := s.wait(ctx, "PutSolution"); err != nil {
		return err
	}
	return s.Store.PutSolution(ctx, sol)
}

func (s *stuckStore) PutSolutions(ctx context.Context, sols []*store.Solution, maxPerWorkspace int) (int, error) {
	if err := s.wait(ctx, "PutSolution"); err != nil {
		return 0, err
	}
	return s.Store.PutSolutions(ctx, sols, maxPerWorkspace)
}

func (s *stuckStore) GetSolution(ctx context.Context, workspace, id string) (store.Solution, error) {
	if err := s.wait(ctx, "GetSolution"); err != nil {
		return store.Solution{}, err
	}
	return s.Store.GetSolution(ctx, workspace, id)
}

func (s *stuckStore) ListSolutions(ctx context.Context, workspace string) ([]store.Solution, error) {
	if err := s.wait(ctx, "ListSolutions"); err != nil {
		return nil, err
	}
	return s.Store.ListSolutions(ctx, workspace)
}

func (s *stuckStore) DeleteSolution(ctx context.Context, workspace, id string) error {
	if err := s.wait(ctx, "DeleteSolution"); err != nil {
		return err
	}
	return s.Store.DeleteSolution(ctx, workspace, id)
}

func (s *stuckStore) DeleteSolutions(ctx context.Context, workspace string) (int, error) {
	if err := s.wait(ctx, "DeleteSolutions"); err != nil {
		return 0, err
	}
	return s.Store.DeleteSolutions(ctx, workspace)
}

func (s *stuckStore) SolutionChanges(ctx context.Context, after int64, limit int) ([]store.SolutionChange, int64, error) {
	if err := s.wait(ctx, "SolutionChanges"); err != nil {
		return nil, after, err
	}
	return s.Store.SolutionChanges(ctx, after, limit)
}

func (s *stuckStore) AddUsage(ctx context.Context, batch []store.Usage) error {
	if err := s.wait(ctx, "AddUsage"); err != nil {
		return err
	}
	return s.Store.AddUsage(ctx, batch)
}

func (s *stuckStore) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.Usage, error) {
	if err := s.wait(ctx, "ListUsage"); err != nil {
		return nil, err
	}
	return s.Store.ListUsage(ctx, q)
}

func (s *stuckStore) Ping(ctx context.Context) error {
	if err := s.wait(ctx, "Ping"); err != nil {
		return err
	}
	return s.Store.Ping(ctx)
}

// hungStoreBound is how long a test waits for an answer before it calls
// the proxy stuck. It bounds the wait (a proxy that hangs fails instead of
// blocking the run); it asserts no duration.
const hungStoreBound = 30 * time.Second

// doBounded sends a request to the proxy and reads the whole answer, or
// fails the test when no answer came within hungStoreBound.
func (h *harness) doBounded(method, path, body string) (*http.Response, []byte) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hungStoreBound)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.http.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: no answer: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatalf("%s %s: answer cut: %v", method, path, err)
	}
	return res, b
}

// TestProviderErrorWithHungStore: a provider's error answer is recorded
// before it is delivered; with incident writes hanging, the answer still
// arrives, whole, within the store's budget, and says it is degraded.
func TestProviderErrorWithHungStore(t *testing.T) {
	const limited = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, limited)
	})
	st := newStuckStore(t, "AddIncident")
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = 50 * time.Millisecond }))
	st.stick(t)
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		res, b := h.doBounded(http.MethodPost, path, `{"model":"m","messages":[{"role":"user","content":"hi"}],"input":"x"}`)
		if res.StatusCode != http.StatusTooManyRequests || string(b) != limited {
			t.Fatalf("%s: %d %s", path, res.StatusCode, b)
		}
		if got := res.Header.Get(HeaderDegraded); got != "store" {
			t.Fatalf("%s: X-Scar-Degraded %q, want store", path, got)
		}
	}
}

// TestSyncDurabilityHoldsTheAnswerForTheCommit: with durability sync, a
// provider's error answer waits for its incident's commit even while the
// store commits well (with async it would go out at once); when the
// commit does not come within the store's budget, the answer says
// X-Scar-Degraded: store.
func TestSyncDurabilityHoldsTheAnswerForTheCommit(t *testing.T) {
	const limited = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, limited)
	})
	st := newStuckStore(t, "AddIncident")
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) {
		// A budget a loaded machine's fsync keeps within: the first answer
		// must see its commit come.
		o.StoreTimeout, o.Durability = time.Second, memory.DurabilitySync
	}))
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	if res, b := h.doBounded(http.MethodPost, "/v1/chat/completions", body); res.StatusCode != http.StatusTooManyRequests || res.Header.Get(HeaderDegraded) != "" {
		t.Fatalf("with the store committing: %d, X-Scar-Degraded %q: %s", res.StatusCode, res.Header.Get(HeaderDegraded), b)
	}
	st.stick(t)
	res, b := h.doBounded(http.MethodPost, "/v1/chat/completions", body)
	if res.StatusCode != http.StatusTooManyRequests || string(b) != limited {
		t.Fatalf("%d %s", res.StatusCode, b)
	}
	if got := res.Header.Get(HeaderDegraded); got != "store" {
		t.Fatalf("a commit that did not come: X-Scar-Degraded %q, want store", got)
	}
}

// TestUnreachableProviderWithHungStore: on the pass-through path, the 502
// of an unreachable provider says the store failed to record it.
func TestUnreachableProviderWithHungStore(t *testing.T) {
	st := newStuckStore(t, "AddIncident")
	h := newHarnessOn(t, st, "http://127.0.0.1:1", withOptions(func(o *Options) { o.StoreTimeout = 50 * time.Millisecond }))
	st.stick(t)
	res, b := h.doBounded(http.MethodPost, "/v1/embeddings", `{"model":"m","input":"x"}`)
	assertOpenAIError(t, res, b, http.StatusBadGateway)
	if got := res.Header.Get(HeaderDegraded); got != "store" {
		t.Fatalf("X-Scar-Degraded %q, want store", got)
	}
}

// TestMemoryAPIWithHungStore: every memory API call answers 503 once the
// store's budget is spent, instead of waiting for the store.
func TestMemoryAPIWithHungStore(t *testing.T) {
	st := newStuckStore(t)
	h := newHarnessOn(t, st, "http://127.0.0.1:1", withOptions(func(o *Options) { o.StoreTimeout = 50 * time.Millisecond }))
	sol := store.Solution{Workspace: "default", Key: "k", Goal: "Rotate the TLS certificates", Approach: "renew", Outcome: "ok"}
	if err := st.PutSolution(context.Background(), &sol); err != nil {
		t.Fatal(err)
	}
	st.stick(t)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/scar/v1/incidents", `{"type":"test_failure","message":"boom"}`},
		{"GET", "/scar/v1/incidents", ""},
		{"DELETE", "/scar/v1/incidents?workspace=default&project=default", ""},
		{"GET", "/scar/v1/guard", ""},
		{"POST", "/scar/v1/solutions", `{"goal":"g","approach":"a","outcome":"o","confidence":0.5}`},
		{"GET", "/scar/v1/solutions", ""},
		{"DELETE", "/scar/v1/solutions/" + sol.ID, ""},
		{"DELETE", "/scar/v1/solutions?workspace=default", ""},
	} {
		res, b := h.doBounded(c.method, c.path, c.body)
		assertOpenAIError(t, res, b, http.StatusServiceUnavailable)
	}
}

// TestReadyzWithHungStore: /readyz answers 503 within the store's budget,
// naming the store, when the store hangs, and when the recall index is
// held by a sync that waits on the store (the index is not at fault).
func TestReadyzWithHungStore(t *testing.T) {
	t.Run("ping hangs", func(t *testing.T) {
		st := newStuckStore(t)
		h := newHarnessOn(t, st, "http://127.0.0.1:1", withOptions(func(o *Options) { o.StoreTimeout = 50 * time.Millisecond }))
		st.stick(t)
		res, b := h.doBounded(http.MethodGet, "/readyz", "")
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "store unavailable") {
			t.Fatalf("readyz: %d %s", res.StatusCode, b)
		}
	})
	t.Run("index sync hangs", func(t *testing.T) {
		st := newStuckStore(t, "SolutionChanges")
		h := newHarnessOn(t, st, "http://127.0.0.1:1", withOptions(func(o *Options) { o.StoreTimeout = 50 * time.Millisecond }))
		st.stick(t)
		// A background sync with no deadline holds the index until the
		// store answers (here: until the test ends).
		go h.srv.memory.SyncIndex(context.Background())
		<-st.blocked
		res, b := h.doBounded(http.MethodGet, "/readyz", "")
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), "store unavailable") || strings.Contains(string(b), "recall index") {
			t.Fatalf("readyz: %d %s", res.StatusCode, b)
		}
	})
}

// TestStoreCallsUseStoreTimeout: the store calls of a provider's error, of
// the memory API and of /readyz are each given StoreTimeout, not a budget
// of their own (or none).
func TestStoreCallsUseStoreTimeout(t *testing.T) {
	const budget = time.Minute
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	st := newStuckStore(t, "AddIncident", "ListIncidents", "PutSolution", "Ping")
	st.failFast = true
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = budget }))
	st.stick(t)
	h.doBounded(http.MethodPost, "/v1/embeddings", `{"model":"m","input":"x"}`)
	h.doBounded(http.MethodGet, "/scar/v1/incidents?workspace=w&project=p", "")
	h.doBounded(http.MethodPost, "/scar/v1/solutions", `{"goal":"g","approach":"a","outcome":"o","confidence":0.5}`)
	h.doBounded(http.MethodGet, "/readyz", "")
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, call := range []string{"AddIncident", "ListIncidents", "PutSolution", "Ping"} {
		// Half the budget: room for a slow test machine, far from any
		// other budget.
		if left, ok := st.budgets[call]; !ok || left <= budget/2 || left > budget {
			t.Errorf("%s had %v left, want StoreTimeout (%v)", call, left, budget)
		}
	}
}

// TestUnreachableProviderWithHungStoreOnRewrittenRoutes: the proxy's own
// 502 on a rewritten route says the failure went unrecorded.
func TestUnreachableProviderWithHungStoreOnRewrittenRoutes(t *testing.T) {
	st := newStuckStore(t, "AddIncident")
	h := newHarnessOn(t, st, "http://127.0.0.1:1", withOptions(func(o *Options) { o.StoreTimeout = 50 * time.Millisecond }))
	st.stick(t)
	res, b := h.doBounded(http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	assertOpenAIError(t, res, b, http.StatusBadGateway)
	if got := res.Header.Get(HeaderDegraded); got != "store" {
		t.Fatalf("X-Scar-Degraded %q, want store", got)
	}
}
