package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

// testLifecycle checks the store as a whole: Close, cancelled contexts,
// reopening the same data, concurrent writers.
func testLifecycle(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("closed", func(t *testing.T) {
		s, _ := open(t)
		mustAdd(t, s, &store.Incident{Workspace: "w", Project: "p"})
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		tests := []struct {
			name string
			call func() error
		}{
			{"AddIncident", func() error { return s.AddIncident(ctx, &store.Incident{Workspace: "w", Project: "p"}) }},
			{"AddIncidentOnce", func() error {
				_, err := s.AddIncidentOnce(ctx, &store.Incident{Workspace: "w", Project: "p"}, "k")
				return err
			}},
			{"ListIncidents", func() error {
				_, err := s.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p"})
				return err
			}},
			{"DeleteIncidents", func() error { _, err := s.DeleteIncidents(ctx, "w", "p"); return err }},
			{"PruneIncidents", func() error { _, err := s.PruneIncidents(ctx, Epoch, 1); return err }},
			{"PutSolution", func() error { return s.PutSolution(ctx, &store.Solution{Workspace: "w", Key: "k", Goal: "g"}) }},
			{"GetSolution", func() error { _, err := s.GetSolution(ctx, "w", "x"); return err }},
			{"ListSolutions", func() error { _, err := s.ListSolutions(ctx, "w"); return err }},
			{"DeleteSolution", func() error { return s.DeleteSolution(ctx, "w", "x") }},
			{"PruneSolutions", func() error { _, err := s.PruneSolutions(ctx, Epoch, 1); return err }},
			{"SolutionChanges", func() error { _, _, err := s.SolutionChanges(ctx, 0, 1); return err }},
			{"PutFix", func() error {
				return s.PutFix(ctx, &store.Fix{Workspace: "w", Project: "p", Key: "k", Tool: "t"})
			}},
			{"ListFixes", func() error { _, err := s.ListFixes(ctx, store.FixQuery{Workspace: "w", Project: "p"}); return err }},
			{"DeleteFix", func() error { return s.DeleteFix(ctx, "w", "p", "x") }},
			{"DeleteFixes", func() error { _, err := s.DeleteFixes(ctx, "w", "p"); return err }},
			{"PruneFixes", func() error { _, err := s.PruneFixes(ctx, Epoch, 1); return err }},
			{"Ping", func() error { return s.Ping(ctx) }},
			{"Close", func() error { return s.Close() }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(); !errors.Is(err, store.ErrClosed) {
					t.Fatalf("err = %v, want ErrClosed", err)
				}
			})
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		s, _ := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.AddIncident(cctx, &store.Incident{Workspace: "w", Project: "p"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("AddIncident err = %v, want context.Canceled", err)
		}
		if _, err := s.ListIncidents(cctx, store.IncidentQuery{Workspace: "w", Project: "p"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("ListIncidents err = %v, want context.Canceled", err)
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"}); len(got) != 0 {
			t.Fatalf("cancelled AddIncident stored %d incidents", len(got))
		}
	})

	t.Run("persists across reopen", func(t *testing.T) {
		s, reopen := open(t)
		if reopen == nil {
			t.Fatalf("open returned no reopen function")
		}
		inc := store.Incident{Workspace: "w", Project: "p", Session: "s", Message: "kept"}
		mustAdd(t, s, &inc)
		if ok, err := s.AddIncidentOnce(ctx, &store.Incident{Workspace: "w", Project: "p", Message: "once"}, "k"); !ok || err != nil {
			t.Fatalf("AddIncidentOnce = %v, %v", ok, err)
		}
		sol := store.Solution{Workspace: "w", Key: "k", Goal: "g"}
		mustPut(t, s, &sol)
		fix := store.Fix{Workspace: "w", Project: "p", Key: "k", Tool: "run", Call: `{"cmd":"ls"}`, Failures: 2}
		mustPutFix(t, s, &fix)
		_, last, err := s.SolutionChanges(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s2 := reopen(t)
		if got := Messages(mustList(t, s2, store.IncidentQuery{Workspace: "w", Project: "p", Session: "s"})); got != "kept" {
			t.Fatalf("after reopen, session incidents = %q", got)
		}
		if got := Messages(mustList(t, s2, store.IncidentQuery{Workspace: "w", Project: "p"})); got != "once,kept" {
			t.Fatalf("after reopen, incidents = %q", got)
		}
		if ok, err := s2.AddIncidentOnce(ctx, &store.Incident{Workspace: "w", Project: "p"}, "k"); ok || err != nil {
			t.Fatalf("after reopen, dedupe key forgotten: AddIncidentOnce = %v, %v", ok, err)
		}
		if got, err := s2.GetSolution(ctx, "w", sol.ID); err != nil || !reflect.DeepEqual(got, sol) {
			t.Fatalf("after reopen, GetSolution = %+v, %v; want %+v", got, err, sol)
		}
		if got := mustListFixes(t, s2, store.FixQuery{Workspace: "w", Project: "p"}); len(got) != 1 || got[0] != fix {
			t.Fatalf("after reopen, ListFixes = %+v; want [%+v]", got, fix)
		}
		// The feed continues after the old sequence.
		mustPut(t, s2, &store.Solution{Workspace: "w", Key: "k2", Goal: "g2"})
		ch, _, err := s2.SolutionChanges(ctx, last, 0)
		if err != nil || len(ch) != 1 || ch[0].Seq <= last || ch[0].Solution.Key != "k2" {
			t.Fatalf("after reopen, changes after %d = %+v, %v", last, ch, err)
		}
	})

	t.Run("concurrent writers", func(t *testing.T) {
		s, _ := open(t)
		const writers, each = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers*each*3)
		var stored atomic.Int64
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					if err := s.AddIncident(ctx, &store.Incident{Workspace: "w", Project: "p",
						Session: fmt.Sprint("s", w%2), Message: fmt.Sprint(w, "/", i)}); err != nil {
						errs <- err
					}
					// Every writer tries the same 5 keys.
					ok, err := s.AddIncidentOnce(ctx, &store.Incident{Workspace: "w", Project: "once"}, fmt.Sprint("k", i%5))
					if err != nil {
						errs <- err
					}
					if ok {
						stored.Add(1)
					}
					if err := s.PutSolution(ctx, &store.Solution{Workspace: "w", Key: fmt.Sprint("k", i%10),
						Goal: fmt.Sprint("by ", w)}); err != nil {
						errs <- err
					}
					if _, err := s.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p", Limit: 10}); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Limit: store.MaxLimit}); len(got) != writers*each {
			t.Fatalf("%d incidents, want %d", len(got), writers*each)
		}
		for _, sess := range []string{"s0", "s1"} {
			got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Session: sess, Limit: store.MaxLimit})
			if len(got) != writers*each/2 {
				t.Fatalf("session %s: %d incidents, want %d", sess, len(got), writers*each/2)
			}
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "once"}); len(got) != 5 || stored.Load() != 5 {
			t.Fatalf("deduped incidents = %d, reported stored %d times; want 5 and 5", len(got), stored.Load())
		}
		list, err := s.ListSolutions(ctx, "w")
		if err != nil || len(list) != 10 {
			t.Fatalf("ListSolutions = %d, %v; want 10", len(list), err)
		}
		r := newFeedReader()
		r.readAll(t, s, 3)
		r.check(t, s, "w")
	})
}
