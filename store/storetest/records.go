package storetest

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testRecords checks what every kind of record shares: ErrInvalid for a
// record missing a required field, any JSON string in every text field,
// ErrNotFound for what is not there.
func testRecords(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()

	t.Run("invalid records", func(t *testing.T) {
		s := open(t)
		tests := []struct {
			name string
			call func() error
		}{
			{"incident without workspace", func() error { return s.AddIncident(ctx, &store.Incident{Project: "p"}) }},
			{"incident without project", func() error { return s.AddIncident(ctx, &store.Incident{Workspace: "w"}) }},
			{"nil incident", func() error { return s.AddIncident(ctx, nil) }},
			{"once without project", func() error {
				_, err := s.AddIncidentOnce(ctx, &store.Incident{Workspace: "w"}, "k")
				return err
			}},
			{"list without workspace", func() error {
				_, err := s.ListIncidents(ctx, store.IncidentQuery{Project: "p"})
				return err
			}},
			{"list without project", func() error {
				_, err := s.ListIncidents(ctx, store.IncidentQuery{Workspace: "w"})
				return err
			}},
			{"delete without project", func() error {
				_, err := s.DeleteIncidents(ctx, "w", "")
				return err
			}},
			{"solution without workspace", func() error { return s.PutSolution(ctx, &store.Solution{Key: "k", Goal: "g"}) }},
			{"solution without key", func() error { return s.PutSolution(ctx, &store.Solution{Workspace: "w", Goal: "g"}) }},
			{"solution without goal", func() error { return s.PutSolution(ctx, &store.Solution{Workspace: "w", Key: "k"}) }},
			{"solution with NaN confidence", func() error {
				return s.PutSolution(ctx, &store.Solution{Workspace: "w", Key: "k", Goal: "g", Confidence: math.NaN()})
			}},
			{"nil solution", func() error { return s.PutSolution(ctx, nil) }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(); !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
			})
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"}); len(got) != 0 {
			t.Fatalf("invalid calls stored %d incidents", len(got))
		}
		if list, err := s.ListSolutions(ctx, "w"); err != nil || len(list) != 0 {
			t.Fatalf("invalid calls stored solutions: %+v, %v", list, err)
		}
	})

	t.Run("invalid fixes", func(t *testing.T) {
		s := open(t)
		valid := func(edit func(f *store.Fix)) *store.Fix {
			f := &store.Fix{Workspace: "w", Project: "p", Key: "k", Tool: "t"}
			edit(f)
			return f
		}
		tests := []struct {
			name string
			call func() error
		}{
			{"nil", func() error { return s.PutFix(ctx, nil) }},
			{"without workspace", func() error { return s.PutFix(ctx, valid(func(f *store.Fix) { f.Workspace = "" })) }},
			{"without project", func() error { return s.PutFix(ctx, valid(func(f *store.Fix) { f.Project = "" })) }},
			{"without key", func() error { return s.PutFix(ctx, valid(func(f *store.Fix) { f.Key = "" })) }},
			{"without tool", func() error { return s.PutFix(ctx, valid(func(f *store.Fix) { f.Tool = "" })) }},
			{"negative failures", func() error { return s.PutFix(ctx, valid(func(f *store.Fix) { f.Failures = -1 })) }},
			{"list without workspace", func() error { _, err := s.ListFixes(ctx, store.FixQuery{Project: "p"}); return err }},
			{"list without project", func() error { _, err := s.ListFixes(ctx, store.FixQuery{Workspace: "w"}); return err }},
			{"delete all without project", func() error { _, err := s.DeleteFixes(ctx, "w", ""); return err }},
			{"delete all without workspace", func() error { _, err := s.DeleteFixes(ctx, "", "p"); return err }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(); !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
			})
		}
		if got := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"}); len(got) != 0 {
			t.Fatalf("invalid calls stored %d fixes", len(got))
		}
	})

	t.Run("any JSON string in every text field", func(t *testing.T) {
		// JSON may carry "\u0000", which PostgreSQL text cannot hold; the
		// stores keep it as U+FFFD, and bytes that are not UTF-8 too.
		s := open(t)
		odd := func(s string) string { return s + "\x00nul\xffbad\x00" }
		clean := func(s string) string { return s + "\uFFFDnul\uFFFDbad\uFFFD" }
		ws, proj, sess := odd("w"), odd("p"), odd("s")
		inc := store.Incident{
			Time: Epoch, Workspace: ws, Project: proj, Session: sess, Agent: odd("agent"),
			Provider: odd("provider"), Model: odd("model"), Type: odd("type"), StatusCode: 500,
			Code: odd("code"), Message: odd("message"), Fingerprint: odd("fp"),
		}
		mustAdd(t, s, &inc)
		want := store.Incident{
			ID: inc.ID, Time: Epoch.Truncate(time.Microsecond), Workspace: clean("w"), Project: clean("p"),
			Session: clean("s"), Agent: clean("agent"), Provider: clean("provider"), Model: clean("model"),
			Type: clean("type"), StatusCode: 500, Code: clean("code"), Message: clean("message"), Fingerprint: clean("fp"),
		}
		if inc != want {
			t.Fatalf("stored record:\n got %+v\nwant %+v", inc, want)
		}
		once := store.Incident{Time: Epoch, Workspace: ws, Project: proj, Message: odd("once")}
		for i, wantStored := range []bool{true, false} {
			stored, err := s.AddIncidentOnce(ctx, &once, odd("call"))
			if err != nil || stored != wantStored {
				t.Fatalf("AddIncidentOnce #%d = %v, %v; want %v", i+1, stored, err, wantStored)
			}
		}
		// Read back by the names as sent and by the names as stored.
		for _, q := range []store.IncidentQuery{
			{Workspace: ws, Project: proj, Session: sess},
			{Workspace: clean("w"), Project: clean("p"), Session: clean("s")},
		} {
			if got := mustList(t, s, q); len(got) != 1 || got[0] != want {
				t.Fatalf("list %q:\n got %+v\nwant [%+v]", q.Workspace, got, want)
			}
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: ws, Project: proj}); len(got) != 2 {
			t.Fatalf("tenant holds %d incidents, want 2", len(got))
		}
		if v, err := s.IncidentVersion(ctx, ws, proj); err != nil || v == 0 {
			t.Fatalf("IncidentVersion = %d, %v", v, err)
		}

		sol := store.Solution{
			Workspace: ws, Project: proj, Key: odd("key"), Goal: odd("goal"), Approach: odd("approach"),
			Outcome: odd("outcome"), Confidence: 0.5, Source: odd("source"), Verified: true,
		}
		mustPut(t, s, &sol)
		wantSol := store.Solution{
			ID: sol.ID, Workspace: clean("w"), Project: clean("p"), Key: clean("key"), Goal: clean("goal"),
			Approach: clean("approach"), Outcome: clean("outcome"), Confidence: 0.5, Source: clean("source"),
			Verified: true, Created: sol.Created, Updated: sol.Updated,
		}
		if sol != wantSol {
			t.Fatalf("stored solution:\n got %+v\nwant %+v", sol, wantSol)
		}
		// The same key as sent updates it.
		again := store.Solution{Workspace: ws, Key: odd("key"), Goal: odd("goal"), Approach: "second"}
		mustPut(t, s, &again)
		if again.ID != sol.ID {
			t.Fatalf("the same key stored a second solution %s (first %s)", again.ID, sol.ID)
		}
		if got, err := s.GetSolution(ctx, ws, sol.ID); err != nil || got != again {
			t.Fatalf("GetSolution = %+v, %v; want %+v", got, err, again)
		}
		if list, err := s.ListSolutions(ctx, ws); err != nil || len(list) != 1 || list[0] != again {
			t.Fatalf("ListSolutions = %+v, %v", list, err)
		}
		ch, _, err := s.SolutionChanges(ctx, 0, 100)
		if err != nil || len(ch) != 1 || ch[0].Solution != again {
			t.Fatalf("SolutionChanges = %+v, %v", ch, err)
		}
		if err := s.DeleteSolution(ctx, ws, sol.ID); err != nil {
			t.Fatal(err)
		}
		if n, err := s.DeleteIncidents(ctx, ws, proj); err != nil || n != 2 {
			t.Fatalf("DeleteIncidents = %d, %v; want 2", n, err)
		}
	})

	t.Run("any JSON string in every fix field", func(t *testing.T) {
		s := open(t)
		odd := func(s string) string { return s + "\x00nul\xffbad\x00" }
		clean := func(s string) string { return s + "\uFFFDnul\uFFFDbad\uFFFD" }
		f := store.Fix{Workspace: odd("w"), Project: odd("p"), Key: odd("key"), Pattern: odd("pattern"), Fingerprint: odd("fp"),
			Tool: odd("tool"), Failure: odd("failure"), Call: odd("call"), Explanation: odd("explanation"), Failures: 2,
			Session: odd("s")}
		mustPutFix(t, s, &f)
		want := store.Fix{ID: f.ID, Workspace: clean("w"), Project: clean("p"), Key: clean("key"), Pattern: clean("pattern"),
			Fingerprint: clean("fp"), Tool: clean("tool"), Failure: clean("failure"), Call: clean("call"),
			Explanation: clean("explanation"), Failures: 2, Session: clean("s"), Created: f.Created, Updated: f.Updated}
		if f != want {
			t.Fatalf("stored fix:\n got %+v\nwant %+v", f, want)
		}
		// The same key as sent updates it.
		again := store.Fix{Workspace: odd("w"), Project: odd("p"), Key: odd("key"), Tool: "t"}
		mustPutFix(t, s, &again)
		if again.ID != f.ID {
			t.Fatalf("the same key stored a second fix %s (first %s)", again.ID, f.ID)
		}
		// Read and deleted by the names as sent and as stored.
		for _, q := range []store.FixQuery{{Workspace: odd("w"), Project: odd("p")}, {Workspace: clean("w"), Project: clean("p")}} {
			if got := mustListFixes(t, s, q); len(got) != 1 || got[0] != again {
				t.Fatalf("list %q:\n got %+v\nwant [%+v]", q.Workspace, got, again)
			}
		}
		if v, err := s.IncidentVersion(ctx, odd("w"), odd("p")); err != nil || v == 0 {
			t.Fatalf("IncidentVersion = %d, %v", v, err)
		}
		if err := s.DeleteFix(ctx, odd("w"), odd("p"), f.ID); err != nil {
			t.Fatal(err)
		}
		mustPutFix(t, s, &again)
		if n, err := s.DeleteFixes(ctx, odd("w"), odd("p")); err != nil || n != 1 {
			t.Fatalf("DeleteFixes = %d, %v; want 1", n, err)
		}
	})

	t.Run("not found", func(t *testing.T) {
		s := open(t)
		sol := store.Solution{Workspace: "w", Key: "k", Goal: "g"}
		mustPut(t, s, &sol)
		tests := []struct {
			name string
			call func() error
		}{
			{"get unknown id", func() error { _, err := s.GetSolution(ctx, "w", "nope"); return err }},
			{"get empty id", func() error { _, err := s.GetSolution(ctx, "w", ""); return err }},
			{"get in wrong workspace", func() error { _, err := s.GetSolution(ctx, "other", sol.ID); return err }},
			{"delete in wrong workspace", func() error { return s.DeleteSolution(ctx, "other", sol.ID) }},
			{"delete unknown id", func() error { return s.DeleteSolution(ctx, "w", "nope") }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
			})
		}
		if got, err := s.GetSolution(ctx, "w", sol.ID); err != nil || got.ID != sol.ID {
			t.Fatalf("solution gone after failed deletes: %+v, %v", got, err)
		}
		if err := s.DeleteSolution(ctx, "w", sol.ID); err != nil {
			t.Fatalf("DeleteSolution: %v", err)
		}
		if err := s.DeleteSolution(ctx, "w", sol.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second DeleteSolution err = %v, want ErrNotFound", err)
		}
	})

	t.Run("fix not found", func(t *testing.T) {
		s := open(t)
		f := putFix(t, s, "w", "p", "k")
		tests := []struct {
			name, ws, proj, id string
		}{
			{"unknown id", "w", "p", "nope"},
			{"empty id", "w", "p", ""},
			{"other workspace", "other", "p", f.ID},
			{"other project", "w", "q", f.ID},
			{"empty tenant", "", "", f.ID},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := s.DeleteFix(ctx, tt.ws, tt.proj, tt.id); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
			})
		}
		if got := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"}); len(got) != 1 || got[0] != *f {
			t.Fatalf("fix gone after failed deletes: %+v", got)
		}
	})
}
