package proxy

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/scarproxy/scarproxy/guard"
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
	if rec.Header().Get(HeaderGuard) != "1" || !strings.Contains(systemOf(t, up.last(t).Body), "Failed 3 times") {
		t.Fatalf("next request: X-Scar-Guard %q, system:\n%s", rec.Header().Get(HeaderGuard), systemOf(t, up.last(t).Body))
	}
	st.unstick()
	if err := h.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(h.incidents("default", "default")); n != 4 {
		t.Fatalf("%d incidents stored once the store went on, want 4", n)
	}
}

// TestAnswerWaitsForTheCommitOnlyWhenTheStoreLags: while the store
// commits, a provider's failure is answered as soon as it is queued (and
// stored after); when the writer's batch is held past a quarter of
// StoreTimeout, the next failure's answer waits for its commit and says
// X-Scar-Degraded: store when it did not come.
func TestAnswerWaitsForTheCommitOnlyWhenTheStoreLags(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"slow down"}}`)
	})
	st := newStuckStore(t, "AddIncident")
	st.ignoreCtx = true
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = 100 * time.Millisecond }))
	body := chatBody(t, nil, msg("user", "hi"))
	if res, _ := h.chat(body, nil); res.Header.Get(HeaderDegraded) != "" {
		t.Fatal("a committed failure said degraded")
	}
	st.stick(t)
	send := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
		h.srv.Handler().ServeHTTP(rec, req)
		return rec
	}
	// The store committed a moment ago: answered at once, the write held.
	if rec := send(); rec.Header().Get(HeaderDegraded) != "" {
		t.Fatalf("answer while the store commits said X-Scar-Degraded %q", rec.Header().Get(HeaderDegraded))
	}
	<-st.blocked
	// Once the held batch is older than StoreTimeout/4 the store lags.
	for !func() bool {
		h.srv.writer.healthMu.Lock()
		defer h.srv.writer.healthMu.Unlock()
		return !h.srv.writer.started.IsZero() && time.Since(h.srv.writer.started) >= h.srv.opts.StoreTimeout/4
	}() {
		runtime.Gosched()
	}
	if rec := send(); rec.Header().Get(HeaderDegraded) != "store" {
		t.Fatalf("answer while the store lags: X-Scar-Degraded %q, want store", rec.Header().Get(HeaderDegraded))
	}
	st.unstick()
	if err := h.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(h.incidents("default", "default")); n != 3 {
		t.Fatalf("%d incidents stored, want 3", n)
	}
}

// countingStore counts reads of a tenant's window (incident reads not
// limited to a session).
type countingStore struct {
	store.Store
	lists atomic.Int64
}

func (s *countingStore) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	if q.Session == "" {
		s.lists.Add(1)
	}
	return s.Store.ListIncidents(ctx, q)
}

// TestIncrementalGuardMatchesAFullRead: whatever mix of writes a tenant
// sees (this replica's provider failures and tool errors, another
// replica's writes, deletions), the guard this replica derives from the
// window it keeps up to date is the one a replica reading everything from
// the store derives; and its own writes cost it no read.
func TestIncrementalGuardMatchesAFullRead(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 14))
			bolt := tempBolt(t)
			counted := &countingStore{Store: bolt}
			now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			limit := 10 + rnd.IntN(20)
			inc := newHarnessOn(t, counted, "http://127.0.0.1:1", withOptions(func(o *Options) { o.Now, o.GuardReadLimit = clock, limit })).srv
			ctx := context.Background()
			providers := []string{"p1", "p2"}
			convs := []string{"", "c1", "c2"}
			msgs := []string{"Rate limit reached", "SyntaxError: Unexpected end of input", "connection reset by peer", "FAIL: TestParse",
				"upstream said: shard 7 of 9 is rebuilding", "upstream said: shard 3 of 9 is rebuilding", ""}
			foreign := 0
			type mark struct {
				provider string
				at       time.Time
			}
			var marks []mark // recoveries, replayed on the replica reading everything
			for step := range 60 {
				now = now.Add(time.Duration(rnd.IntN(30)) * time.Second) // sometimes not at all: ties
				in := &store.Incident{Time: now.Add(-time.Duration(rnd.IntN(3)) * time.Second), Workspace: "w", Project: "p",
					Message: msgs[rnd.IntN(len(msgs))]}
				if rnd.IntN(2) == 0 {
					in.Type, in.StatusCode, in.Provider = store.TypeHTTPError, []int{429, 500, 502}[rnd.IntN(3)], providers[rnd.IntN(2)]
				} else {
					in.Type, in.Session = store.TypeToolError, convs[1+rnd.IntN(2)]
				}
				switch r := rnd.IntN(20); {
				case r == 0:
					if _, err := bolt.DeleteIncidents(ctx, "w", "p"); err != nil {
						t.Fatal(err)
					}
					foreign++
				case r < 4: // another replica
					if err := bolt.AddIncident(ctx, in); err != nil {
						t.Fatal(err)
					}
					foreign++
				case in.Type == store.TypeToolError:
					if _, err := inc.writeIncident(ctx, in, fmt.Sprint(in.Session, "|call_", step%7), false); err != nil {
						t.Fatal(err)
					}
				default:
					if _, err := inc.writeIncident(ctx, in, "", true); err != nil {
						t.Fatal(err)
					}
				}
				if rnd.IntN(8) == 0 { // a provider answered well
					m := mark{providers[rnd.IntN(2)], now.Add(-time.Duration(rnd.IntN(40)) * time.Second)}
					marks = append(marks, m)
					inc.recovered.mark(tenantKey{"w", "p"}, m.provider, m.at)
				}
				if rnd.IntN(3) > 0 && step < 59 {
					continue // several writes between two reads of the guard
				}
				// What this replica shows before its commits, a full read
				// finds once they are done.
				inc.writer.wait()
				at := map[string]time.Time{} // the latest recovery of each provider
				for _, m := range marks {
					at[m.provider] = m.at
				}
				// At now, and for a request that arrived before the newest
				// incidents (a private window).
				for _, when := range []time.Time{now, now.Add(-time.Duration(rnd.IntN(40)) * time.Second)} {
					for _, conv := range convs {
						got, gotBlock, _, err := inc.guardEntries(ctx, "w", "p", conv, when)
						if err != nil {
							t.Fatal(err)
						}
						want := fullGuard(t, inc, bolt, conv, when, limit, at)
						if wantBlock := guard.Block(want); !reflect.DeepEqual(got, want) || gotBlock != wantBlock {
							t.Fatalf("step %d, conversation %q at %v:\nincremental %+v\n  full read %+v", step, conv, when, got, want)
						}
					}
				}
			}
			// Window reads: the first, and at most one after each foreign
			// write (fullGuard reads the store on its own).
			if reads := counted.lists.Load(); reads > int64(1+foreign) {
				t.Fatalf("%d incident reads for %d foreign writes: the window was read again after its own writes", reads, foreign)
			}
		})
	}
}

// fullGuard is the guard of a conversation at now derived from scratch:
// the tenant's newest limit incidents inside the window read from the
// store, those after now left out, provider failures after their
// provider's latest recovery (at), the conversation's own failures (read
// on their own too when the read hit its limit), run through Detect.
func fullGuard(t *testing.T, s *Server, st store.Store, conv string, now time.Time, limit int, at map[string]time.Time) []guard.Entry {
	t.Helper()
	ctx := context.Background()
	lo := now.Add(-s.guard.Config().Window)
	read, err := st.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p", Since: lo, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	var incs []store.Incident
	seen := map[string]bool{}
	own := func(in store.Incident) bool {
		return in.Type != store.TypeLoop && !guard.ProviderFailure(in.Type) && in.Session == conv && !in.Time.After(now) && !in.Time.Before(lo)
	}
	for _, in := range read {
		seen[in.ID] = true
		if in.Time.After(now) {
			continue
		}
		if guard.ProviderFailure(in.Type) {
			if r, ok := at[in.Provider]; !ok || in.Time.After(r) {
				incs = append(incs, in)
			}
		} else if own(in) {
			incs = append(incs, in)
		}
	}
	if len(read) >= limit && conv != "" {
		mine, err := st.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p", Session: conv, Since: lo, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range mine {
			if !seen[in.ID] && own(in) {
				incs = append(incs, in)
			}
		}
	}
	return s.withFixes(s.guard.DetectAll(incs, now), nil)
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
	var m dto.Metric
	if err := h.srv.metrics.captureDropped.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Fatalf("captures dropped: %v (%v)", m.GetCounter().GetValue(), err)
	}
}

// TestCaptureQueueFullDrops: a capture that finds the queue full is
// dropped and counted; the answer does not wait for room.
func TestCaptureQueueFullDrops(t *testing.T) {
	up := newRecorder(t, okCompletion)
	st := newStuckStore(t, "PutSolution")
	h := newHarnessOn(t, st, up.srv.URL, withOptions(func(o *Options) { o.StoreTimeout = hungStoreBound }))
	st.stick(t)
	for i := range captureQueueSize + 3 {
		h.finishTask(fmt.Sprintf("Task %d: rebuild index shard %d", i, i))
		if i == 0 {
			<-st.blocked
		}
	}
	var m dto.Metric
	if err := h.srv.metrics.captureDropped.Write(&m); err != nil || m.GetCounter().GetValue() != 2 {
		t.Fatalf("captures dropped: %v (%v), want 2 (one being stored, %d queued)", m.GetCounter().GetValue(), err, captureQueueSize)
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
	h.srv.writer.wait()
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

func (s *countingPuts) PutSolutions(ctx context.Context, sols []*store.Solution) error {
	s.puts.Add(int64(len(sols)))
	return s.stuckStore.PutSolutions(ctx, sols)
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
	h.srv.capture(tn, &wire.Info{Key: "k1", Goal: "Rotate the signing keys", Tools: []string{"read_file"}}, "Rotated.")
	<-st.blocked // the queue is storing the first capture
	info := &wire.Info{Key: "k2", Goal: "Migrate the invoices table", Tools: []string{"read_file", "run_sql"}}
	h.srv.capture(tn, info, "Migrated.")
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

// batchPuts records the size of each solution write.
type batchPuts struct {
	store.Store
	mu      sync.Mutex
	batches []int
}

func (s *batchPuts) PutSolutions(ctx context.Context, sols []*store.Solution) error {
	s.mu.Lock()
	s.batches = append(s.batches, len(sols))
	s.mu.Unlock()
	return s.Store.PutSolutions(ctx, sols)
}

// TestAStreamOfCapturesGathers: a capture after a quiet spell is written
// at once; captures that follow a write within captureSyncEvery gather
// until then and share one write.
func TestAStreamOfCapturesGathers(t *testing.T) {
	up := newRecorder(t, okCompletion)
	st := &batchPuts{Store: tempBolt(t)}
	h := newHarnessOn(t, st, up.srv.URL)
	q := h.srv.captures
	waited := make(chan time.Duration)
	release := make(chan time.Time)
	q.clock = func() time.Time { return time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC) } // no time passes
	q.after = func(d time.Duration) <-chan time.Time { waited <- d; return release }
	h.finishTask("Rotate the signing keys of the billing service")
	q.wait()
	h.finishTask("Migrate the invoices table to the new schema")
	idle := make(chan struct{})
	go func() { q.wait(); close(idle) }()
	select {
	case d := <-waited:
		if d != captureSyncEvery {
			t.Fatalf("the capture after a write waits %v, want %v", d, captureSyncEvery)
		}
	case <-idle:
		t.Fatal("the capture after a write was written at once")
	}
	h.finishTask("Rebuild shard 7 of the search index")
	h.finishTask("Bump the Go toolchain to the latest release")
	close(release)
	q.wait()
	st.mu.Lock()
	defer st.mu.Unlock()
	if !slices.Equal(st.batches, []int{1, 3}) {
		t.Fatalf("solution writes of %v solutions, want [1 3]", st.batches)
	}
}
