package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/storetest"
	"go.etcd.io/bbolt"
)

// behindBatch is n incidents spread over sessions s0..s(sessions-1), with
// messages numbered from first.
func behindBatch(first, n, sessions int) []store.IncidentWrite {
	batch := make([]store.IncidentWrite, n)
	for i := range batch {
		m := first + i
		batch[i].Incident = &store.Incident{Workspace: "w", Project: "p", Session: fmt.Sprintf("s%d", m%sessions),
			Provider: "openai", Type: store.TypeHTTPError, StatusCode: 429, Message: fmt.Sprint(m)}
	}
	return batch
}

// addBehind stores messages first..first+n-1 over sessions in one batch
// and returns first+n.
func addBehind(t testing.TB, s *Store, first, n, sessions int) int {
	t.Helper()
	if _, err := s.AddIncidents(context.Background(), behindBatch(first, n, sessions)); err != nil {
		t.Fatal(err)
	}
	return first + n
}

func openBehind(t *testing.T, path string, clock func() time.Time) *Store {
	t.Helper()
	s, err := Open(path, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sessionMessages lists the session's incidents through both readers and
// checks they agree; it returns their messages, newest first.
func sessionMessages(t *testing.T, s *Store, session string) []string {
	t.Helper()
	ctx := context.Background()
	incs, err := s.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p", Session: session, Limit: store.MaxLimit})
	if err != nil {
		t.Fatalf("ListIncidents(%s): %v", session, err)
	}
	var got []string
	for _, inc := range incs {
		if inc.Session != session {
			t.Fatalf("ListIncidents(%s) returned an incident of %s", session, inc.Session)
		}
		got = append(got, inc.Message)
	}
	var paged []string
	f := store.IncidentFilter{Workspace: "w", Project: "p", Session: session, Limit: 7}
	for {
		page, err := s.SearchIncidents(ctx, f)
		if err != nil {
			t.Fatalf("SearchIncidents(%s): %v", session, err)
		}
		for _, inc := range page.Incidents {
			paged = append(paged, inc.Message)
		}
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	if !slices.Equal(got, paged) {
		t.Fatalf("session %s: ListIncidents %v, SearchIncidents page by page %v", session, got, paged)
	}
	return got
}

// wantMessages is what sessionMessages should return for session k of
// sessions after messages 0..n-1: the session's, newest first.
func wantMessages(n, sessions, k int) []string {
	var want []string
	for m := n - 1; m >= 0; m-- {
		if m%sessions == k {
			want = append(want, fmt.Sprint(m))
		}
	}
	return want
}

// checkSessions checks every session's incidents after messages
// 0..n-1 over sessions.
func checkSessions(t *testing.T, s *Store, n, sessions int, stage string) {
	t.Helper()
	for k := range sessions {
		if got, want := sessionMessages(t, s, fmt.Sprintf("s%d", k)), wantMessages(n, sessions, k); !slices.Equal(got, want) {
			t.Fatalf("%s: session s%d: got %v, want %v", stage, k, got, want)
		}
	}
}

// reopenChecked opens the file at path again and checks that its session
// index holds all n entries on disk, nothing noted behind, and every
// session's incidents. The caller closes the store.
func reopenChecked(t *testing.T, path string, clock func() time.Time, n, sessions int, stage string) *Store {
	t.Helper()
	s := openBehind(t, path, clock)
	if on, noted := indexed(t, s); on != n || noted {
		s.Close()
		t.Fatalf("%s: %d entries on disk (want %d), noted %v", stage, on, n, noted)
	}
	checkSessions(t, s, n, sessions, stage)
	return s
}

// indexed counts the session index's entries on disk and reports whether
// a tenant still notes entries behind.
func indexed(t *testing.T, s *Store) (n int, noted bool) {
	t.Helper()
	err := s.db.View(func(tx *bbolt.Tx) error {
		tn := openTenant(tx, "w", "p")
		if tn == nil {
			return nil
		}
		n = tn.s.Stats().KeyN
		noted = tn.b.Get(keyBehind) != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, noted
}

// TestBehindReadsMerge: entries waiting, written, and both at once (a
// written entry still held in memory) read as one index, through a limit
// and pages that cross from one to the other.
func TestBehindReadsMerge(t *testing.T) {
	s := openBehind(t, filepath.Join(t.TempDir(), "s.db"), storetest.TickClock(storetest.ClockEpoch, time.Millisecond))
	defer s.Close()
	const sessions = 3
	n := 0
	n = addBehind(t, s, n, 20, sessions)
	if on, _ := indexed(t, s); on != 0 {
		t.Fatalf("%d entries written before any flush", on)
	}
	checkSessions(t, s, n, sessions, "all waiting")

	// Write what waits as a flush would, and keep it in memory too.
	err := s.db.Update(func(tx *bbolt.Tx) error {
		_, err := s.writeBehind(tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if on, noted := indexed(t, s); on != 20 || noted {
		t.Fatalf("after writing: %d entries on disk, behind noted %v; want 20, false", on, noted)
	}
	checkSessions(t, s, n, sessions, "written and still held")
	s.behind.drop(s.behind.seq, storetest.ClockEpoch)
	n = addBehind(t, s, n, 11, sessions)
	checkSessions(t, s, n, sessions, "half written, half waiting")
}

// TestBehindFlushes: once sessionBehindMax entries wait the next batch
// writes them all; so does Close; the age rule writes what waits for a
// second.
func TestBehindFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	now := storetest.ClockEpoch
	clock := func() time.Time { return now }
	s := openBehind(t, path, clock)
	const sessions = 32
	n := 0
	for n < sessionBehindMax {
		n = addBehind(t, s, n, 40, sessions)
	}
	if on, noted := indexed(t, s); on != 0 || !noted {
		t.Fatalf("before the flush: %d entries on disk, noted %v; want 0, true", on, noted)
	}
	n = addBehind(t, s, n, 40, sessions)
	if on, noted := indexed(t, s); on != n || noted || s.behind.n != 0 {
		t.Fatalf("after the flush: %d entries on disk (want %d), noted %v, %d waiting", on, n, noted, s.behind.n)
	}

	n = addBehind(t, s, n, 5, sessions)
	now = now.Add(sessionBehindAge)
	n = addBehind(t, s, n, 5, sessions)
	if on, _ := indexed(t, s); on != n {
		t.Fatalf("after a second: %d entries on disk, want %d", on, n)
	}

	n = addBehind(t, s, n, 7, sessions)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reopenChecked(t, path, clock, n, sessions, "after Close").Close()
}

// TestBehindCrash: a process that dies with entries waiting loses none of
// them: Open writes them from the incidents.
func TestBehindCrash(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	clock := storetest.TickClock(storetest.ClockEpoch, time.Millisecond)
	s := openBehind(t, path, clock)
	const sessions = 4
	// Written first: a flush, then more waiting, and one incident stored
	// alone (indexed at once) in between.
	n := 0
	for range 30 {
		n = addBehind(t, s, n, 40, sessions)
	}
	single := store.Incident{Workspace: "w", Project: "p", Session: "s0", Type: store.TypeHTTPError, Message: fmt.Sprint(n)}
	if err := s.AddIncident(ctx, &single); err != nil {
		t.Fatal(err)
	}
	n++
	n = addBehind(t, s, n, 9, sessions)
	if s.behind.n == 0 {
		t.Fatal("nothing waits: the test does not test a crash with entries behind")
	}
	// The crash: the file is closed without what waits.
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	reopenChecked(t, path, clock, n, sessions, "after the crash").Close()
}

// TestBehindCrashCorrupt: a malformed record among those whose entries
// waited gets none after a crash, and the file still opens with the
// others' entries written.
func TestBehindCrashCorrupt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	clock := storetest.TickClock(storetest.ClockEpoch, time.Millisecond)
	s := openBehind(t, path, clock)
	addBehind(t, s, 0, 6, 2)
	err := s.db.Update(func(tx *bbolt.Tx) error {
		k, _ := openTenant(tx, "w", "p").i.Cursor().Last() // message 5, of s1
		return openTenant(tx, "w", "p").i.Put(bytes.Clone(k), []byte{9, 9})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBehind(t, path, clock)
	defer s.Close()
	if on, noted := indexed(t, s); on != 5 || noted {
		t.Fatalf("after the crash: %d entries on disk, noted %v; want 5, false", on, noted)
	}
	if got := sessionMessages(t, s, "s0"); !slices.Equal(got, []string{"4", "2", "0"}) {
		t.Fatalf("s0 lists %v", got)
	}
}

// TestBehindPruned: retention removing incidents whose entries wait, and
// their tenant, leaves no entry to a removed incident nor to another
// incident at its key.
func TestBehindPruned(t *testing.T) {
	ctx := context.Background()
	now := storetest.ClockEpoch
	clock := func() time.Time { now = now.Add(time.Millisecond); return now }
	s := openBehind(t, filepath.Join(t.TempDir(), "s.db"), clock)
	defer s.Close()
	addBehind(t, s, 0, 10, 2)
	// The oldest six go.
	if n, err := s.PruneIncidents(ctx, storetest.ClockEpoch.Add(6*time.Millisecond+time.Microsecond), 0); err != nil || n != 6 {
		t.Fatalf("PruneIncidents = %d, %v; want 6", n, err)
	}
	if got, want := sessionMessages(t, s, "s0"), []string{"8", "6"}; !slices.Equal(got, want) {
		t.Fatalf("after pruning: s0 %v, want %v", got, want)
	}
	// All go, and the tenant with them; new incidents then take keys
	// of the same sequence.
	if _, err := s.PruneIncidents(ctx, now.Add(time.Second), 0); err != nil {
		t.Fatal(err)
	}
	now = storetest.ClockEpoch // the same times, so the same keys
	if _, err := s.AddIncidents(ctx, []store.IncidentWrite{{Incident: &store.Incident{Workspace: "w", Project: "p", Session: "other", Type: store.TypeHTTPError, Message: "new"}}}); err != nil {
		t.Fatal(err)
	}
	for _, session := range []string{"s0", "s1"} {
		if got := sessionMessages(t, s, session); len(got) != 0 {
			t.Fatalf("after pruning all: %s lists %v", session, got)
		}
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		_, err := s.writeBehind(tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if on, _ := indexed(t, s); on != 1 {
		t.Fatalf("after writing what waits: %d entries on disk, want 1 (the new incident's)", on)
	}
	if got := sessionMessages(t, s, "other"); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("other: %v", got)
	}
}

// TestBehindDrop: a flush drops what its snapshot held, not what came
// after it, which is then dated from the flush; a key that waits twice
// is read once.
func TestBehindDrop(t *testing.T) {
	var w behind
	now := storetest.ClockEpoch
	tenant := tenantKey("w", "p")
	w.add(tenant, "s0", []byte("k1"), now)
	w.add(tenant, "s1", []byte("k2"), now)
	w.add(tenant, "s0", []byte("k1"), now)
	if got := w.keys(tenant, "s0"); len(got) != 1 || string(got[0]) != "k1" {
		t.Fatalf("s0 waits %q, want [k1] once", got)
	}
	upto, lists := w.snapshot()
	if len(lists) != 2 {
		t.Fatalf("snapshot holds %d lists, want 2", len(lists))
	}
	w.add(tenant, "s1", []byte("k5"), now)
	later := now.Add(time.Minute)
	w.drop(upto, later)
	if got := w.keys(tenant, "s1"); len(got) != 1 || string(got[0]) != "k5" || w.n != 1 || len(w.keys(tenant, "s0")) != 0 {
		t.Fatalf("after the flush: s1 %q, %d waiting; want [k5], 1", got, w.n)
	}
	if w.due(later.Add(sessionBehindAge/2)) || !w.due(later.Add(sessionBehindAge)) {
		t.Fatal("what is left after a flush is not dated from it")
	}
	w.drop(w.seq, later)
	if w.n != 0 || len(w.lists) != 0 || !w.first.IsZero() {
		t.Fatalf("after the last flush: %d waiting, %d lists, first %v", w.n, len(w.lists), w.first)
	}
}

// TestBehindKeyAgain: a tenant deleted and created again restarts its
// sequence, so an incident of the same session at the same time takes the
// key of one whose entry still waits: it is read once.
func TestBehindKeyAgain(t *testing.T) {
	ctx := context.Background()
	s := openBehind(t, filepath.Join(t.TempDir(), "s.db"), storetest.TickClock(storetest.ClockEpoch, time.Millisecond))
	defer s.Close()
	add := func(msg string) {
		t.Helper()
		in := &store.Incident{Time: storetest.Epoch, Workspace: "w", Project: "p", Session: "s0", Type: store.TypeHTTPError, Message: msg}
		if _, err := s.AddIncidents(ctx, []store.IncidentWrite{{Incident: in}}); err != nil {
			t.Fatal(err)
		}
	}
	add("old")
	if _, err := s.DeleteIncidents(ctx, "w", "p"); err != nil {
		t.Fatal(err)
	}
	add("new")
	if got := sessionMessages(t, s, "s0"); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("s0 lists %v, want [new]", got)
	}
}

// TestBehindSessionTooLong: a session the index cannot hold fails its
// batch, as it did when the entry was written with the incident, and
// leaves nothing waiting that later writes, Close or Open would trip on.
func TestBehindSessionTooLong(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s := openBehind(t, path, nil)
	long := strings.Repeat("x", bbolt.MaxKeySize)
	_, err := s.AddIncidents(ctx, []store.IncidentWrite{{Incident: &store.Incident{Workspace: "w", Project: "p", Session: long, Type: store.TypeHTTPError}}})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("AddIncidents with a %d-byte session: %v, want ErrInvalid", len(long), err)
	}
	if s.behind.n != 0 {
		t.Fatalf("%d entries wait after the refused batch", s.behind.n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openBehind(t, path, nil)
	defer s.Close()
	addBehind(t, s, 0, 3, 1)
}

// TestBehindConcurrent: batches and readers at once (run with -race):
// every read is one session's, newest first, without repeats, and the
// last read is whole.
func TestBehindConcurrent(t *testing.T) {
	ctx := context.Background()
	s := openBehind(t, filepath.Join(t.TempDir(), "s.db"), nil)
	defer s.Close()
	const sessions, writers, batches, size = 5, 4, 40, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if _, err := s.AddIncidents(ctx, behindBatch((w*batches+b)*size, size, sessions)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 2 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			session := fmt.Sprintf("s%d", r)
			for {
				select {
				case <-done:
					return
				default:
				}
				incs, err := s.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p", Session: session, Limit: store.MaxLimit})
				if err != nil {
					errs <- err
					return
				}
				seen := map[string]bool{}
				for i, inc := range incs {
					if inc.Session != session || seen[inc.ID] || i > 0 && incs[i-1].Time.Before(inc.Time) {
						errs <- fmt.Errorf("read %d of %s: %+v", i, session, inc)
						return
					}
					seen[inc.ID] = true
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := writers * batches * size
	for k := range sessions {
		got := sessionMessages(t, s, fmt.Sprintf("s%d", k))
		if len(got) != total/sessions {
			t.Fatalf("session s%d: %d incidents, want %d", k, len(got), total/sessions)
		}
	}
}

// BenchmarkAddIncidents stores batches of 40 provider failures, as the
// incident writer does in a storm, spread over one conversation or 32,
// into a file that already holds 120,000: the pages each commit writes
// and the time per incident, fsync included.
func BenchmarkAddIncidents(b *testing.B) {
	for _, sessions := range []int{1, 32} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "s.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.db.NoSync = true
			for i := range 3000 {
				addBehind(b, s, i*40, 40, sessions)
			}
			s.db.NoSync = false
			before := s.db.Stats()
			for i := 0; b.Loop(); i++ {
				addBehind(b, s, i*40, 40, sessions)
			}
			after := s.db.Stats()
			b.ReportMetric(float64(after.TxStats.GetWrite()-before.TxStats.GetWrite())/float64(b.N), "pages/commit")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*40), "ns/incident")
		})
	}
}
