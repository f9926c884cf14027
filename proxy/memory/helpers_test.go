package memory

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/bolt"
)

// tempBolt opens a real bbolt store in the test's temporary directory.
func tempBolt(t testing.TB) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "scarproxy.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newTestMemory builds a memory on st with the default guard, changed by
// opts; it is shut down (its queues stored) when the test ends.
func newTestMemory(t testing.TB, st store.Store, opts ...func(*Options)) *Memory {
	t.Helper()
	g, err := guard.New(guard.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Store: st, Guard: g}
	for _, f := range opts {
		f(&o)
	}
	m, err := New(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown(context.Background()) })
	return m
}

func ids(incs []store.Incident) []string {
	var out []string
	for _, in := range incs {
		out = append(out, in.ID)
	}
	return out
}
