package bolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/stored"
	"github.com/scarproxy/scarproxy/store/storetest"
	"go.etcd.io/bbolt"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// openTestBolt opens a bbolt store in a fresh file, closed at the end of
// the test, and returns how to reopen it.
func openTestBolt(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "scarproxy.db")
	clock := storetest.TickClock(storetest.ClockEpoch, time.Millisecond)
	open := func(t *testing.T) store.Store {
		t.Helper()
		b, err := Open(path, Options{Now: clock})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	return open(t), open
}

// TestBolt runs the conformance suite on bbolt files.
func TestBolt(t *testing.T) {
	storetest.Run(t, openTestBolt)
}

func TestOpenLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scarproxy.db")
	first, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := Open(path, Options{})
	if err == nil {
		second.Close()
		t.Fatal("second Open of a file in use succeeded")
	}
	if !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("error %q does not say the file is locked", err)
	}
}

func TestOpenBadPath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
	}{
		{"parent is a file", filepath.Join(file, "scarproxy.db")},
		{"not a bbolt file", file},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(tt.path, Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.HasPrefix(err.Error(), "store: open bolt") {
				t.Fatalf("error %q lacks context", err)
			}
		})
	}
}

// TestBoltRetentionIndexOfOldFiles: a file written before solutions had a
// retention index (u) and a count (n) gets both when opened, so pruning
// finds its solutions.
func TestBoltRetentionIndexOfOldFiles(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "scarproxy.db")
	b, err := Open(path, Options{Now: storetest.TickClock(storetest.ClockEpoch, time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	var sols []store.Solution
	for i, verified := range []bool{false, true, false, false} {
		sol := store.Solution{Workspace: "w", Key: fmt.Sprint("k", i), Goal: "g", Verified: verified}
		if err := b.PutSolution(ctx, &sol); err != nil {
			t.Fatal(err)
		}
		sols = append(sols, sol)
	}
	// Back to the old layout.
	err = b.db.Update(func(tx *bbolt.Tx) error {
		ws := tx.Bucket(bktSolutions).Bucket([]byte("w"))
		if err := ws.DeleteBucket(bktSolByUpd); err != nil {
			return err
		}
		return ws.Delete(keyCount)
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()

	b, err = Open(path, Options{Now: storetest.TickClock(storetest.ClockEpoch.Add(time.Hour), time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Age: k0 and k2 are old and unverified; k1 is verified. Then a cap
	// of 1 keeps the verified one.
	n, err := b.PruneSolutions(ctx, sols[3].Updated, 0)
	if err != nil || n != 2 {
		t.Fatalf("PruneSolutions by age = %d, %v; want 2", n, err)
	}
	n, err = b.PruneSolutions(ctx, time.Time{}, 1)
	if err != nil || n != 1 {
		t.Fatalf("PruneSolutions by cap = %d, %v; want 1", n, err)
	}
	list, err := b.ListSolutions(ctx, "w")
	if err != nil || len(list) != 1 || list[0].ID != sols[1].ID {
		t.Fatalf("left %+v, %v; want the verified solution", list, err)
	}
}

func TestFeedEntry(t *testing.T) {
	tests := []struct {
		name          string
		deleted       bool
		workspace, id string
	}{
		{"live", false, "w", "id1"},
		{"deleted", true, "workspace with spaces", "0123456789abcdef0123456789"},
		{"empty id", false, "w", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, w, id, err := parseFeedEntry(feedEntry(tt.deleted, tt.workspace, tt.id))
			if err != nil || d != tt.deleted || w != tt.workspace || id != tt.id {
				t.Fatalf("got %v %q %q %v", d, w, id, err)
			}
		})
	}
	for _, bad := range [][]byte{nil, {2}, {0, 5, 'a'}} {
		if _, _, _, err := parseFeedEntry(bad); err != errCorrupt {
			t.Fatalf("parseFeedEntry(%x) err = %v, want errCorrupt", bad, err)
		}
	}
}

// TestBoltTimeKeyOrder checks that time keys sort by time, before 1970
// included.
func TestBoltTimeKeyOrder(t *testing.T) {
	times := []time.Time{
		time.Date(1800, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(-1, 0),
		time.Unix(0, 0),
		time.Unix(0, 1000),
		time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	keys := make([]string, len(times))
	for i, tm := range times {
		keys[i] = string(timeKey(tm))
	}
	if !sort.StringsAreSorted(keys) {
		t.Fatalf("time keys do not sort by time: %x", keys)
	}
}

// benchDir holds the 1M-incident file, built once per test binary run.
var (
	benchDir  string
	benchOnce sync.Once
	benchPath string
	benchErr  error
)

// boltBenchFile builds (once) a bbolt file whose tenant bench/p holds
// storetest.BenchIncidents incidents, plus a small neighbour tenant.
func boltBenchFile(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "scarproxy-bench-")
		if benchErr != nil {
			return
		}
		benchPath = filepath.Join(benchDir, "bench.db")
		s, err := Open(benchPath, Options{})
		if err != nil {
			benchErr = err
			return
		}
		defer s.Close()
		s.db.NoSync = true
		const batch = 100_000
		for start := 0; start < storetest.BenchIncidents; start += batch {
			err := s.db.Update(func(tx *bbolt.Tx) error {
				t, err := createTenant(tx, "bench", "p")
				if err != nil {
					return err
				}
				for i := start; i < start+batch; i++ {
					age := storetest.BenchIncidents - 1 - i
					ts := storetest.BenchNewest.Add(-time.Duration(age) * time.Second)
					inc := store.Incident{ID: stored.NewID(ts), Time: ts, Workspace: "bench", Project: "p",
						Session: fmt.Sprintf("session-%02d", i%storetest.BenchSessions), Agent: "agent-1",
						Provider: "openai", Model: "gpt-4o-mini", Type: store.TypeToolError,
						Message:     "exit status 1: go test ./... failed: undefined: foo (compile error)",
						Fingerprint: "tool:go_test:undefined"}
					k, err := t.put(&inc)
					if err != nil {
						return err
					}
					if err := t.index(inc.Session, k); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				benchErr = err
				return
			}
		}
		for i := range 1000 {
			ctx := context.Background()
			if err := s.AddIncident(ctx, &store.Incident{Time: storetest.BenchNewest, Workspace: "bench", Project: "other", Message: fmt.Sprint(i)}); err != nil {
				benchErr = err
				return
			}
		}
		s.db.NoSync = false
	})
	if benchErr != nil {
		b.Fatalf("build benchmark file: %v", benchErr)
	}
	return benchPath
}

// BenchmarkListIncidents lists from a tenant holding 1M incidents (one per
// second; 100 sessions), as the proxy does on every chat completion.
func BenchmarkListIncidents(b *testing.B) {
	path := boltBenchFile(b)
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkList(b, s)
}
