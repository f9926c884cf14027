package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testIncidentBatches is the conformance suite's part for AddIncidents.
func testIncidentBatches(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()

	t.Run("batch stores in order and dedupes", func(t *testing.T) {
		s := open(t)
		mustAdd(t, s, &store.Incident{Time: Epoch, Workspace: "w", Project: "p", Message: "before"})
		if ok, err := s.AddIncidentOnce(ctx, &store.Incident{Time: Epoch, Workspace: "w", Project: "p", Message: "known"}, "k0"); !ok || err != nil {
			t.Fatalf("AddIncidentOnce = %v, %v", ok, err)
		}
		v0, err := s.IncidentVersion(ctx, "w", "p")
		if err != nil {
			t.Fatal(err)
		}
		at := Epoch.Add(time.Minute)
		batch := []store.IncidentWrite{
			{Incident: &store.Incident{Time: at, Workspace: "w", Project: "p", Session: "s", Message: "a"}},
			{Incident: &store.Incident{Time: at, Workspace: "w", Project: "p", Message: "b"}, DedupeKey: "k1"},
			{Incident: &store.Incident{Time: at, Workspace: "w", Project: "p", Message: "dup"}, DedupeKey: "k1"},
			{Incident: &store.Incident{Time: at, Workspace: "w", Project: "p", Message: "known again"}, DedupeKey: "k0"},
			{Incident: &store.Incident{Time: at, Workspace: "w", Project: "q", Message: "other\x00tenant"}},
			{Incident: &store.Incident{Workspace: "w", Project: "p", Message: "c"}},
		}
		steps, err := s.AddIncidents(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		var stored []bool
		for _, w := range batch {
			stored = append(stored, w.Stored)
			if w.Stored && (len(w.Incident.ID) != 26 || w.Incident.Time.IsZero()) {
				t.Fatalf("stored without ID or Time: %+v", w.Incident)
			}
		}
		if want := []bool{true, true, false, false, true, true}; !reflect.DeepEqual(stored, want) {
			t.Fatalf("stored %v, want %v", stored, want)
		}
		if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"})); got != "c,b,a,known,before" {
			t.Fatalf("listed %q", got)
		}
		got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "q"})
		if len(got) != 1 || !reflect.DeepEqual(got[0], *batch[4].Incident) {
			t.Fatalf("listed %+v, want the record AddIncidents returned, %+v", got, *batch[4].Incident)
		}
		v1, _ := s.IncidentVersion(ctx, "w", "p")
		vq, _ := s.IncidentVersion(ctx, "w", "q")
		if len(steps) != 2 || steps[0] != (store.VersionStep{Workspace: "w", Project: "p", From: v0, To: v1}) || steps[1].Workspace != "w" || steps[1].Project != "q" || steps[1].To != vq || v1 == v0 {
			t.Fatalf("steps %+v; versions p %d -> %d, q %d", steps, v0, v1, vq)
		}
		// A batch that stores nothing moves no version.
		steps, err = s.AddIncidents(ctx, []store.IncidentWrite{{Incident: &store.Incident{Workspace: "w", Project: "p"}, DedupeKey: "k1"}})
		if v, _ := s.IncidentVersion(ctx, "w", "p"); err != nil || len(steps) != 0 || v != v1 {
			t.Fatalf("AddIncidents of a known key: steps %+v, %v; version %d -> %d", steps, err, v1, v)
		}
	})

	t.Run("runs of incidents keep batch order and every field", func(t *testing.T) {
		s := open(t)
		at := Epoch.Add(time.Hour)
		var batch []store.IncidentWrite
		for i, m := range []string{"p1", "p2", "d", "p3", "p4"} {
			in := &store.Incident{Time: at, Workspace: "w", Project: "p", Session: "s" + m, Agent: "agent", Provider: "prov",
				Model: "m", Type: store.TypeHTTPError, StatusCode: 500 + i, Code: "E" + m, Message: "msg " + m, Fingerprint: "fp" + m}
			w := store.IncidentWrite{Incident: in}
			if m == "d" {
				w.DedupeKey = "kd"
			}
			batch = append(batch, w)
		}
		if _, err := s.AddIncidents(ctx, batch); err != nil {
			t.Fatal(err)
		}
		got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"})
		if len(got) != len(batch) {
			t.Fatalf("listed %d incidents, want %d", len(got), len(batch))
		}
		for i, in := range got {
			if want := *batch[len(batch)-1-i].Incident; !reflect.DeepEqual(in, want) {
				t.Fatalf("listed #%d %+v, want %+v", i, in, want)
			}
		}
	})

	t.Run("invalid batch stores nothing", func(t *testing.T) {
		s := open(t)
		_, err := s.AddIncidents(ctx, []store.IncidentWrite{
			{Incident: &store.Incident{Workspace: "w", Project: "p", Message: "fine"}},
			{Incident: &store.Incident{Workspace: "w", Message: "no project"}},
		})
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"}); len(got) != 0 {
			t.Fatalf("stored %d incidents of an invalid batch", len(got))
		}
	})

	t.Run("prepared incidents read back the same", func(t *testing.T) {
		s := open(t)
		inc := store.Incident{Time: Epoch.Add(1234 * time.Nanosecond), Workspace: "w", Project: "p", Message: "bad \xff byte"}
		if err := store.PrepareIncident(&inc, time.Time{}); err != nil {
			t.Fatal(err)
		}
		prepared := inc
		if _, err := s.AddIncidents(ctx, []store.IncidentWrite{{Incident: &inc}}); err != nil {
			t.Fatal(err)
		}
		got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"})
		if len(got) != 1 || !reflect.DeepEqual(got[0], prepared) || !reflect.DeepEqual(inc, prepared) {
			t.Fatalf("read back %+v, stored %+v; prepared %+v", got, inc, prepared)
		}
	})

	// Batches written at once by many writers: every incident is stored
	// once, and the steps of each tenant form one chain from its first
	// version to its last, so a reader that applies them in chain order
	// holds exactly what a full read returns.
	t.Run("concurrent batches chain their steps", func(t *testing.T) {
		s := open(t)
		const writers, batches, size = 6, 10, 7
		tenants := []string{"p", "q"}
		start := map[string]int64{}
		for _, p := range tenants {
			v, err := s.IncidentVersion(ctx, "w", p)
			if err != nil {
				t.Fatal(err)
			}
			start[p] = v
		}
		var mu sync.Mutex
		type applied struct {
			step store.VersionStep
			incs []store.Incident
		}
		var all []applied
		var once int
		errs := make(chan error, writers*batches)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for b := range batches {
					var batch []store.IncidentWrite
					for i := range size {
						p := tenants[(w+b+i)%2]
						inc := &store.Incident{Workspace: "w", Project: p, Session: fmt.Sprint("s", i%3), Type: store.TypeHTTPError,
							Message: fmt.Sprint(w, "/", b, "/", i)}
						var key string
						if i == 0 {
							key = fmt.Sprint("k", b) // every writer tries the same keys
						}
						batch = append(batch, store.IncidentWrite{Incident: inc, DedupeKey: key})
					}
					steps, err := s.AddIncidents(ctx, batch)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for _, st := range steps {
						a := applied{step: st}
						for _, bw := range batch {
							if bw.Stored && bw.Incident.Project == st.Project {
								a.incs = append(a.incs, *bw.Incident)
							}
						}
						all = append(all, a)
					}
					for _, bw := range batch {
						if bw.Stored && bw.DedupeKey != "" {
							once++
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if once != len(tenants)*batches {
			// Each key k<b> is tried in both tenants: stored once in each.
			t.Fatalf("deduped incidents stored %d times, want %d", once, len(tenants)*batches)
		}
		for _, p := range tenants {
			byFrom := map[int64]applied{}
			for _, a := range all {
				if a.step.Project != p {
					continue
				}
				if _, dup := byFrom[a.step.From]; dup {
					t.Fatalf("tenant %s: two steps from version %d", p, a.step.From)
				}
				byFrom[a.step.From] = a
			}
			v := start[p]
			var held []store.Incident
			for n := 0; n < len(byFrom); n++ {
				a, ok := byFrom[v]
				if !ok {
					t.Fatalf("tenant %s: the chain stops at version %d after %d of %d steps", p, v, n, len(byFrom))
				}
				held = append(held, a.incs...)
				v = a.step.To
			}
			if last, _ := s.IncidentVersion(ctx, "w", p); last != v {
				t.Fatalf("tenant %s: the chain ends at %d, the store is at %d", p, v, last)
			}
			got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: p, Limit: store.MaxLimit})
			ids := func(incs []store.Incident) []string {
				out := make([]string, len(incs))
				for i, in := range incs {
					out[i] = in.ID
				}
				sort.Strings(out)
				return out
			}
			if !reflect.DeepEqual(ids(held), ids(got)) {
				t.Fatalf("tenant %s: the steps hold %d incidents, a full read %d", p, len(held), len(got))
			}
		}
	})

	// AddIncident, AddIncidentOnce and AddIncidents at once: none waits
	// for ever on another (a lock order), and each stores what it says.
	t.Run("batches with single writers", func(t *testing.T) {
		s := open(t)
		const writers, each = 4, 15
		var wg sync.WaitGroup
		errs := make(chan error, writers*each*3)
		var mu sync.Mutex
		onceStored := 0
		for range writers {
			wg.Go(func() {
				for i := range each {
					if err := s.AddIncident(ctx, &store.Incident{Workspace: "w", Project: "p", Message: "single"}); err != nil {
						errs <- err
					}
					ok, err := s.AddIncidentOnce(ctx, &store.Incident{Workspace: "w", Project: "p", Message: "once"}, fmt.Sprint("k", i))
					if err != nil {
						errs <- err
					}
					batch := []store.IncidentWrite{
						{Incident: &store.Incident{Workspace: "w", Project: "p", Message: "batch"}},
						{Incident: &store.Incident{Workspace: "w", Project: "p", Message: "once"}, DedupeKey: fmt.Sprint("k", each-1-i)},
					}
					if _, err := s.AddIncidents(ctx, batch); err != nil {
						errs <- err
					}
					mu.Lock()
					if ok {
						onceStored++
					}
					if batch[1].Stored {
						onceStored++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Limit: store.MaxLimit})
		if len(got) != 2*writers*each+each || onceStored != each {
			t.Fatalf("%d incidents, %d deduped stored; want %d and %d", len(got), onceStored, 2*writers*each+each, each)
		}
	})
}

// testBatchSessions: incidents stored in batches are read by conversation
// (ListIncidents, SearchIncidents page by page, Since, Until) as they are
// stored, after their tenant is deleted and filled again at the same
// times, and after a reopen.
func testBatchSessions(t *testing.T, open Opener) {
	t.Run("batches read by conversation", func(t *testing.T) { batchSessions(t, open) })
}

func batchSessions(t *testing.T, open Opener) {
	ctx := context.Background()
	s, reopen := open(t)
	const sessions, batches, size = 3, 12, 10
	at := Epoch.Add(2 * time.Hour)
	add := func(s store.Store, prefix string) {
		t.Helper()
		for b := range batches {
			batch := make([]store.IncidentWrite, size)
			for i := range batch {
				m := b*size + i
				batch[i].Incident = &store.Incident{Time: at.Add(time.Duration(m) * time.Second), Workspace: "w", Project: "p",
					Session: fmt.Sprintf("s%d", m%sessions), Type: store.TypeHTTPError, StatusCode: 429, Message: fmt.Sprintf("%s%d", prefix, m)}
			}
			if _, err := s.AddIncidents(ctx, batch); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := func(prefix string, k int, from, to int) string {
		var m []string
		for i := to - 1; i >= from; i-- {
			if i%sessions == k {
				m = append(m, fmt.Sprintf("%s%d", prefix, i))
			}
		}
		return strings.Join(m, ",")
	}
	check := func(s store.Store, stage, prefix string) {
		t.Helper()
		for k := range sessions {
			session := fmt.Sprintf("s%d", k)
			if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Session: session, Limit: store.MaxLimit})); got != want(prefix, k, 0, batches*size) {
				t.Fatalf("%s: ListIncidents(%s) = %s", stage, session, got)
			}
			since := at.Add(60 * time.Second)
			if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Session: session, Since: since, Limit: store.MaxLimit})); got != want(prefix, k, 60, batches*size) {
				t.Fatalf("%s: ListIncidents(%s, since the 60th) = %s", stage, session, got)
			}
			var paged []store.Incident
			f := store.IncidentFilter{Workspace: "w", Project: "p", Session: session, Until: at.Add(90 * time.Second), Limit: 7}
			for {
				page, err := s.SearchIncidents(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				paged = append(paged, page.Incidents...)
				if page.Next == "" {
					break
				}
				f.Cursor = page.Next
			}
			if got := Messages(paged); got != want(prefix, k, 0, 90) {
				t.Fatalf("%s: SearchIncidents(%s, until the 90th) page by page = %s", stage, session, got)
			}
		}
	}
	add(s, "m")
	check(s, "as stored", "m")
	if _, err := s.DeleteIncidents(ctx, "w", "p"); err != nil {
		t.Fatal(err)
	}
	add(s, "n")
	check(s, "deleted and stored again", "n")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t)
	check(s, "after a reopen", "n")
}
