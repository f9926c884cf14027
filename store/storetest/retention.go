package storetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testRetention checks the pruning of each memory: by age, by a cap per
// tenant or workspace, and both.
func testRetention(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	// Solutions are stamped by the store's clock, which ticks on every
	// call: in these tests the order of the puts is the order of Updated.
	putSol := func(t *testing.T, s store.Store, ws, key string, verified bool) *store.Solution {
		t.Helper()
		src := store.SourceAuto
		if verified {
			src = store.SourceAPI
		}
		sol := &store.Solution{Workspace: ws, Key: key, Goal: "goal " + key, Source: src, Verified: verified}
		mustPut(t, s, sol)
		return sol
	}
	// pruned prunes, checks the count, and checks that the change feed,
	// read from where r stands, shows exactly the removed solutions as
	// deletions, so a replica's recall index drops them.
	pruned := func(t *testing.T, s store.Store, r *feedReader, before time.Time, max int, want ...*store.Solution) {
		t.Helper()
		r.readAll(t, s, 100)
		n, err := s.PruneSolutions(ctx, before, max)
		if err != nil || n != len(want) {
			t.Fatalf("PruneSolutions(%v, %d) = %d, %v; want %d", before, max, n, err, len(want))
		}
		ch, last, err := s.SolutionChanges(ctx, r.cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		gone := map[string]bool{}
		for _, c := range ch {
			if !c.Deleted {
				t.Fatalf("prune wrote a live change: %+v", c)
			}
			gone[c.Solution.Workspace+"/"+c.Solution.ID] = true
		}
		wantGone := map[string]bool{}
		for _, sol := range want {
			wantGone[sol.Workspace+"/"+sol.ID] = true
			if _, err := s.GetSolution(ctx, sol.Workspace, sol.ID); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("pruned solution %s still there: %v", sol.Key, err)
			}
		}
		if !reflect.DeepEqual(gone, wantGone) {
			t.Fatalf("feed deletions %v, want %v", gone, wantGone)
		}
		r.apply(t, ch, last)
	}
	// keys lists a workspace's solutions' keys, most recently updated first.
	keys := func(t *testing.T, s store.Store, ws string) string {
		t.Helper()
		list, err := s.ListSolutions(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		k := make([]string, len(list))
		for i, sol := range list {
			k[i] = sol.Key
		}
		return strings.Join(k, ",")
	}

	t.Run("prune by age", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "p", "s", 10, Epoch) // minutes 0..9
		addN(t, s, "w", "q", "", 4, Epoch)   // minutes 0..3
		for i, key := range []string{"old", "new"} {
			inc := store.Incident{Time: Epoch.Add(time.Duration(i*8) * time.Minute), Workspace: "w", Project: "d"}
			if ok, err := s.AddIncidentOnce(ctx, &inc, key); !ok || err != nil {
				t.Fatalf("AddIncidentOnce(%s) = %v, %v", key, ok, err)
			}
		}
		n, err := s.PruneIncidents(ctx, Epoch.Add(5*time.Minute), 0)
		if err != nil || n != 5+4+1 {
			t.Fatalf("PruneIncidents = %d, %v; want 10", n, err)
		}
		if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"})); got != "9,8,7,6,5" {
			t.Fatalf("w/p after prune = %q", got)
		}
		if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Session: "s"})); got != "9,8,7,6,5" {
			t.Fatalf("w/p session after prune = %q", got)
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "q"}); len(got) != 0 {
			t.Fatalf("w/q after prune: %d incidents", len(got))
		}
		for _, tc := range []struct {
			key  string
			want bool
		}{{"old", true}, {"new", false}} {
			ok, err := s.AddIncidentOnce(ctx, &store.Incident{Workspace: "w", Project: "d"}, tc.key)
			if err != nil || ok != tc.want {
				t.Fatalf("after prune, AddIncidentOnce(%s) = %v, %v; want %v", tc.key, ok, err, tc.want)
			}
		}
		if n, err := s.PruneIncidents(ctx, Epoch.Add(5*time.Minute), 0); n != 0 || err != nil {
			t.Fatalf("second prune = %d, %v; want 0", n, err)
		}
		// The tenant emptied by pruning still works.
		addN(t, s, "w", "q", "", 1, Epoch.Add(time.Hour))
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "q"}); len(got) != 1 {
			t.Fatalf("w/q after re-add: %d incidents", len(got))
		}
	})

	t.Run("prune by cap", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "big", "s", 10, Epoch)
		addN(t, s, "w", "small", "s", 3, Epoch)
		n, err := s.PruneIncidents(ctx, time.Time{}, 5)
		if err != nil || n != 5 {
			t.Fatalf("PruneIncidents = %d, %v; want 5", n, err)
		}
		if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "big"})); got != "9,8,7,6,5" {
			t.Fatalf("big after prune = %q", got)
		}
		if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "big", Session: "s"})); got != "9,8,7,6,5" {
			t.Fatalf("big session after prune = %q", got)
		}
		if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "small"})); got != "2,1,0" {
			t.Fatalf("small after prune = %q", got)
		}
		// Age and cap together: age removes big's minutes 5 and 6 and all of
		// small, then the cap of 2 removes big's minute 7.
		n, err = s.PruneIncidents(ctx, Epoch.Add(7*time.Minute), 2)
		if err != nil || n != 3+3 {
			t.Fatalf("PruneIncidents(age and cap) = %d, %v; want 6", n, err)
		}
		if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "big"})); got != "9,8" {
			t.Fatalf("big after second prune = %q", got)
		}
	})

	t.Run("prune solutions by age", func(t *testing.T) {
		s := open(t)
		u0 := putSol(t, s, "w", "u0", false)
		putSol(t, s, "w", "v0", true) // verified: kept however old
		o0 := putSol(t, s, "o", "o0", false)
		putSol(t, s, "w", "u1", false)
		u2 := putSol(t, s, "w", "u2", false)
		u3 := putSol(t, s, "w", "u3", false) // updated at the cut exactly: kept
		putSol(t, s, "w", "v1", true)
		putSol(t, s, "o", "o1", false)
		putSol(t, s, "w", "u1", false) // updated again: kept
		r := newFeedReader()
		pruned(t, s, r, u3.Updated, 0, u0, o0, u2)
		if got, want := keys(t, s, "w"), "u1,v1,u3,v0"; got != want {
			t.Fatalf("w after prune = %s, want %s", got, want)
		}
		if got, want := keys(t, s, "o"), "o1"; got != want {
			t.Fatalf("o after prune = %s, want %s", got, want)
		}
		pruned(t, s, r, u3.Updated, 0)
		r.check(t, s, "w", "o")
		// A new reader sees what is left.
		fresh := newFeedReader()
		fresh.readAll(t, s, 3)
		fresh.check(t, s, "w", "o")
		if len(fresh.state) != 5 {
			t.Fatalf("a new reader holds %d solutions, want 5", len(fresh.state))
		}
	})

	t.Run("prune solutions by cap", func(t *testing.T) {
		s := open(t)
		u0 := putSol(t, s, "w", "u0", false)
		v0 := putSol(t, s, "w", "v0", true)
		u1 := putSol(t, s, "w", "u1", false)
		putSol(t, s, "w", "v1", true)
		u2 := putSol(t, s, "w", "u2", false)
		putSol(t, s, "w", "v2", true)
		u3 := putSol(t, s, "w", "u3", false)
		x0 := putSol(t, s, "x", "x0", false)
		putSol(t, s, "x", "x1", true)
		putSol(t, s, "x", "x2", false)
		putSol(t, s, "y", "y0", false)
		putSol(t, s, "w", "u0", false) // an update: still 7 in w, u0 now the newest
		r := newFeedReader()

		// The least recently updated unverified ones go first.
		pruned(t, s, r, time.Time{}, 5, u1, u2)
		if got, want := keys(t, s, "w"), "u0,u3,v2,v1,v0"; got != want {
			t.Fatalf("w after cap 5 = %s, want %s", got, want)
		}
		if got, want := keys(t, s, "x"), "x2,x1,x0"; got != want {
			t.Fatalf("x (under the cap) = %s, want %s", got, want)
		}
		// Verified ones give way only once no unverified one is left.
		pruned(t, s, r, time.Time{}, 2, u3, u0, v0, x0)
		for ws, want := range map[string]string{"w": "v2,v1", "x": "x2,x1", "y": "y0"} {
			if got := keys(t, s, ws); got != want {
				t.Fatalf("%s after cap 2 = %s, want %s", ws, got, want)
			}
		}
		// No cap, nothing old: nothing to do.
		pruned(t, s, r, time.Time{}, 0)
		pruned(t, s, r, time.Time{}, 2)
		// The workspace goes on counting right after pruning.
		u4 := putSol(t, s, "w", "u4", false)
		putSol(t, s, "w", "v1", true)
		pruned(t, s, r, time.Time{}, 2, u4)
		if got, want := keys(t, s, "w"), "v1,v2"; got != want {
			t.Fatalf("w after a new put and cap 2 = %s, want %s", got, want)
		}
		r.check(t, s, "w", "x", "y")
	})

	t.Run("prune solutions by age and cap", func(t *testing.T) {
		s := open(t)
		u0 := putSol(t, s, "w", "u0", false)
		u1 := putSol(t, s, "w", "u1", false)
		putSol(t, s, "w", "v0", true)
		u2 := putSol(t, s, "w", "u2", false)
		putSol(t, s, "w", "u3", false)
		// Age removes u0 and u1 (v0 is as old, but verified); the cap of 2
		// then removes the oldest unverified one left, u2.
		r := newFeedReader()
		pruned(t, s, r, u2.Updated, 2, u0, u1, u2)
		if got, want := keys(t, s, "w"), "u3,v0"; got != want {
			t.Fatalf("w after prune = %s, want %s", got, want)
		}
		r.check(t, s, "w")
	})

	t.Run("put solutions within a cap", func(t *testing.T) {
		s := open(t)
		r := newFeedReader()
		// put stores sols with cap 3 and checks what it removed: the count,
		// the solutions gone, and the feed, which a replica's index follows,
		// never holding more than the cap.
		put := func(t *testing.T, want []*store.Solution, sols ...*store.Solution) {
			t.Helper()
			n, err := s.PutSolutions(ctx, sols, 3)
			if err != nil || n != len(want) {
				t.Fatalf("PutSolutions(cap 3) removed %d, %v; want %d", n, err, len(want))
			}
			for _, sol := range want {
				if _, err := s.GetSolution(ctx, sol.Workspace, sol.ID); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("solution %s over the cap still there: %v", sol.Key, err)
				}
			}
			r.readAll(t, s, 100)
			r.check(t, s, "w", "x")
			for ws, n := range map[string]int{"w": 0, "x": 0} {
				for _, sol := range r.state {
					if sol.Workspace == ws {
						n++
					}
				}
				if n > 3 {
					t.Fatalf("the feed holds %d solutions of %s, over the cap of 3", n, ws)
				}
			}
		}
		sol := func(ws, key string, verified bool) *store.Solution {
			src := store.SourceAuto
			if verified {
				src = store.SourceAPI
			}
			return &store.Solution{Workspace: ws, Key: key, Goal: "goal " + key, Source: src, Verified: verified}
		}
		u0, u1, v0 := sol("w", "u0", false), sol("w", "u1", false), sol("w", "v0", true)
		put(t, nil, u0)
		put(t, nil, u1)
		put(t, nil, v0)
		// A fourth: the least recently updated unverified one goes.
		u2 := sol("w", "u2", false)
		put(t, []*store.Solution{u0}, u2)
		if got, want := keys(t, s, "w"), "u2,v0,u1"; got != want {
			t.Fatalf("w = %s, want %s", got, want)
		}
		// An update adds nothing: nothing goes; another workspace is
		// counted apart.
		put(t, nil, sol("w", "u1", false), sol("x", "x0", false))
		// A verified solution makes an unverified one go; verified ones
		// give way only once no unverified one is left.
		put(t, []*store.Solution{u2}, sol("w", "v1", true))
		put(t, []*store.Solution{u1}, sol("w", "v2", true))
		put(t, []*store.Solution{v0}, sol("w", "v3", true))
		if got, want := keys(t, s, "w"), "v3,v2,v1"; got != want {
			t.Fatalf("w = %s, want %s", got, want)
		}
		// An unverified one in a workspace full of verified ones goes at once.
		u3 := sol("w", "u3", false)
		put(t, []*store.Solution{u3}, u3)
		// A batch alone over the cap keeps the cap.
		batch := []*store.Solution{sol("x", "x1", false), sol("x", "x2", false), sol("x", "x3", false), sol("x", "x4", false)}
		n, err := s.PutSolutions(ctx, batch, 3)
		if err != nil || n != 2 {
			t.Fatalf("a batch of 4 into a workspace of 1 with cap 3 removed %d, %v; want 2", n, err)
		}
		if list, err := s.ListSolutions(ctx, "x"); err != nil || len(list) != 3 {
			t.Fatalf("x holds %d solutions (%v), want 3", len(list), err)
		}
		r.readAll(t, s, 100)
		r.check(t, s, "w", "x")
		// No cap: nothing goes.
		if n, err := s.PutSolutions(ctx, []*store.Solution{sol("x", "x5", false)}, 0); err != nil || n != 0 {
			t.Fatalf("PutSolutions without a cap removed %d, %v", n, err)
		}
	})

	t.Run("put fixes within a cap", func(t *testing.T) {
		s := open(t)
		fix := func(ws, proj, key string) *store.Fix {
			return &store.Fix{Workspace: ws, Project: proj, Key: key, Pattern: "SYNTAX COMPLIANCE ERROR", Tool: "run_tests",
				Failure: "FAIL " + key, Call: `{"cmd":"go test ./` + key + `"}`, Failures: 2}
		}
		put := func(t *testing.T, want int, fixes ...*store.Fix) {
			t.Helper()
			if n, err := s.PutFixes(ctx, fixes, 2); n != want || err != nil {
				t.Fatalf("PutFixes(cap 2) removed %d, %v; want %d", n, err, want)
			}
		}
		v0, err := s.IncidentVersion(ctx, "w", "p")
		if err != nil {
			t.Fatal(err)
		}
		put(t, 0, fix("w", "p", "a0"))
		if v1, err := s.IncidentVersion(ctx, "w", "p"); err != nil || v1 == v0 {
			t.Fatalf("PutFixes left the incident version at %d (%v)", v1, err)
		}
		put(t, 0, fix("w", "p", "a1"), fix("w", "q", "b0"))
		// A third in w/p: the least recently updated goes; w/q is apart.
		put(t, 1, fix("w", "p", "a2"))
		// An update adds nothing: nothing goes.
		put(t, 0, fix("w", "p", "a1"))
		for tn, want := range map[[2]string]string{{"w", "p"}: "a1,a2", {"w", "q"}: "b0"} {
			if got := keysOf(t, s, tn[0], tn[1]); got != want {
				t.Fatalf("%s/%s = %q, want %q", tn[0], tn[1], got, want)
			}
		}
		// A batch alone over the cap keeps the cap.
		put(t, 3, fix("w", "p", "a3"), fix("w", "p", "a4"), fix("w", "p", "a5"))
		if n := len(mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p", Limit: store.MaxLimit})); n != 2 {
			t.Fatalf("w/p holds %d fixes, want 2", n)
		}
		// No cap: nothing goes.
		if n, err := s.PutFixes(ctx, []*store.Fix{fix("w", "p", "a6")}, 0); n != 0 || err != nil {
			t.Fatalf("PutFixes without a cap removed %d, %v", n, err)
		}
	})

	t.Run("prune fixes", func(t *testing.T) {
		s := open(t)
		putFix(t, s, "w", "p", "a0")
		putFix(t, s, "w", "q", "b0")
		putFix(t, s, "w", "p", "a1")
		cut := putFix(t, s, "w", "p", "a2") // updated at the cut exactly: kept
		putFix(t, s, "w", "q", "b1")
		putFix(t, s, "w", "p", "a0") // updated again: kept
		putFix(t, s, "w", "p", "a3")
		putFix(t, s, "v", "p", "c0")
		putFix(t, s, "v", "p", "c1")
		// Age removes a1 and b0.
		if n, err := s.PruneFixes(ctx, cut.Updated, 0); n != 2 || err != nil {
			t.Fatalf("PruneFixes(age) = %d, %v; want 2", n, err)
		}
		for tn, want := range map[[2]string]string{{"w", "p"}: "a3,a0,a2", {"w", "q"}: "b1", {"v", "p"}: "c1,c0"} {
			if got := keysOf(t, s, tn[0], tn[1]); got != want {
				t.Fatalf("%s/%s after the age rule = %q, want %q", tn[0], tn[1], got, want)
			}
		}
		if n, err := s.PruneFixes(ctx, cut.Updated, 0); n != 0 || err != nil {
			t.Fatalf("second PruneFixes(age) = %d, %v; want 0", n, err)
		}
		// The cap keeps each tenant's most recently updated.
		if n, err := s.PruneFixes(ctx, time.Time{}, 2); n != 1 || err != nil {
			t.Fatalf("PruneFixes(cap 2) = %d, %v; want 1", n, err)
		}
		if got := keysOf(t, s, "w", "p"); got != "a3,a0" {
			t.Fatalf("w/p after cap 2 = %q, want a3,a0", got)
		}
		if n, err := s.PruneFixes(ctx, time.Time{}, 0); n != 0 || err != nil {
			t.Fatalf("PruneFixes with no rule = %d, %v; want 0", n, err)
		}
		// Both: age removes every fix updated before c2 (a3, a0, b1, c0,
		// c1), then the cap of 1 removes c2.
		c2 := putFix(t, s, "v", "p", "c2")
		putFix(t, s, "v", "p", "c3")
		if n, err := s.PruneFixes(ctx, c2.Updated, 1); n != 6 || err != nil {
			t.Fatalf("PruneFixes(age and cap 1) = %d, %v; want 6", n, err)
		}
		for tn, want := range map[[2]string]string{{"w", "p"}: "", {"w", "q"}: "", {"v", "p"}: "c3"} {
			if got := keysOf(t, s, tn[0], tn[1]); got != want {
				t.Fatalf("%s/%s after age and cap = %q, want %q", tn[0], tn[1], got, want)
			}
		}
	})
}
