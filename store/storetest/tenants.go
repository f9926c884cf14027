package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testTenants checks ListTenants: every tenant holding records, with the
// time of its newest one, the most recently changed first.
func testTenants(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()
	list := func(t *testing.T, s store.Store, limit int) []store.TenantRef {
		t.Helper()
		got, err := s.ListTenants(ctx, limit)
		if err != nil {
			t.Fatalf("ListTenants: %v", err)
		}
		return got
	}

	t.Run("tenants empty", func(t *testing.T) {
		if got := list(t, open(t), 0); len(got) != 0 {
			t.Fatalf("empty store lists %+v", got)
		}
	})

	t.Run("tenants of every record", func(t *testing.T) {
		s := open(t)
		// Incidents: the newest one's time counts, whatever the order
		// they were stored in.
		mustAdd(t, s, &store.Incident{Time: Epoch.Add(2 * time.Minute), Workspace: "acme", Project: "api", Type: store.TypeToolError, Message: "x"})
		mustAdd(t, s, &store.Incident{Time: Epoch, Workspace: "acme", Project: "api", Type: store.TypeToolError, Message: "y"})
		mustAdd(t, s, &store.Incident{Time: Epoch.Add(-time.Hour), Workspace: "acme", Project: "web", Type: store.TypeTimeout, Message: "z"})
		// A usage record: its hour.
		hour := Epoch.Add(-3 * time.Hour).Truncate(time.Hour)
		if err := s.AddUsage(ctx, []store.Usage{{Workspace: "beta", Project: "cli", Hour: hour, Requests: 1, Input: 10}}); err != nil {
			t.Fatal(err)
		}
		// A fix and a solution: their Updated (the store's clock).
		fix := store.Fix{Workspace: "acme", Project: "web", Key: "k", Tool: "shell"}
		mustPutFix(t, s, &fix)
		sol := store.Solution{Workspace: "gamma", Project: "ignored", Key: "k", Goal: "g", Approach: "a", Outcome: "o", Confidence: 0.5, Source: store.SourceAPI}
		mustPut(t, s, &sol)
		verified := store.Solution{Workspace: "delta", Key: "k", Goal: "g", Approach: "a", Outcome: "o", Confidence: 0.5, Source: store.SourceAPI, Verified: true}
		mustPut(t, s, &verified)
		older := store.Solution{Workspace: "delta", Key: "k2", Goal: "g2", Approach: "a", Outcome: "o", Confidence: 0.5, Source: store.SourceAuto}
		mustPut(t, s, &older)

		want := []store.TenantRef{
			{Workspace: "delta", Project: "", Latest: older.Updated},
			{Workspace: "gamma", Project: "", Latest: sol.Updated},
			{Workspace: "acme", Project: "web", Latest: fix.Updated},
			{Workspace: "acme", Project: "api", Latest: Epoch.Add(2 * time.Minute).Truncate(time.Microsecond)},
			{Workspace: "beta", Project: "cli", Latest: hour},
		}
		got := list(t, s, 0)
		if !sameRefs(got, want) {
			t.Fatalf("tenants:\n got %+v\nwant %+v", got, want)
		}
		if got := list(t, s, 2); !sameRefs(got, want[:2]) {
			t.Fatalf("limit 2:\n got %+v\nwant %+v", got, want[:2])
		}

		// A tenant whose records are gone is no longer listed.
		if _, err := s.DeleteIncidents(ctx, "acme", "api"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeleteFixes(ctx, "acme", "web"); err != nil {
			t.Fatal(err)
		}
		want = []store.TenantRef{want[0], want[1], {Workspace: "acme", Project: "web", Latest: Epoch.Add(-time.Hour).Truncate(time.Microsecond)}, want[4]}
		if got := list(t, s, 0); !sameRefs(got, want) {
			t.Fatalf("after deletes:\n got %+v\nwant %+v", got, want)
		}
	})

	t.Run("tenants same time by name", func(t *testing.T) {
		s := open(t)
		for _, ws := range []string{"b", "a", "B"} {
			for _, proj := range []string{"y", "x"} {
				mustAdd(t, s, &store.Incident{Time: Epoch, Workspace: ws, Project: proj, Type: store.TypeToolError, Message: "m"})
			}
		}
		var names []string
		for _, r := range list(t, s, 0) {
			names = append(names, r.Workspace+"/"+r.Project)
		}
		if want := []string{"B/x", "B/y", "a/x", "a/y", "b/x", "b/y"}; !reflect.DeepEqual(names, want) {
			t.Fatalf("order %v, want %v", names, want)
		}
	})
}

// sameRefs compares tenant lists, times as instants.
func sameRefs(got, want []store.TenantRef) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Workspace != want[i].Workspace || got[i].Project != want[i].Project || !got[i].Latest.Equal(want[i].Latest) {
			return false
		}
	}
	return true
}
