package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// heldWrites holds incident writes, once hold is called, until release:
// a database that takes its time and does not honour cancellation.
type heldWrites struct {
	store.Store
	mu      sync.Mutex
	held    bool
	entered chan struct{}
	release chan struct{}
}

func (s *heldWrites) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held, s.entered, s.release = true, make(chan struct{}, 64), make(chan struct{})
}

func (s *heldWrites) AddIncidents(ctx context.Context, batch []store.IncidentWrite) ([]store.VersionStep, error) {
	s.mu.Lock()
	held, entered, release := s.held, s.entered, s.release
	s.mu.Unlock()
	if held {
		entered <- struct{}{}
		<-release
	}
	return s.Store.AddIncidents(context.WithoutCancel(ctx), batch)
}

// TestRecordWaitsForTheCommitOnlyWhenTheStoreLags: while the store
// commits, a provider's failure is recorded as soon as it is queued (and
// stored after); when the writer's batch is held past a quarter of
// StoreTimeout, the next failure waits for its commit and Record reports
// that it did not come (the answer then says X-Scar-Degraded: store).
func TestRecordWaitsForTheCommitOnlyWhenTheStoreLags(t *testing.T) {
	st := &heldWrites{Store: tempBolt(t)}
	// A budget a loaded machine's first commit keeps within; the writer's
	// clock moves only when the test says: how long the machine takes to
	// run the test does not decide whether the store lags.
	m := newTestMemory(t, st, func(o *Options) { o.StoreTimeout = time.Second })
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	m.writer.clock = func() time.Time { return time.Unix(0, clock.Load()) }
	tn := tenant.Tenant{Workspace: "default", Project: "default"}
	record := func() bool {
		return m.Record(context.Background(), tn, "m", "up", store.TypeHTTPError, 429, "slow down")
	}
	if !record() {
		t.Fatal("a committed failure was not recorded")
	}
	st.hold()
	// The store committed a moment ago: recorded at once, the write held.
	if !record() {
		t.Fatal("a failure while the store commits was not recorded at once")
	}
	<-st.entered
	// Once the held batch is older than StoreTimeout/4 the store lags.
	clock.Add(int64(m.opts.StoreTimeout / 4))
	if record() {
		t.Fatal("a failure while the store lags was reported stored")
	}
	close(st.release)
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	incs, err := st.ListIncidents(context.Background(), store.IncidentQuery{Workspace: "default", Project: "default"})
	if err != nil || len(incs) != 3 {
		t.Fatalf("%d incidents stored (%v), want 3", len(incs), err)
	}
}

// batchPuts records the size of each solution write.
type batchPuts struct {
	store.Store
	mu      sync.Mutex
	batches []int
}

func (s *batchPuts) PutSolutions(ctx context.Context, sols []*store.Solution, maxPerWorkspace int) (int, error) {
	s.mu.Lock()
	s.batches = append(s.batches, len(sols))
	s.mu.Unlock()
	return s.Store.PutSolutions(ctx, sols, maxPerWorkspace)
}

// TestAStreamOfCapturesGathers: a capture after a quiet spell is written
// at once; captures that follow a write within CaptureSyncEvery gather
// until then and share one write.
func TestAStreamOfCapturesGathers(t *testing.T) {
	st := &batchPuts{Store: tempBolt(t)}
	m := newTestMemory(t, st)
	q := m.captures
	waited := make(chan time.Duration)
	release := make(chan time.Time)
	q.clock = func() time.Time { return time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC) } // no time passes
	q.after = func(d time.Duration) <-chan time.Time { waited <- d; return release }
	tn := tenant.Tenant{Workspace: "default", Project: "default"}
	finish := func(goal string) {
		m.Capture(tn, &wire.Info{Key: goal, Goal: goal, Tools: []string{"read_file"}}, "Done.")
	}
	finish("Rotate the signing keys of the billing service")
	q.wait()
	finish("Migrate the invoices table to the new schema")
	idle := make(chan struct{})
	go func() { q.wait(); close(idle) }()
	select {
	case d := <-waited:
		if d != CaptureSyncEvery {
			t.Fatalf("the capture after a write waits %v, want %v", d, CaptureSyncEvery)
		}
	case <-idle:
		t.Fatal("the capture after a write was written at once")
	}
	finish("Rebuild shard 7 of the search index")
	finish("Bump the Go toolchain to the latest release")
	close(release)
	q.wait()
	st.mu.Lock()
	defer st.mu.Unlock()
	if !slices.Equal(st.batches, []int{1, 3}) {
		t.Fatalf("solution writes of %v solutions, want [1 3]", st.batches)
	}
}

// TestACaptureThatPanicsIsDropped: should building a capture's solution
// panic (a bug), that capture is dropped and the queue goes on storing
// the others: the process stays.
func TestACaptureThatPanicsIsDropped(t *testing.T) {
	st := tempBolt(t)
	m := newTestMemory(t, st)
	q := m.captures
	q.solution = func(c *solutionCapture) store.Solution {
		if strings.Contains(c.conv.Goal, "poison") {
			panic("a bug in capture")
		}
		return c.solution()
	}
	tn := tenant.Tenant{Workspace: "default", Project: "default"}
	for _, goal := range []string{"Rotate the poison keys of the billing service", "Migrate the invoices table to the new schema"} {
		m.Capture(tn, &wire.Info{Key: goal, Goal: goal, Tools: []string{"read_file"}}, "Done.")
		q.wait()
	}
	sols, err := st.ListSolutions(context.Background(), "default")
	if err != nil || len(sols) != 1 || !strings.Contains(sols[0].Goal, "invoices") {
		t.Fatalf("stored %+v (%v), want the invoices solution alone", sols, err)
	}
}

// frozenClock makes the writer's clock stand still: the store's health
// then depends on what its batches did, not on how fast the test runs.
func frozenClock(m *Memory) {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	m.writer.clock = func() time.Time { return at }
}

// providerFailure builds a provider failure's incident, as Record does.
func providerFailure(m *Memory, n int) *store.Incident {
	tn := tenant.Tenant{Workspace: "default", Project: "default"}
	return m.Incident(tn, "m", "up", store.TypeHTTPError, 429, fmt.Sprintf("slow down (request %d)", n), m.Now())
}

// answeredEarly reports whether writeIncident let a provider failure's
// answer go before its commit: given a context that is over, it returns
// at once when it does not wait (true), and ctx's error when it would.
func answeredEarly(t *testing.T, m *Memory, n int) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	stored, err := m.writeIncident(within(ctx), providerFailure(m, n), "", true, nil)
	if stored != (err == nil) || err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("failure %d: writeIncident = %v, %v", n, stored, err)
	}
	return stored
}

// TestAsyncAnswersBeforeTheCommitAreBounded: with durability async, while
// the store commits, at most AsyncLossBound failures have their answers
// out before their commit; the next one waits for its commit. All are
// stored once the held write ends.
func TestAsyncAnswersBeforeTheCommitAreBounded(t *testing.T) {
	st := &heldWrites{Store: tempBolt(t)}
	m := newTestMemory(t, st, func(o *Options) { o.StoreTimeout = time.Minute })
	frozenClock(m)
	if _, err := m.writeIncident(within(context.Background()), providerFailure(m, 0), "", true, nil); err != nil {
		t.Fatal(err)
	}
	st.hold()
	for n := 1; n <= AsyncLossBound; n++ {
		if !answeredEarly(t, m, n) {
			t.Fatalf("failure %d of %d waited for its commit while the store commits", n, AsyncLossBound)
		}
	}
	<-st.entered
	if answeredEarly(t, m, AsyncLossBound+1) {
		t.Fatalf("%d answers went out before their commit, want at most %d", AsyncLossBound+1, AsyncLossBound)
	}
	if pending, early := m.writer.uncommitted(); pending != AsyncLossBound+1 || early != AsyncLossBound {
		t.Fatalf("uncommitted: %d pending, %d answered; want %d and %d", pending, early, AsyncLossBound+1, AsyncLossBound)
	}
	close(st.release)
	m.writer.wait()
	if pending, early := m.writer.uncommitted(); pending != 0 || early != 0 {
		t.Fatalf("after the commit: %d pending, %d answered", pending, early)
	}
	incs, err := st.ListIncidents(context.Background(), store.IncidentQuery{Workspace: "default", Project: "default", Limit: store.MaxLimit})
	if err != nil || len(incs) != AsyncLossBound+2 {
		t.Fatalf("%d incidents stored (%v), want %d", len(incs), err, AsyncLossBound+2)
	}
}

// TestSyncAnswersAfterTheCommit: with durability sync, a provider
// failure's answer waits for its commit even while the store commits.
func TestSyncAnswersAfterTheCommit(t *testing.T) {
	m := newTestMemory(t, tempBolt(t), func(o *Options) { o.StoreTimeout = time.Minute; o.Durability = DurabilitySync })
	frozenClock(m)
	if _, err := m.writeIncident(within(context.Background()), providerFailure(m, 0), "", true, nil); err != nil {
		t.Fatal(err)
	}
	if answeredEarly(t, m, 1) {
		t.Fatal("with durability sync, an answer went out before its commit")
	}
	tn := tenant.Tenant{Workspace: "default", Project: "default"}
	if !m.Record(context.Background(), tn, "m", "up", store.TypeHTTPError, 429, "slow down") {
		t.Fatal("a committed failure was not recorded")
	}
	if pending, _ := m.writer.uncommitted(); pending != 0 {
		t.Fatalf("Record returned with %d incidents not committed", pending)
	}
}

func TestDurabilityIsValidated(t *testing.T) {
	g, _ := guard.New(guard.DefaultConfig())
	_, err := New(context.Background(), Options{Store: tempBolt(t), Guard: g, Durability: "eventually"}, nil)
	if err == nil || !strings.Contains(err.Error(), "Durability") {
		t.Fatalf("New with Durability eventually: %v", err)
	}
}

// TestCapturesKeepTheSolutionsCap: auto-captured solutions never make a
// workspace hold more than RetentionSolutionsMaxPerWorkspace, in the store
// or in the recall index, without waiting for retention.
func TestCapturesKeepTheSolutionsCap(t *testing.T) {
	st := tempBolt(t)
	m := newTestMemory(t, st, func(o *Options) { o.RetentionSolutionsMaxPerWorkspace = 3 })
	tn := tenant.Tenant{Workspace: "default", Project: "default"}
	for i := range 6 {
		goal := fmt.Sprintf("Rebuild shard %d of the search index", i)
		m.Capture(tn, &wire.Info{Key: goal, Goal: goal, Tools: []string{"reindex"}}, "Done.")
		m.captures.wait()
		sols, err := st.ListSolutions(context.Background(), "default")
		if want := min(i+1, 3); err != nil || len(sols) != want || m.Index().Len("default") != want {
			t.Fatalf("after %d captures: %d stored (%v), %d in the index; want %d", i+1, len(sols), err, m.Index().Len("default"), want)
		}
		if !strings.Contains(sols[0].Goal, fmt.Sprint("shard ", i)) {
			t.Fatalf("the latest capture is not kept: %+v", sols[0])
		}
	}
}

// within is a budget that is ctx.
func within(ctx context.Context) *storeBudget { return &storeBudget{parent: ctx, ctx: ctx} }
