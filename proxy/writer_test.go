package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// TestPendingFailureGuardsTheNextRequest: a provider's 429 is in the guard
// of the very next request while its write is still held by a slow store
// (one that keeps the write past its budget); once the store goes on, it
// is stored.
func TestPendingFailureGuardsTheNextRequest(t *testing.T) {
	const limited = `{"error":{"message":"Rate limit reached for gpt-test","type":"requests","code":"rate_limit_exceeded"}}`
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, limited)
	})
	st := newStuckStore(t, "AddIncident")
	st.ignoreCtx = true
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = 50 * time.Millisecond }))
	// One 429 already stored: one more makes it repeat.
	seed := store.Incident{Time: h.clock(), Workspace: "default", Project: "default", Provider: "up",
		Type: store.TypeHTTPError, StatusCode: 429, Message: "Rate limit reached for gpt-test"}
	if err := st.AddIncident(context.Background(), &seed); err != nil {
		t.Fatal(err)
	}
	body := chatBody(t, nil, msg("user", "hi"))
	if res, _ := h.chat(body, nil); res.Header.Get(HeaderGuard) != "0" || res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("first request: %d, X-Scar-Guard %q, want 0", res.StatusCode, res.Header.Get(HeaderGuard))
	}
	st.stick(t)
	// Straight to the handler: the harness would wait for the write.
	send := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusTooManyRequests || rec.Body.String() != limited {
			t.Fatalf("answer: %d %s", rec.Code, rec.Body)
		}
		return rec
	}
	send()
	<-st.blocked // its write is held
	if n := len(h.incidents("default", "default")); n != 2 {
		t.Fatalf("%d incidents stored while the write is held, want 2", n)
	}
	rec := send()
	if rec.Header().Get(HeaderGuard) != "1" || !strings.Contains(toldOf(t, up.last(t).Body), "Failed 3 times") {
		t.Fatalf("next request: X-Scar-Guard %q, system:\n%s", rec.Header().Get(HeaderGuard), toldOf(t, up.last(t).Body))
	}
	st.unstick()
	if err := h.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(h.incidents("default", "default")); n != 4 {
		t.Fatalf("%d incidents stored once the store went on, want 4", n)
	}
}

// finishTask sends a tool-using conversation about goal that ends in a
// final answer (a capture) straight to the handler: the harness's server
// would wait for the capture to be stored.
func (h *harness) finishTask(goal string) {
	h.t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(toolConversation(h.t, goal, false, 0)))
	req.Header.Set("Content-Type", "application/json")
	h.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 {
		h.t.Fatalf("status %d", rec.Code)
	}
}

// TestCapturesQueuedAtShutdownAreStored: Shutdown stores every solution
// still queued when it is called.
func TestCapturesQueuedAtShutdownAreStored(t *testing.T) {
	up := newRecorder(t, okCompletion)
	st := newStuckStore(t, "PutSolution")
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = hungStoreBound }))
	st.stick(t)
	const n = 5
	for i := range n {
		h.finishTask(fmt.Sprintf("Task number %d: rotate the signing keys of service %d", i, i))
		if i == 0 {
			<-st.blocked // the first is being stored; the others queue
		}
	}
	if sols, _ := st.Store.ListSolutions(context.Background(), "default"); len(sols) != 0 {
		t.Fatalf("%d solutions stored while the store is held", len(sols))
	}
	var wg sync.WaitGroup
	var err error
	wg.Go(func() { err = h.srv.Shutdown(context.Background()) })
	st.unstick()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	sols, _ := st.Store.ListSolutions(context.Background(), "default")
	if len(sols) != n {
		t.Fatalf("%d solutions stored after shutdown, want %d", len(sols), n)
	}
	// After Shutdown a capture is dropped, and counted.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(toolConversation(t, "Another task after shutdown", false, 0)))
	h.srv.Handler().ServeHTTP(rec, req)
	if n := h.counter("scarproxy_captures_dropped_total"); n != 1 {
		t.Fatalf("captures dropped: %v", n)
	}
}

// TestCaptureQueueFullDrops: a capture that finds the queue full is
// dropped and counted; the answer does not wait for room.
func TestCaptureQueueFullDrops(t *testing.T) {
	up := newRecorder(t, okCompletion)
	st := newStuckStore(t, "PutSolution")
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = hungStoreBound }))
	st.stick(t)
	for i := range memory.CaptureQueueSize + 3 {
		h.finishTask(fmt.Sprintf("Task %d: rebuild index shard %d", i, i))
		if i == 0 {
			<-st.blocked
		}
	}
	if n := h.counter("scarproxy_captures_dropped_total"); n != 2 {
		t.Fatalf("captures dropped: %v, want 2 (one being stored, %d queued)", n, memory.CaptureQueueSize)
	}
	st.unstick()
}

// TestConcurrentFailuresAreAllStored: failures recorded at once are all
// stored.
func TestConcurrentFailuresAreAllStored(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"overloaded"}}`)
	})
	h := newHarness(t, up.srv.URL)
	const n = 40
	var wg sync.WaitGroup
	var degraded atomic.Int64
	for i := range n {
		wg.Go(func() {
			res := h.do(http.MethodPost, "/v1/chat/completions", []byte(chatBody(t, nil, msg("user", fmt.Sprint("hi ", i)))), nil)
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.Header.Get(HeaderDegraded) != "" {
				degraded.Add(1)
			}
		})
	}
	wg.Wait()
	h.srv.memory.Wait()
	if got := len(h.incidents("default", "default")); got != n || degraded.Load() != 0 {
		t.Fatalf("%d incidents stored of %d failures (%d answers degraded)", got, n, degraded.Load())
	}
}

// countingPuts counts solution writes.
type countingPuts struct {
	*stuckStore
	puts atomic.Int64
}

func (s *countingPuts) PutSolution(ctx context.Context, sol *store.Solution) error {
	s.puts.Add(1)
	return s.stuckStore.PutSolution(ctx, sol)
}

func (s *countingPuts) PutSolutions(ctx context.Context, sols []*store.Solution, maxPerWorkspace int) (int, error) {
	s.puts.Add(int64(len(sols)))
	return s.stuckStore.PutSolutions(ctx, sols, maxPerWorkspace)
}

// TestCapturesOfOneConversationCoalesce: captures of a conversation that
// queued while the store was busy are stored once, the last one.
func TestCapturesOfOneConversationCoalesce(t *testing.T) {
	var turn atomic.Int64
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Done, answer %d."},"finish_reason":"stop"}]}`, turn.Add(1))
	})
	st := newStuckStore(t, "PutSolution")
	cs := &countingPuts{stuckStore: st}
	h := newHarnessOn(t, cs, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = hungStoreBound }))
	st.stick(t)
	h.finishTask("Rotate the signing keys of the billing service")
	<-st.blocked // the first capture is being stored
	for range 5 {
		h.finishTask("Migrate the invoices table to the new schema")
	}
	st.unstick()
	if err := h.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := cs.puts.Load(); n != 2 {
		t.Fatalf("%d solution writes, want 2 (the first conversation, then the last capture of the second)", n)
	}
	sols, _ := st.Store.ListSolutions(context.Background(), "default")
	if len(sols) != 2 || !strings.Contains(sols[0].Approach+sols[1].Approach, "answer 6") {
		t.Fatalf("stored %+v", sols)
	}
}

// TestACaptureKeepsWhatItWasGiven: a queued capture does not change when
// the request's slices do after it was queued (a format's memo hands
// them to the conversation's next turn).
func TestACaptureKeepsWhatItWasGiven(t *testing.T) {
	st := newStuckStore(t, "PutSolution")
	h := newHarnessOn(t, st, "http://127.0.0.1:1", withOptions(func(o *Options) { o.StoreTimeout = hungStoreBound }))
	st.stick(t)
	tn := tenant.Tenant{Workspace: "default", Project: "default"}
	h.srv.memory.Capture(tn, &wire.Info{Key: "k1", Goal: "Rotate the signing keys", Tools: []string{"read_file"}}, "Rotated.")
	<-st.blocked // the queue is storing the first capture
	info := &wire.Info{Key: "k2", Goal: "Migrate the invoices table", Tools: []string{"read_file", "run_sql"}}
	h.srv.memory.Capture(tn, info, "Migrated.")
	info.Tools[1] = "delete_everything"
	st.unstick()
	if err := h.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	sols, err := st.Store.ListSolutions(context.Background(), "default")
	if err != nil {
		t.Fatal(err)
	}
	var approach string
	for _, s := range sols {
		if s.Key == "k2" {
			approach = s.Approach
		}
	}
	if !strings.Contains(approach, "read_file -> run_sql") {
		t.Fatalf("stored approach %q, want the tools as captured", approach)
	}
}

// failingRun is an agent's conversation whose tool fails turn after
// turn, sent straight to a proxy's handler on a stuck store.
type failingRun struct {
	t    *testing.T
	h    *harness
	up   *recorder
	msgs []map[string]any
	// output is the failed result of the i-th call.
	output func(i int) string
}

func newFailingRun(t *testing.T, st *stuckStore, output func(i int) string, opts ...harnessOpt) *failingRun {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	})
	return &failingRun{t: t, h: newHarnessOn(t, st, up.srv.URL, opts...), up: up, output: output,
		msgs: []map[string]any{msg("system", "You are an agent."), msg("user", "make the parser tests pass")}}
}

// send sends the turn with n failed calls, and returns its answer. The
// harness's server would wait for the writes: this does not.
func (r *failingRun) send(n int) *httptest.ResponseRecorder {
	r.t.Helper()
	for i := len(r.msgs)/2 - 1; i < n; i++ {
		id := fmt.Sprintf("f%d", i)
		r.msgs = append(r.msgs, toolCall(id, "run_tests"), toolResultMsg(id, r.output(i)))
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(chatBody(r.t, nil, r.msgs...)))
	req.Header.Set("Content-Type", "application/json")
	r.h.srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		r.t.Fatalf("answer: %d %s", rec.Code, rec.Body)
	}
	return rec
}

// TestAContinuedTurnsToolFailureIsShownBeforeItsCommit: a tool failure in
// a turn that continues the one this replica read last is in the guard at
// once, while the store holds its write: the next turn's guard counts it.
// The request goes out meanwhile; its answer waits for the commit.
func TestAContinuedTurnsToolFailureIsShownBeforeItsCommit(t *testing.T) {
	st := newStuckStore(t, "AddIncidentOnce")
	st.ignoreCtx = true
	r := newFailingRun(t, st, func(int) string { return "--- FAIL: TestParse (0.00s)\n    parse_test.go:12: expected 3, got 2\nFAIL" },
		withOptions(func(o *Options) { o.StoreTimeout = 50 * time.Millisecond }))
	h := r.h
	r.send(0)
	r.send(1) // the first failure, stored
	h.srv.memory.Wait()
	st.stick(t)
	// The second, held by the store: the request goes out while it is
	// written, and its answer, which waits for the commit, says the
	// store did not commit in time.
	if rec := r.send(2); rec.Header().Get(HeaderDegraded) != "store" {
		t.Fatalf("the answer of a turn whose failure's write is held: X-Scar-Degraded %q", rec.Header().Get(HeaderDegraded))
	}
	if !strings.Contains(string(r.up.last(t).Body), `"f1"`) {
		t.Fatal("the turn whose failure's write is held did not reach the provider")
	}
	<-st.blocked
	if n := len(h.incidents("default", "default")); n != 1 {
		t.Fatalf("%d incidents stored while the write is held, want 1", n)
	}
	rec := r.send(3)
	if rec.Header().Get(HeaderGuard) != "1" || !strings.Contains(toldOf(t, r.up.last(t).Body), "Failed 3 times") {
		t.Fatalf("third failure: X-Scar-Guard %q, told:\n%s", rec.Header().Get(HeaderGuard), toldOf(t, r.up.last(t).Body))
	}
	st.unstick()
	h.srv.memory.Wait()
	if n := len(h.incidents("default", "default")); n != 3 {
		t.Fatalf("%d incidents stored once the store went on, want 3", n)
	}
}

// TestAToolFailureWhoseWriteFailsIsRecordedFromTheNextTurn: a failed
// tool result shown before its commit, whose write then fails, is not
// taken as recorded: the next turn, which sends it again, stores it.
func TestAToolFailureWhoseWriteFailsIsRecordedFromTheNextTurn(t *testing.T) {
	st := newStuckStore(t, "AddIncidentOnce")
	r := newFailingRun(t, st, func(i int) string { return fmt.Sprintf("--- FAIL: TestParse%d (0.00s)\nFAIL", i) })
	h := r.h
	send := func(n int) {
		r.send(n)
		h.srv.memory.Wait()
	}
	send(0)
	send(1) // stored
	st.failFast = true
	st.stick(t)
	send(2) // its write fails
	if n := len(h.incidents("default", "default")); n != 1 {
		t.Fatalf("%d incidents stored while the store fails, want 1", n)
	}
	st.unstick()
	send(3) // sends the lost one again, and one more
	if n := len(h.incidents("default", "default")); n != 3 {
		t.Fatalf("%d incidents stored once the store works again, want 3", n)
	}
}
