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

// testFixes checks storing, listing and deleting learned fixes.
func testFixes(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()

	t.Run("fixes put list delete", func(t *testing.T) {
		s := open(t)
		a := store.Fix{Workspace: "w", Project: "p", Key: "p:run_tests|SYNTAX COMPLIANCE ERROR", Pattern: "SYNTAX COMPLIANCE ERROR",
			Fingerprint: "0123456789abcdef", Tool: "run_tests", Failure: "SyntaxError: Unexpected end of input",
			Call: `{"cmd":"node --check parser.js"}`, Explanation: "closed the brace", Failures: 3, Session: "s1"}
		mustPutFix(t, s, &a)
		if len(a.ID) != 26 || a.Created.IsZero() || !a.Created.Equal(a.Updated) {
			t.Fatalf("stored fix: %+v", a)
		}
		if d := a.Created.Sub(ClockEpoch); d < 0 || d > time.Hour {
			t.Fatalf("Created %v not from the store clock (starts %v)", a.Created, ClockEpoch)
		}
		b := store.Fix{Workspace: "w", Project: "p", Key: "f:shell|fedcba9876543210", Pattern: "REPEATED ERROR", Tool: "shell",
			Failure: "exit 1", Call: `{"command":["ls"]}`, Failures: 2}
		mustPutFix(t, s, &b)
		// The same key in other tenants is another fix.
		others := []store.Fix{
			{Workspace: "w", Project: "q", Key: a.Key, Tool: "run_tests"},
			{Workspace: "v", Project: "p", Key: a.Key, Tool: "run_tests"},
			{Workspace: "w", Project: "pq", Key: a.Key, Tool: "run_tests"},
			{Workspace: "wp", Project: "", Key: a.Key, Tool: "run_tests"},
		}
		for i := range others[:3] {
			mustPutFix(t, s, &others[i])
			if others[i].ID == a.ID {
				t.Fatalf("the same key in %s/%s shares ID %s", others[i].Workspace, others[i].Project, a.ID)
			}
		}
		if got := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"}); !reflect.DeepEqual(got, []store.Fix{b, a}) {
			t.Fatalf("ListFixes:\n got %+v\nwant [b a] %+v", got, []store.Fix{b, a})
		}
		for _, o := range others[:3] {
			if got := mustListFixes(t, s, store.FixQuery{Workspace: o.Workspace, Project: o.Project}); len(got) != 1 || got[0] != o {
				t.Fatalf("ListFixes(%s/%s) = %+v, want [%+v]", o.Workspace, o.Project, got, o)
			}
		}
		if got := mustListFixes(t, s, store.FixQuery{Workspace: "nobody", Project: "p"}); got == nil || len(got) != 0 {
			t.Fatalf("ListFixes(unknown tenant) = %#v, want an empty list", got)
		}
		if err := s.DeleteFix(ctx, "w", "p", b.ID); err != nil {
			t.Fatalf("DeleteFix: %v", err)
		}
		if got := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"}); !reflect.DeepEqual(got, []store.Fix{a}) {
			t.Fatalf("ListFixes after delete = %+v", got)
		}
		if err := s.DeleteFix(ctx, "w", "p", b.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second DeleteFix err = %v, want ErrNotFound", err)
		}
		// The key is free again: a new fix with it gets a new ID.
		b2 := store.Fix{Workspace: "w", Project: "p", Key: b.Key, Tool: "shell"}
		mustPutFix(t, s, &b2)
		if b2.ID == b.ID || !b2.Created.After(b.Created) {
			t.Fatalf("re-created fix %+v reused the deleted one's ID or Created (%s %v)", b2, b.ID, b.Created)
		}
	})

	t.Run("fix upsert by key keeps ID and Created", func(t *testing.T) {
		s := open(t)
		first := store.Fix{Workspace: "w", Project: "p", Key: "k", Pattern: "REPEATED ERROR", Fingerprint: "aaaa", Tool: "t1",
			Failure: "f1", Call: "c1", Explanation: "e1", Failures: 2, Session: "s1"}
		mustPutFix(t, s, &first)
		second := store.Fix{ID: "ignored", Workspace: "w", Project: "p", Key: "k", Pattern: "P2", Fingerprint: "bbbb", Tool: "t2",
			Failure: "f2", Call: "c2", Explanation: "", Failures: 5, Session: "s2", Created: Epoch.Add(-time.Hour)}
		mustPutFix(t, s, &second)
		if second.ID != first.ID || !second.Created.Equal(first.Created) {
			t.Fatalf("upsert changed ID/Created: first %s %v, second %s %v", first.ID, first.Created, second.ID, second.Created)
		}
		if !second.Updated.After(first.Updated) {
			t.Fatalf("Updated %v not after %v", second.Updated, first.Updated)
		}
		want := store.Fix{ID: first.ID, Workspace: "w", Project: "p", Key: "k", Pattern: "P2", Fingerprint: "bbbb", Tool: "t2",
			Failure: "f2", Call: "c2", Failures: 5, Session: "s2", Created: first.Created, Updated: second.Updated}
		if second != want {
			t.Fatalf("returned record:\n got %+v\nwant %+v", second, want)
		}
		if got := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p"}); len(got) != 1 || got[0] != want {
			t.Fatalf("ListFixes = %+v, want [%+v]", got, want)
		}
		// A key of any length: kept whole, deduped on all of it.
		long := strings.Repeat("k", 3000)
		for _, key := range []string{long, long, long[:2999] + "x"} {
			putFix(t, s, "w", "long", key)
		}
		list := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "long"})
		if len(list) != 2 || list[0].Key != long[:2999]+"x" || list[1].Key != long {
			t.Fatalf("long keys: %d fixes", len(list))
		}
	})

	t.Run("fixes limit", func(t *testing.T) {
		s := open(t)
		var newest *store.Fix
		for i := range 150 {
			newest = putFix(t, s, "w", "p", fmt.Sprint(i))
		}
		tests := []struct {
			name  string
			limit int
			want  int
		}{
			{"zero means 100", 0, 100},
			{"negative means 100", -5, 100},
			{"small", 7, 7},
			{"more than stored", 20000, 150},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := mustListFixes(t, s, store.FixQuery{Workspace: "w", Project: "p", Limit: tt.limit})
				if len(got) != tt.want || got[0] != *newest {
					t.Fatalf("got %d fixes starting with %q, want %d starting with %q", len(got), got[0].Key, tt.want, newest.Key)
				}
				for i := 1; i < len(got); i++ {
					if !got[i].Updated.Before(got[i-1].Updated) {
						t.Fatalf("fix %d updated %v, not before %v", i, got[i].Updated, got[i-1].Updated)
					}
				}
			})
		}
	})

	t.Run("delete fixes of one tenant", func(t *testing.T) {
		s := open(t)
		for i := range 3 {
			putFix(t, s, "w", "p", fmt.Sprint(i))
		}
		putFix(t, s, "w", "q", "0")
		putFix(t, s, "v", "p", "0")
		if n, err := s.DeleteFixes(ctx, "w", "p"); n != 3 || err != nil {
			t.Fatalf("DeleteFixes = %d, %v; want 3", n, err)
		}
		for tn, want := range map[[2]string]string{{"w", "p"}: "", {"w", "q"}: "0", {"v", "p"}: "0"} {
			if got := keysOf(t, s, tn[0], tn[1]); got != want {
				t.Fatalf("%s/%s after DeleteFixes = %q, want %q", tn[0], tn[1], got, want)
			}
		}
		if n, err := s.DeleteFixes(ctx, "w", "p"); n != 0 || err != nil {
			t.Fatalf("second DeleteFixes = %d, %v; want 0", n, err)
		}
		if n, err := s.DeleteFixes(ctx, "nobody", "p"); n != 0 || err != nil {
			t.Fatalf("DeleteFixes(nobody) = %d, %v; want 0", n, err)
		}
		// The tenant takes new fixes, under the same keys, and retention
		// counts it afresh: one fix under a cap of one.
		putFix(t, s, "w", "p", "0")
		if n, err := s.PruneFixes(ctx, time.Time{}, 1); n != 0 || err != nil {
			t.Fatalf("PruneFixes after DeleteFixes = %d, %v; want 0", n, err)
		}
		putFix(t, s, "w", "p", "1")
		if n, err := s.PruneFixes(ctx, time.Time{}, 1); n != 1 || err != nil {
			t.Fatalf("PruneFixes over the cap = %d, %v; want 1", n, err)
		}
		if got := keysOf(t, s, "w", "p"); got != "1" {
			t.Fatalf("w/p after the cap = %q, want 1", got)
		}
	})
}

// putFix stores a fix of the tenant under key. Fixes are stamped by the
// store's clock, which ticks on every call: the order of the puts is the
// order of Updated.
func putFix(t *testing.T, s store.Store, ws, proj, key string) *store.Fix {
	t.Helper()
	f := &store.Fix{Workspace: ws, Project: proj, Key: key, Pattern: "SYNTAX COMPLIANCE ERROR", Tool: "run_tests",
		Failure: "FAIL " + key, Call: `{"cmd":"go test ./` + key + `"}`, Failures: 2}
	mustPutFix(t, s, f)
	return f
}

// keysOf lists the keys of the tenant's fixes, most recently updated
// first, checking that each is the tenant's.
func keysOf(t *testing.T, s store.Store, ws, proj string) string {
	t.Helper()
	list := mustListFixes(t, s, store.FixQuery{Workspace: ws, Project: proj, Limit: store.MaxLimit})
	k := make([]string, len(list))
	for i, f := range list {
		if f.Workspace != ws || f.Project != proj {
			t.Fatalf("%s/%s lists a fix of %s/%s", ws, proj, f.Workspace, f.Project)
		}
		k[i] = f.Key
	}
	return strings.Join(k, ",")
}

func mustPutFix(t *testing.T, s store.Store, f *store.Fix) {
	t.Helper()
	if err := s.PutFix(context.Background(), f); err != nil {
		t.Fatalf("PutFix: %v", err)
	}
}

func mustListFixes(t *testing.T, s store.Store, q store.FixQuery) []store.Fix {
	t.Helper()
	got, err := s.ListFixes(context.Background(), q)
	if err != nil {
		t.Fatalf("ListFixes(%+v): %v", q, err)
	}
	return got
}
