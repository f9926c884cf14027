package storetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/store"
)

// testMarks checks the Wrong mark of fixes and solutions: set and cleared
// without touching anything else, kept by a store of the same memory,
// dropped by a new one, and, for solutions, carried by the change feed.
func testMarks(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	at := Epoch.Add(90*time.Minute + 1500*time.Nanosecond) // stored to the microsecond

	t.Run("mark a fix", func(t *testing.T) {
		s := open(t)
		f := store.Fix{Workspace: "w", Project: "p", Key: "k", Tool: "shell", Failure: "mkdir: missing operand",
			Call: `{"command":"mkdir"}`, Failures: 2}
		mustPutFix(t, s, &f)
		other := store.Fix{Workspace: "w", Project: "q", Key: "k", Tool: "shell", Call: f.Call}
		mustPutFix(t, s, &other)
		v0, err := s.IncidentVersion(ctx, "w", "p")
		if err != nil {
			t.Fatal(err)
		}

		got, err := s.MarkFix(ctx, "w", "p", f.ID, &store.Wrong{At: at, Note: "its output was an error"})
		if err != nil {
			t.Fatalf("MarkFix: %v", err)
		}
		want := f
		want.Wrong = &store.Wrong{At: at.Truncate(time.Microsecond).UTC(), Note: "its output was an error"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("MarkFix returned\n %+v (%+v)\nwant %+v (%+v)", got, got.Wrong, want, want.Wrong)
		}
		if list := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"}); len(list) != 1 || !reflect.DeepEqual(list[0], want) {
			t.Fatalf("ListFixes = %+v, want the marked fix, its Updated unchanged", list)
		}
		if list := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "q"}); len(list) != 1 || list[0].Wrong != nil {
			t.Fatalf("the other tenant's fix = %+v, want it unmarked", list)
		}
		if v1, err := s.IncidentVersion(ctx, "w", "p"); err != nil || v1 <= v0 {
			t.Fatalf("IncidentVersion after MarkFix = %d, %v; want more than %d (the guard shows fixes)", v1, err, v0)
		}

		// Learned again with the same call: still wrong. With another call: a new fix, unmarked.
		again := store.Fix{Workspace: "w", Project: "p", Key: "k", Tool: "shell", Call: f.Call, Failures: 3}
		mustPutFix(t, s, &again)
		if again.Wrong == nil || !again.Wrong.At.Equal(want.Wrong.At) || again.Wrong.Note != want.Wrong.Note {
			t.Fatalf("the same call stored again: Wrong = %+v, want the mark kept", again.Wrong)
		}
		if list := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"}); list[0].Wrong == nil {
			t.Fatalf("listed after the same call: the mark is gone")
		}
		fixed := store.Fix{Workspace: "w", Project: "p", Key: "k", Tool: "shell", Call: `{"command":"mkdir -p out"}`, Failures: 3}
		mustPutFix(t, s, &fixed)
		if fixed.Wrong != nil || fixed.ID != f.ID {
			t.Fatalf("a new call for the failure: %+v (Wrong %+v), want the same fix unmarked", fixed, fixed.Wrong)
		}
		if list := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"}); list[0].Wrong != nil {
			t.Fatalf("listed after a new call: still marked %+v", list[0].Wrong)
		}

		// A mark given with the record is stored; clearing with nil.
		marked := store.Fix{Workspace: "w", Project: "p", Key: "k2", Tool: "shell", Wrong: &store.Wrong{At: at, Note: "imported"}}
		mustPutFix(t, s, &marked)
		if marked.Wrong == nil || marked.Wrong.Note != "imported" {
			t.Fatalf("PutFix with a mark stored Wrong = %+v", marked.Wrong)
		}
		cleared, err := s.MarkFix(ctx, "w", "p", marked.ID, nil)
		if err != nil || cleared.Wrong != nil {
			t.Fatalf("MarkFix(nil) = %+v, %v; want the mark cleared", cleared.Wrong, err)
		}

		// A note is cleaned and capped; unknown fixes are not found.
		long := strings.Repeat("é", 800) + "\x00\xff"
		capped, err := s.MarkFix(ctx, "w", "p", f.ID, &store.Wrong{At: at, Note: long})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(capped.Wrong.Note); n > 1000 || n < 990 || !utf8.ValidString(capped.Wrong.Note) {
			t.Fatalf("a %d-byte note stored as %d bytes (valid UTF-8: %v), want at most 1000", len(long), n, utf8.ValidString(capped.Wrong.Note))
		}
		for _, c := range [][3]string{{"w", "p", "nope"}, {"w", "q", f.ID}, {"x", "p", f.ID}, {"w", "p", ""}} {
			if _, err := s.MarkFix(ctx, c[0], c[1], c[2], &store.Wrong{At: at}); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("MarkFix(%q) err = %v, want ErrNotFound", c, err)
			}
		}
	})

	t.Run("mark a solution", func(t *testing.T) {
		s := open(t)
		sol := &store.Solution{Workspace: "w", Key: "k", Goal: "make the build pass", Approach: "told the user it failed"}
		mustPut(t, s, sol)
		var err error
		emb := store.Embedding{Model: "m", Vector: []float32{0.6, 0.8}}
		if err := s.SetSolutionEmbedding(ctx, "w", sol.ID, sol.Goal, emb); err != nil {
			t.Fatal(err)
		}
		if *sol, err = s.GetSolution(ctx, "w", sol.ID); err != nil {
			t.Fatal(err)
		}
		r := newFeedReader()
		r.readAll(t, s, 10)
		cursor := r.cursor

		// The mark keeps the solution's embedding.
		got, err := s.MarkSolution(ctx, "w", sol.ID, &store.Wrong{At: at, Note: "the run failed"})
		if err != nil {
			t.Fatalf("MarkSolution: %v", err)
		}
		want := *sol
		want.Wrong = &store.Wrong{At: at.Truncate(time.Microsecond).UTC(), Note: "the run failed"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("MarkSolution returned %+v, want %+v", got, want)
		}
		if g, err := s.GetSolution(ctx, "w", sol.ID); err != nil || !reflect.DeepEqual(g, want) {
			t.Fatalf("GetSolution = %+v, %v; want the marked solution, its Updated unchanged", g, err)
		}
		// The feed carries the mark to every replica's recall index.
		ch, _, err := s.SolutionChanges(ctx, cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch) != 1 || ch[0].Deleted || !reflect.DeepEqual(ch[0].Solution, want) {
			t.Fatalf("changes after the mark = %+v, want the marked solution once", ch)
		}
		r.readAll(t, s, 1)
		r.check(t, s, "w")

		// Stored again with the same approach: still wrong; with another: unmarked.
		again := &store.Solution{Workspace: "w", Key: "k", Goal: "make the build pass", Approach: sol.Approach, Outcome: "x"}
		mustPut(t, s, again)
		if again.Wrong == nil || again.Wrong.Note != "the run failed" {
			t.Fatalf("the same approach stored again: Wrong = %+v, want the mark kept", again.Wrong)
		}
		solved := &store.Solution{Workspace: "w", Key: "k", Goal: "make the build pass", Approach: "fixed the import"}
		mustPut(t, s, solved)
		if solved.Wrong != nil {
			t.Fatalf("a new approach: Wrong = %+v, want none", solved.Wrong)
		}
		if g, _ := s.GetSolution(ctx, "w", sol.ID); g.Wrong != nil {
			t.Fatalf("stored after a new approach: still marked")
		}
		if cleared, err := s.MarkSolution(ctx, "w", sol.ID, nil); err != nil || cleared.Wrong != nil {
			t.Fatalf("MarkSolution(nil) = %+v, %v", cleared.Wrong, err)
		}
		for _, c := range [][2]string{{"w", "nope"}, {"other", sol.ID}, {"w", ""}, {"", sol.ID}} {
			if _, err := s.MarkSolution(ctx, c[0], c[1], &store.Wrong{At: at}); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("MarkSolution(%q) err = %v, want ErrNotFound", c, err)
			}
		}
		r.readAll(t, s, 3)
		r.check(t, s, "w")
	})
}
