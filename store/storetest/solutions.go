package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testSolutions checks storing, reading and deleting solutions, and the
// change feed that replicas follow.
func testSolutions(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()

	t.Run("solutions put get list delete", func(t *testing.T) {
		s := open(t)
		a := store.Solution{Workspace: "w", Project: "p", Key: "ka", Goal: "fix the build", Approach: "pin go",
			Outcome: "green", Confidence: 0.9, Source: store.SourceAPI, Verified: true}
		mustPut(t, s, &a)
		if len(a.ID) != 26 || a.Created.IsZero() || !a.Created.Equal(a.Updated) {
			t.Fatalf("stored solution: %+v", a)
		}
		b := store.Solution{Workspace: "w", Key: "kb", Goal: "write docs", Confidence: 0.5, Source: store.SourceAuto}
		mustPut(t, s, &b)
		other := store.Solution{Workspace: "w2", Key: "ka", Goal: "fix the build"}
		mustPut(t, s, &other)
		if other.ID == a.ID {
			t.Fatalf("same key in another workspace shares ID %s", a.ID)
		}

		got, err := s.GetSolution(ctx, "w", a.ID)
		if err != nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("GetSolution = %+v, %v; want %+v", got, err, a)
		}
		list, err := s.ListSolutions(ctx, "w")
		if err != nil || !reflect.DeepEqual(list, []store.Solution{b, a}) {
			t.Fatalf("ListSolutions = %+v, %v; want [b a]", list, err)
		}
		if list, err := s.ListSolutions(ctx, "nobody"); err != nil || len(list) != 0 {
			t.Fatalf("ListSolutions(nobody) = %+v, %v", list, err)
		}

		if err := s.DeleteSolution(ctx, "w", b.ID); err != nil {
			t.Fatalf("DeleteSolution: %v", err)
		}
		if _, err := s.GetSolution(ctx, "w", b.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetSolution(deleted) err = %v, want ErrNotFound", err)
		}
		list, err = s.ListSolutions(ctx, "w")
		if err != nil || !reflect.DeepEqual(list, []store.Solution{a}) {
			t.Fatalf("ListSolutions after delete = %+v, %v", list, err)
		}
		// The key is free again: a new solution with it gets a new ID.
		b2 := store.Solution{Workspace: "w", Key: "kb", Goal: "write docs again"}
		mustPut(t, s, &b2)
		if b2.ID == b.ID {
			t.Fatalf("re-created solution reused deleted ID %s", b.ID)
		}
	})

	t.Run("put solutions in one transaction", func(t *testing.T) {
		s := open(t)
		known := store.Solution{Workspace: "w", Key: "k1", Goal: "first"}
		mustPut(t, s, &known)
		_, before, err := s.SolutionChanges(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		sols := []*store.Solution{
			{Workspace: "w", Key: "k1", Goal: "first, again", Source: store.SourceAuto},
			{Workspace: "w", Key: "k2", Goal: "second"},
			{Workspace: "w2", Key: "k2", Goal: "elsewhere"},
			{Workspace: "w", Key: "k2", Goal: "second, later"},
		}
		if _, err := s.PutSolutions(ctx, sols, 0); err != nil {
			t.Fatal(err)
		}
		if sols[0].ID != known.ID || !sols[0].Created.Equal(known.Created) || sols[3].ID != sols[1].ID || sols[2].ID == sols[1].ID {
			t.Fatalf("IDs: known %s; put %s %s %s %s", known.ID, sols[0].ID, sols[1].ID, sols[2].ID, sols[3].ID)
		}
		list, err := s.ListSolutions(ctx, "w")
		if err != nil || len(list) != 2 {
			t.Fatalf("ListSolutions = %+v, %v", list, err)
		}
		for _, want := range []*store.Solution{sols[0], sols[3]} {
			if got, err := s.GetSolution(ctx, "w", want.ID); err != nil || !reflect.DeepEqual(got, *want) {
				t.Fatalf("GetSolution = %+v, %v; want %+v", got, err, *want)
			}
		}
		if changes, _, err := s.SolutionChanges(ctx, before, 100); err != nil || len(changes) != 3 {
			t.Fatalf("changes after the put: %+v, %v; want one per solution", changes, err)
		}
		// One invalid solution: none is stored.
		_, err = s.PutSolutions(ctx, []*store.Solution{{Workspace: "w", Key: "k3", Goal: "fine"}, {Workspace: "w", Key: "k4"}}, 0)
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
		if list, _ := s.ListSolutions(ctx, "w"); len(list) != 2 {
			t.Fatalf("%d solutions after an invalid batch, want 2", len(list))
		}
	})

	t.Run("upsert by key keeps ID and Created", func(t *testing.T) {
		s := open(t)
		first := store.Solution{Workspace: "w", Key: "k", Goal: "g1", Approach: "a1", Confidence: 0.3, Source: store.SourceAuto}
		mustPut(t, s, &first)
		second := store.Solution{ID: "ignored", Workspace: "w", Project: "p", Key: "k", Goal: "g2", Approach: "a2",
			Outcome: "o2", Confidence: 0.8, Source: store.SourceAPI, Verified: true, Created: Epoch.Add(-time.Hour)}
		mustPut(t, s, &second)
		if second.ID != first.ID || !second.Created.Equal(first.Created) {
			t.Fatalf("upsert changed ID/Created: first %s %v, second %s %v", first.ID, first.Created, second.ID, second.Created)
		}
		if !second.Updated.After(first.Updated) {
			t.Fatalf("Updated %v not after %v", second.Updated, first.Updated)
		}
		got, err := s.GetSolution(ctx, "w", first.ID)
		if err != nil || !reflect.DeepEqual(got, second) {
			t.Fatalf("GetSolution = %+v, %v; want %+v", got, err, second)
		}
		if list, err := s.ListSolutions(ctx, "w"); err != nil || len(list) != 1 {
			t.Fatalf("ListSolutions = %d solutions, %v; want 1", len(list), err)
		}
	})

	t.Run("delete solutions of a workspace", func(t *testing.T) {
		s := open(t)
		for i := range 3 {
			mustPut(t, s, &store.Solution{Workspace: "w", Project: fmt.Sprint("p", i%2), Key: fmt.Sprint(i), Goal: "g"})
		}
		keep := store.Solution{Workspace: "w2", Key: "0", Goal: "g"}
		mustPut(t, s, &keep)
		r := newFeedReader()
		r.readAll(t, s, 10)
		if n, err := s.DeleteSolutions(ctx, "w"); n != 3 || err != nil {
			t.Fatalf("DeleteSolutions = %d, %v; want 3", n, err)
		}
		if list, err := s.ListSolutions(ctx, "w"); err != nil || len(list) != 0 {
			t.Fatalf("ListSolutions after DeleteSolutions = %+v, %v", list, err)
		}
		if list, err := s.ListSolutions(ctx, "w2"); err != nil || len(list) != 1 || list[0].ID != keep.ID {
			t.Fatalf("another workspace's solutions: %+v, %v", list, err)
		}
		// A reader following the feed drops every one of them.
		r.readAll(t, s, 10)
		r.check(t, s, "w", "w2")
		if n, err := s.DeleteSolutions(ctx, "w"); n != 0 || err != nil {
			t.Fatalf("second DeleteSolutions = %d, %v; want 0", n, err)
		}
		if n, err := s.DeleteSolutions(ctx, "nobody"); n != 0 || err != nil {
			t.Fatalf("DeleteSolutions(nobody) = %d, %v; want 0", n, err)
		}
		// The workspace takes new solutions, under the same keys.
		again := store.Solution{Workspace: "w", Key: "0", Goal: "g again"}
		mustPut(t, s, &again)
		if list, err := s.ListSolutions(ctx, "w"); err != nil || len(list) != 1 || list[0].ID != again.ID {
			t.Fatalf("ListSolutions after a new put = %+v, %v", list, err)
		}
		// Retention counts the workspace afresh: one solution, under a cap of one.
		if n, err := s.PruneSolutions(ctx, time.Time{}, 1); n != 0 || err != nil {
			t.Fatalf("PruneSolutions after DeleteSolutions = %d, %v; want 0", n, err)
		}
		mustPut(t, s, &store.Solution{Workspace: "w", Key: "1", Goal: "g one more"})
		if n, err := s.PruneSolutions(ctx, time.Time{}, 1); n != 1 || err != nil {
			t.Fatalf("PruneSolutions over the cap = %d, %v; want 1", n, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeleteSolutions(ctx, "w"); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("DeleteSolutions after Close: err = %v, want ErrClosed", err)
		}
	})

	t.Run("change feed", func(t *testing.T) {
		s := open(t)
		if ch, last, err := s.SolutionChanges(ctx, 0, 10); err != nil || len(ch) != 0 || last != 0 {
			t.Fatalf("empty feed = %v, %d, %v", ch, last, err)
		}
		sols := map[string]*store.Solution{}
		for _, k := range []string{"a", "b", "c", "d"} {
			sol := &store.Solution{Workspace: "w" + k, Key: k, Goal: "goal " + k}
			mustPut(t, s, sol)
			sols[k] = sol
		}
		sols["a"].Goal = "goal a v2"
		mustPut(t, s, sols["a"])
		if err := s.DeleteSolution(ctx, sols["b"].Workspace, sols["b"].ID); err != nil {
			t.Fatal(err)
		}

		// A new reader paging from 0 sees each live solution once, as stored now.
		r := newFeedReader()
		r.readAll(t, s, 1)
		r.check(t, s, "wa", "wb", "wc", "wd")
		if n := r.liveSeen[sols["a"].ID]; n != 1 {
			t.Fatalf("updated solution seen live %d times, want 1", n)
		}
		if got := r.state[sols["a"].ID].Goal; got != "goal a v2" {
			t.Fatalf("reader holds goal %q, want the update", got)
		}
		if _, ok := r.state[sols["b"].ID]; ok {
			t.Fatalf("reader holds deleted solution")
		}

		// After its cursor: an update, a deletion, an insert.
		cursor := r.cursor
		sols["c"].Approach = "new approach"
		mustPut(t, s, sols["c"])
		if err := s.DeleteSolution(ctx, sols["a"].Workspace, sols["a"].ID); err != nil {
			t.Fatal(err)
		}
		e := &store.Solution{Workspace: "we", Key: "e", Goal: "goal e"}
		mustPut(t, s, e)
		ch, last, err := s.SolutionChanges(ctx, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		prev := cursor
		for _, c := range ch {
			if c.Seq <= prev {
				t.Fatalf("seq %d after %d: not increasing", c.Seq, prev)
			}
			prev = c.Seq
			kind := "put"
			if c.Deleted {
				kind = "del"
				if c.Solution.Workspace == "" || c.Solution.Goal != "" {
					t.Fatalf("deletion carries %+v, want only ID and Workspace", c.Solution)
				}
			}
			got = append(got, kind+" "+c.Solution.Workspace)
		}
		if want := "put wc,del wa,put we"; strings.Join(got, ",") != want {
			t.Fatalf("changes after cursor = %q, want %q", strings.Join(got, ","), want)
		}
		if last != prev {
			t.Fatalf("last = %d, want %d", last, prev)
		}
		if ch, l, err := s.SolutionChanges(ctx, last, 100); err != nil || len(ch) != 0 || l != last {
			t.Fatalf("read at end = %d changes, %d, %v; want none, %d", len(ch), l, err, last)
		}
		r.readAll(t, s, 2)
		r.check(t, s, "wa", "wb", "wc", "wd", "we")
	})

	t.Run("change feed while writing", func(t *testing.T) {
		s := open(t)
		for i := range 6 {
			mustPut(t, s, &store.Solution{Workspace: "w", Key: fmt.Sprint(i), Goal: "g"})
		}
		r := newFeedReader()
		step := 0
		for {
			ch, last, err := s.SolutionChanges(ctx, r.cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			r.apply(t, ch, last)
			if len(ch) == 0 {
				break
			}
			// Between pages: update an already read solution, delete one
			// not read yet, add one.
			switch step {
			case 0:
				mustPut(t, s, &store.Solution{Workspace: "w", Key: "0", Goal: "g0 v2"})
			case 1:
				list, _ := s.ListSolutions(ctx, "w")
				for _, sol := range list {
					if sol.Key == "5" {
						if err := s.DeleteSolution(ctx, "w", sol.ID); err != nil {
							t.Fatal(err)
						}
					}
				}
			case 2:
				mustPut(t, s, &store.Solution{Workspace: "w", Key: "6", Goal: "g"})
			}
			step++
		}
		r.check(t, s, "w")
	})
}

// feedReader follows the change feed the way a replica does.
type feedReader struct {
	cursor   int64
	state    map[string]store.Solution // live solutions by ID
	liveSeen map[string]int            // live entries received per ID
}

func newFeedReader() *feedReader {
	return &feedReader{state: map[string]store.Solution{}, liveSeen: map[string]int{}}
}

func (r *feedReader) apply(t *testing.T, ch []store.SolutionChange, last int64) {
	t.Helper()
	for _, c := range ch {
		if c.Seq <= r.cursor {
			t.Fatalf("seq %d not after cursor %d", c.Seq, r.cursor)
		}
		r.cursor = c.Seq
		if c.Deleted {
			delete(r.state, c.Solution.ID)
			continue
		}
		r.state[c.Solution.ID] = c.Solution
		r.liveSeen[c.Solution.ID]++
	}
	if len(ch) > 0 && last != r.cursor {
		t.Fatalf("last = %d, want the last seq %d", last, r.cursor)
	}
	if len(ch) == 0 && last != r.cursor {
		t.Fatalf("empty read returned last = %d, want the cursor %d", last, r.cursor)
	}
}

// readAll reads the feed to its end, limit entries at a time.
func (r *feedReader) readAll(t *testing.T, s store.Store, limit int) {
	t.Helper()
	for {
		ch, last, err := s.SolutionChanges(context.Background(), r.cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) > limit {
			t.Fatalf("%d changes for limit %d", len(ch), limit)
		}
		r.apply(t, ch, last)
		if len(ch) == 0 {
			return
		}
	}
}

// check compares the reader's state with ListSolutions of the given
// workspaces and of every workspace the reader holds.
func (r *feedReader) check(t *testing.T, s store.Store, workspaces ...string) {
	t.Helper()
	want := map[string]store.Solution{}
	seen := map[string]bool{}
	for _, sol := range r.state {
		workspaces = append(workspaces, sol.Workspace)
	}
	for _, ws := range workspaces {
		if seen[ws] {
			continue
		}
		seen[ws] = true
		list, err := s.ListSolutions(context.Background(), ws)
		if err != nil {
			t.Fatal(err)
		}
		for _, sol := range list {
			want[sol.ID] = sol
		}
	}
	if !reflect.DeepEqual(r.state, want) {
		t.Fatalf("feed reader state:\n got %+v\nwant %+v", r.state, want)
	}
}
