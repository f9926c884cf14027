package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// waitingStore is a store whose incident version, or window read, waits
// for its context to end: a store that hangs. A call without a deadline
// fails at once (it would wait for ever).
type waitingStore struct {
	store.Store
	version, list bool
}

var errNoDeadline = errors.New("a store call without a deadline")

func wait(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		return errNoDeadline
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *waitingStore) IncidentVersion(ctx context.Context, workspace, project string) (int64, error) {
	if s.version {
		return 0, wait(ctx)
	}
	return s.Store.IncidentVersion(ctx, workspace, project)
}

func (s *waitingStore) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	if s.list {
		return nil, wait(ctx)
	}
	return s.Store.ListIncidents(ctx, q)
}

// memoryVersions is a waitingStore that says its versions are in memory.
type memoryVersions struct{ *waitingStore }

func (memoryVersions) VersionsInMemory() bool { return true }

// Early's store calls end within StoreTimeout whether or not the store
// keeps its versions in memory: a version read of a store that does not
// gets the budget's deadline, and so does the window read of one that
// does.
func TestEarlyWithinStoreTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		st    func(store.Store) store.Store
		quick bool
	}{
		{"version read", func(b store.Store) store.Store { return &waitingStore{Store: b, version: true} }, false},
		{"window read", func(b store.Store) store.Store { return &waitingStore{Store: b, list: true} }, false},
		{"window read, versions in memory", func(b store.Store) store.Store {
			return memoryVersions{&waitingStore{Store: b, list: true}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestMemory(t, tc.st(tempBolt(t)), func(o *Options) { o.StoreTimeout = 50 * time.Millisecond })
			if m.quickVersions != tc.quick {
				t.Fatalf("quickVersions = %v, want %v", m.quickVersions, tc.quick)
			}
			e := m.Early(context.Background(), "w", "p", time.Now())
			if !errors.Is(e.err, context.DeadlineExceeded) {
				t.Fatalf("Early: err %v, want the store budget's deadline", e.err)
			}
		})
	}
	if m := newTestMemory(t, tempBolt(t)); !m.quickVersions {
		t.Error("a bbolt store's versions are in memory, but the memory does not know it")
	}
}

// A request's window read from a store whose versions are in memory
// starts no budget when the window is this replica's: nothing waits.
func TestEarlyStartsNoBudgetForAKnownWindow(t *testing.T) {
	m := newTestMemory(t, tempBolt(t))
	ctx := context.Background()
	now := time.Now()
	if e := m.Early(ctx, "w", "p", now); e.err != nil {
		t.Fatal(e.err)
	}
	b := storeBudget{parent: ctx, d: time.Second}
	if _, _, err := m.requestWindow(&b, "w", "p", now); err != nil {
		t.Fatal(err)
	}
	if b.ctx != nil {
		t.Error("the window this replica keeps was read with a budget of its own (a timer per request)")
	}
	b.end()
}
