package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testVersions checks that a tenant's incident version moves with every
// change of its incidents and fixes, and only then.
func testVersions(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()

	t.Run("incident version follows the tenant's changes", func(t *testing.T) {
		s := open(t)
		vw := versionWatch{t, s}
		ver, changed, same := vw.ver, vw.changed, vw.same
		v := ver("w", "p")
		same("read only", v)
		old := store.Incident{Time: Epoch.Add(-48 * time.Hour), Workspace: "w", Project: "p", Type: "x", Message: "old"}
		mustAdd(t, s, &old)
		v = changed("add", v)
		if _, err := s.AddIncidentOnce(ctx, &store.Incident{Time: Epoch, Workspace: "w", Project: "p", Type: "x", Message: "m"}, "k1"); err != nil {
			t.Fatal(err)
		}
		v = changed("add once", v)
		if _, err := s.AddIncidentOnce(ctx, &store.Incident{Time: Epoch, Workspace: "w", Project: "p", Type: "x", Message: "m"}, "k1"); err != nil {
			t.Fatal(err)
		}
		same("duplicate add once", v)
		mustAdd(t, s, &store.Incident{Time: Epoch, Workspace: "w", Project: "other", Type: "x", Message: "m"})
		mustAdd(t, s, &store.Incident{Time: Epoch, Workspace: "other", Project: "p", Type: "x", Message: "m"})
		same("other tenants' writes", v)
		if _, err := s.PruneIncidents(ctx, Epoch.Add(-time.Hour), 0); err != nil {
			t.Fatal(err)
		}
		v = changed("prune", v)
		if _, err := s.DeleteIncidents(ctx, "w", "p"); err != nil {
			t.Fatal(err)
		}
		changed("delete", v)
	})

	t.Run("fix changes move the incident version", func(t *testing.T) {
		s := open(t)
		vw := versionWatch{t, s}
		ver, changed, same := vw.ver, vw.changed, vw.same
		v := ver("w", "p")
		a := putFix(t, s, "w", "p", "a")
		v = changed("put", v)
		putFix(t, s, "w", "p", "a")
		v = changed("put again (update)", v)
		mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"})
		same("list", v)
		putFix(t, s, "w", "other", "a")
		putFix(t, s, "other", "p", "a")
		same("other tenants' puts", v)
		if err := s.DeleteFix(ctx, "w", "p", "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		same("delete of an unknown fix", v)
		if err := s.DeleteFix(ctx, "w", "p", a.ID); err != nil {
			t.Fatal(err)
		}
		v = changed("delete", v)
		if _, err := s.DeleteFixes(ctx, "w", "p"); err != nil {
			t.Fatal(err)
		}
		same("delete all of no fix", v)
		putFix(t, s, "w", "p", "b")
		v = changed("put", v)
		if _, err := s.DeleteFixes(ctx, "w", "p"); err != nil {
			t.Fatal(err)
		}
		v = changed("delete all", v)
		b := putFix(t, s, "w", "p", "b")
		putFix(t, s, "w", "p", "c")
		v = ver("w", "p")
		// Age removes the other tenants' fixes, stored before b.
		if n, err := s.PruneFixes(ctx, b.Updated, 0); n != 2 || err != nil {
			t.Fatalf("PruneFixes(age) = %d, %v; want 2", n, err)
		}
		same("prune of other tenants' fixes", v)
		if n, err := s.PruneFixes(ctx, time.Time{}, 1); n != 1 || err != nil {
			t.Fatalf("PruneFixes(cap 1) = %d, %v; want 1", n, err)
		}
		v = changed("prune by cap", v)
		c := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"})
		if len(c) != 1 {
			t.Fatalf("%d fixes left", len(c))
		}
		if _, err := s.PruneFixes(ctx, c[0].Updated.Add(time.Microsecond), 0); err != nil {
			t.Fatal(err)
		}
		changed("prune by age", v)
	})
}

// versionWatch reads incident versions of a store in a test: ver reads a
// tenant's; changed and same check how tenant w/p's moved since before.
type versionWatch struct {
	t *testing.T
	s store.Store
}

func (w versionWatch) ver(ws, proj string) int64 {
	w.t.Helper()
	v, err := w.s.IncidentVersion(context.Background(), ws, proj)
	if err != nil {
		w.t.Fatal(err)
	}
	return v
}

func (w versionWatch) changed(what string, before int64) int64 {
	w.t.Helper()
	after := w.ver("w", "p")
	if after == before {
		w.t.Fatalf("%s: version unchanged (%d)", what, before)
	}
	return after
}

func (w versionWatch) same(what string, before int64) {
	w.t.Helper()
	if after := w.ver("w", "p"); after != before {
		w.t.Fatalf("%s: version changed %d -> %d", what, before, after)
	}
}
