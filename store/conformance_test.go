package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// reopeners maps a Store opened by a backend's open function to a function
// that opens the same data again (bbolt: same file; PostgreSQL: same schema,
// new pool). The persistence subtest uses it.
var reopeners sync.Map // Store -> func(t *testing.T) Store

func registerReopen(s Store, reopen func(t *testing.T) Store) { reopeners.Store(s, reopen) }

// tickClock returns a clock that starts at start and advances by step on
// every call: each stored record gets a distinct, increasing time.
func tickClock(start time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	next := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := next
		next = next.Add(step)
		return t
	}
}

// testEpoch is the base of the times tests give incidents; fixed so
// failures reproduce. clockEpoch, a day later, is where every store's
// clock starts (tickClock(clockEpoch, time.Millisecond)), so records timed
// by the store are newer than the ones a test times itself.
var (
	testEpoch  = time.Date(2025, 3, 14, 9, 26, 53, 589793000, time.UTC)
	clockEpoch = testEpoch.Add(24 * time.Hour)
)

// testStore runs the conformance suite against the store open returns. Each
// call of open must give an empty store.
func testStore(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()

	t.Run("add and list newest first", func(t *testing.T) {
		s := open(t)
		// Stored out of order; listed by Time.
		offsets := []int{3, 1, 4, 0, 2}
		want := make([]Incident, len(offsets))
		for _, off := range offsets {
			inc := Incident{
				Time: testEpoch.Add(time.Duration(off) * time.Minute), Workspace: "w", Project: "p",
				Session: "s1", Agent: "agent", Provider: "openai", Model: "gpt-x", Type: TypeHTTPError,
				StatusCode: 500 + off, Message: fmt.Sprintf("boom %d", off), Fingerprint: "fp",
			}
			mustAdd(t, s, &inc)
			if len(inc.ID) != 26 {
				t.Fatalf("ID %q: want 26 characters", inc.ID)
			}
			want[len(offsets)-1-off] = inc
		}
		got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p"})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("list:\n got %+v\nwant %+v", got, want)
		}
	})

	t.Run("zero time gets the store clock", func(t *testing.T) {
		s := open(t)
		inc := Incident{Workspace: "w", Project: "p", Type: TypeTimeout, Message: "slow"}
		mustAdd(t, s, &inc)
		if inc.Time.IsZero() || inc.ID == "" {
			t.Fatalf("Time and ID not assigned: %+v", inc)
		}
		if d := inc.Time.Sub(clockEpoch); d < 0 || d > time.Hour {
			t.Fatalf("Time %v not from the store clock (starts %v)", inc.Time, clockEpoch)
		}
		got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p"})
		if len(got) != 1 || !reflect.DeepEqual(got[0], inc) {
			t.Fatalf("list = %+v, want [%+v]", got, inc)
		}
	})

	t.Run("same time listed last stored first", func(t *testing.T) {
		s := open(t)
		for i := range 3 {
			mustAdd(t, s, &Incident{Time: testEpoch, Workspace: "w", Project: "p", Message: fmt.Sprint(i)})
		}
		got := messages(mustList(t, s, IncidentQuery{Workspace: "w", Project: "p"}))
		if want := "2,1,0"; got != want {
			t.Fatalf("order = %s, want %s", got, want)
		}
	})

	t.Run("limit", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "p", "", 150, testEpoch)
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
				got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p", Limit: tt.limit})
				if len(got) != tt.want {
					t.Fatalf("got %d incidents, want %d", len(got), tt.want)
				}
				// The newest ones: minute 149 first.
				if want := testEpoch.Add(149 * time.Minute); !got[0].Time.Equal(want) {
					t.Fatalf("first = %v, want %v", got[0].Time, want)
				}
			})
		}
	})

	t.Run("since", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "p", "", 10, testEpoch) // minutes 0..9
		tests := []struct {
			name  string
			since time.Time
			want  string
		}{
			{"zero is no bound", time.Time{}, "9,8,7,6,5,4,3,2,1,0"},
			{"inclusive", testEpoch.Add(5 * time.Minute), "9,8,7,6,5"},
			{"a nanosecond later excludes", testEpoch.Add(5*time.Minute + time.Nanosecond), "9,8,7,6"},
			{"after all", testEpoch.Add(time.Hour), ""},
			{"before all", testEpoch.Add(-time.Hour), "9,8,7,6,5,4,3,2,1,0"},
			{"other time zone", testEpoch.Add(8 * time.Minute).In(time.FixedZone("X", 5*3600)), "9,8"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := messages(mustList(t, s, IncidentQuery{Workspace: "w", Project: "p", Since: tt.since}))
				if got != tt.want {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
			})
		}
	})

	t.Run("session filter", func(t *testing.T) {
		s := open(t)
		for i := range 12 {
			sess := []string{"a", "b", "", "ab"}[i%4]
			mustAdd(t, s, &Incident{Time: testEpoch.Add(time.Duration(i) * time.Minute),
				Workspace: "w", Project: "p", Session: sess, Message: fmt.Sprint(i)})
		}
		tests := []struct {
			name    string
			session string
			since   time.Time
			limit   int
			want    string
		}{
			{"all sessions", "", time.Time{}, 0, "11,10,9,8,7,6,5,4,3,2,1,0"},
			{"a", "a", time.Time{}, 0, "8,4,0"},
			{"b", "b", time.Time{}, 0, "9,5,1"},
			{"prefix of another session", "ab", time.Time{}, 0, "11,7,3"},
			{"with since", "a", testEpoch.Add(4 * time.Minute), 0, "8,4"},
			{"with limit", "b", time.Time{}, 2, "9,5"},
			{"unknown", "zzz", time.Time{}, 0, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p",
					Session: tt.session, Since: tt.since, Limit: tt.limit})
				for _, inc := range got {
					if tt.session != "" && inc.Session != tt.session {
						t.Fatalf("incident of session %q in %q", inc.Session, tt.session)
					}
				}
				if m := messages(got); m != tt.want {
					t.Fatalf("got %q, want %q", m, tt.want)
				}
			})
		}
	})

	t.Run("tenant isolation", func(t *testing.T) {
		s := open(t)
		tenants := []struct{ ws, proj string }{
			{"w1", "p1"}, {"w1", "p2"}, {"w2", "p1"}, {"w", "1p1"}, {"w1p", "1"},
		}
		for i, tn := range tenants {
			addN(t, s, tn.ws, tn.proj, "s", i+1, testEpoch)
		}
		for i, tn := range tenants {
			got := mustList(t, s, IncidentQuery{Workspace: tn.ws, Project: tn.proj})
			if len(got) != i+1 {
				t.Fatalf("%s/%s: %d incidents, want %d", tn.ws, tn.proj, len(got), i+1)
			}
			for _, inc := range got {
				if inc.Workspace != tn.ws || inc.Project != tn.proj {
					t.Fatalf("%s/%s: got incident of %s/%s", tn.ws, tn.proj, inc.Workspace, inc.Project)
				}
			}
			got = mustList(t, s, IncidentQuery{Workspace: tn.ws, Project: tn.proj, Session: "s"})
			if len(got) != i+1 {
				t.Fatalf("%s/%s session: %d incidents, want %d", tn.ws, tn.proj, len(got), i+1)
			}
		}
		if got := mustList(t, s, IncidentQuery{Workspace: "w3", Project: "p1"}); len(got) != 0 {
			t.Fatalf("unknown tenant: %d incidents", len(got))
		}
	})

	t.Run("dedupe once", func(t *testing.T) {
		s := open(t)
		long := strings.Repeat("k", 1000)
		steps := []struct {
			ws, proj, key string
			want          bool
		}{
			{"w", "p", "call_1", true},
			{"w", "p", "call_1", false},
			{"w", "p", "call_1", false},
			{"w", "p", "call_1", false},
			{"w", "p", "call_1", false},
			{"w", "p", "call_2", true},
			{"w", "p2", "call_1", true},
			{"w2", "p", "call_1", true},
			{"w", "p", long, true},
			{"w", "p", long, false},
			{"w", "p", long[:999] + "x", true},
			{"w", "p", "", true},
			{"w", "p", "", true},
		}
		for i, st := range steps {
			inc := Incident{Workspace: st.ws, Project: st.proj, Type: TypeToolError, Message: fmt.Sprint(i)}
			stored, err := s.AddIncidentOnce(ctx, &inc, st.key)
			if err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
			if stored != st.want {
				t.Fatalf("step %d (%s/%s %.10q): stored = %v, want %v", i, st.ws, st.proj, st.key, stored, st.want)
			}
			if stored != (inc.ID != "") {
				t.Fatalf("step %d: stored = %v but ID = %q", i, stored, inc.ID)
			}
		}
		if got := messages(mustList(t, s, IncidentQuery{Workspace: "w", Project: "p"})); got != "12,11,10,8,5,0" {
			t.Fatalf("w/p incidents = %q", got)
		}
	})

	t.Run("delete incidents of one tenant", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "p", "s", 4, testEpoch)
		addN(t, s, "w", "q", "s", 3, testEpoch)
		addN(t, s, "v", "p", "s", 2, testEpoch)
		if ok, err := s.AddIncidentOnce(ctx, &Incident{Workspace: "w", Project: "p"}, "k"); !ok || err != nil {
			t.Fatalf("AddIncidentOnce = %v, %v", ok, err)
		}
		n, err := s.DeleteIncidents(ctx, "w", "p")
		if err != nil || n != 5 {
			t.Fatalf("DeleteIncidents = %d, %v; want 5", n, err)
		}
		for _, tc := range []struct {
			ws, proj string
			want     int
		}{{"w", "p", 0}, {"w", "q", 3}, {"v", "p", 2}} {
			if got := mustList(t, s, IncidentQuery{Workspace: tc.ws, Project: tc.proj}); len(got) != tc.want {
				t.Fatalf("%s/%s: %d incidents, want %d", tc.ws, tc.proj, len(got), tc.want)
			}
		}
		if got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p", Session: "s"}); len(got) != 0 {
			t.Fatalf("session index kept %d deleted incidents", len(got))
		}
		if ok, err := s.AddIncidentOnce(ctx, &Incident{Workspace: "w", Project: "p"}, "k"); !ok || err != nil {
			t.Fatalf("dedupe key survived DeleteIncidents: AddIncidentOnce = %v, %v", ok, err)
		}
		if n, err := s.DeleteIncidents(ctx, "nobody", "p"); n != 0 || err != nil {
			t.Fatalf("DeleteIncidents(unknown) = %d, %v", n, err)
		}
	})

	t.Run("prune by age", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "p", "s", 10, testEpoch) // minutes 0..9
		addN(t, s, "w", "q", "", 4, testEpoch)   // minutes 0..3
		for i, key := range []string{"old", "new"} {
			inc := Incident{Time: testEpoch.Add(time.Duration(i*8) * time.Minute), Workspace: "w", Project: "d"}
			if ok, err := s.AddIncidentOnce(ctx, &inc, key); !ok || err != nil {
				t.Fatalf("AddIncidentOnce(%s) = %v, %v", key, ok, err)
			}
		}
		n, err := s.PruneIncidents(ctx, testEpoch.Add(5*time.Minute), 0)
		if err != nil || n != 5+4+1 {
			t.Fatalf("PruneIncidents = %d, %v; want 10", n, err)
		}
		if got := messages(mustList(t, s, IncidentQuery{Workspace: "w", Project: "p"})); got != "9,8,7,6,5" {
			t.Fatalf("w/p after prune = %q", got)
		}
		if got := messages(mustList(t, s, IncidentQuery{Workspace: "w", Project: "p", Session: "s"})); got != "9,8,7,6,5" {
			t.Fatalf("w/p session after prune = %q", got)
		}
		if got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "q"}); len(got) != 0 {
			t.Fatalf("w/q after prune: %d incidents", len(got))
		}
		for _, tc := range []struct {
			key  string
			want bool
		}{{"old", true}, {"new", false}} {
			ok, err := s.AddIncidentOnce(ctx, &Incident{Workspace: "w", Project: "d"}, tc.key)
			if err != nil || ok != tc.want {
				t.Fatalf("after prune, AddIncidentOnce(%s) = %v, %v; want %v", tc.key, ok, err, tc.want)
			}
		}
		if n, err := s.PruneIncidents(ctx, testEpoch.Add(5*time.Minute), 0); n != 0 || err != nil {
			t.Fatalf("second prune = %d, %v; want 0", n, err)
		}
		// The tenant emptied by pruning still works.
		addN(t, s, "w", "q", "", 1, testEpoch.Add(time.Hour))
		if got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "q"}); len(got) != 1 {
			t.Fatalf("w/q after re-add: %d incidents", len(got))
		}
	})

	t.Run("prune by cap", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "big", "s", 10, testEpoch)
		addN(t, s, "w", "small", "s", 3, testEpoch)
		n, err := s.PruneIncidents(ctx, time.Time{}, 5)
		if err != nil || n != 5 {
			t.Fatalf("PruneIncidents = %d, %v; want 5", n, err)
		}
		if got := messages(mustList(t, s, IncidentQuery{Workspace: "w", Project: "big"})); got != "9,8,7,6,5" {
			t.Fatalf("big after prune = %q", got)
		}
		if got := messages(mustList(t, s, IncidentQuery{Workspace: "w", Project: "big", Session: "s"})); got != "9,8,7,6,5" {
			t.Fatalf("big session after prune = %q", got)
		}
		if got := messages(mustList(t, s, IncidentQuery{Workspace: "w", Project: "small"})); got != "2,1,0" {
			t.Fatalf("small after prune = %q", got)
		}
		// Age and cap together: age removes big's minutes 5 and 6 and all of
		// small, then the cap of 2 removes big's minute 7.
		n, err = s.PruneIncidents(ctx, testEpoch.Add(7*time.Minute), 2)
		if err != nil || n != 3+3 {
			t.Fatalf("PruneIncidents(age and cap) = %d, %v; want 6", n, err)
		}
		if got := messages(mustList(t, s, IncidentQuery{Workspace: "w", Project: "big"})); got != "9,8" {
			t.Fatalf("big after second prune = %q", got)
		}
	})

	t.Run("incident version follows the tenant's changes", func(t *testing.T) {
		s := open(t)
		vw := versionWatch{t, s}
		ver, changed, same := vw.ver, vw.changed, vw.same
		v := ver("w", "p")
		same("read only", v)
		old := Incident{Time: testEpoch.Add(-48 * time.Hour), Workspace: "w", Project: "p", Type: "x", Message: "old"}
		mustAdd(t, s, &old)
		v = changed("add", v)
		if _, err := s.AddIncidentOnce(ctx, &Incident{Time: testEpoch, Workspace: "w", Project: "p", Type: "x", Message: "m"}, "k1"); err != nil {
			t.Fatal(err)
		}
		v = changed("add once", v)
		if _, err := s.AddIncidentOnce(ctx, &Incident{Time: testEpoch, Workspace: "w", Project: "p", Type: "x", Message: "m"}, "k1"); err != nil {
			t.Fatal(err)
		}
		same("duplicate add once", v)
		mustAdd(t, s, &Incident{Time: testEpoch, Workspace: "w", Project: "other", Type: "x", Message: "m"})
		mustAdd(t, s, &Incident{Time: testEpoch, Workspace: "other", Project: "p", Type: "x", Message: "m"})
		same("other tenants' writes", v)
		if _, err := s.PruneIncidents(ctx, testEpoch.Add(-time.Hour), 0); err != nil {
			t.Fatal(err)
		}
		v = changed("prune", v)
		if _, err := s.DeleteIncidents(ctx, "w", "p"); err != nil {
			t.Fatal(err)
		}
		changed("delete", v)
	})

	t.Run("solutions put get list delete", func(t *testing.T) {
		s := open(t)
		a := Solution{Workspace: "w", Project: "p", Key: "ka", Goal: "fix the build", Approach: "pin go",
			Outcome: "green", Confidence: 0.9, Source: SourceAPI, Verified: true}
		mustPut(t, s, &a)
		if len(a.ID) != 26 || a.Created.IsZero() || !a.Created.Equal(a.Updated) {
			t.Fatalf("stored solution: %+v", a)
		}
		b := Solution{Workspace: "w", Key: "kb", Goal: "write docs", Confidence: 0.5, Source: SourceAuto}
		mustPut(t, s, &b)
		other := Solution{Workspace: "w2", Key: "ka", Goal: "fix the build"}
		mustPut(t, s, &other)
		if other.ID == a.ID {
			t.Fatalf("same key in another workspace shares ID %s", a.ID)
		}

		got, err := s.GetSolution(ctx, "w", a.ID)
		if err != nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("GetSolution = %+v, %v; want %+v", got, err, a)
		}
		list, err := s.ListSolutions(ctx, "w")
		if err != nil || !reflect.DeepEqual(list, []Solution{b, a}) {
			t.Fatalf("ListSolutions = %+v, %v; want [b a]", list, err)
		}
		if list, err := s.ListSolutions(ctx, "nobody"); err != nil || len(list) != 0 {
			t.Fatalf("ListSolutions(nobody) = %+v, %v", list, err)
		}

		if err := s.DeleteSolution(ctx, "w", b.ID); err != nil {
			t.Fatalf("DeleteSolution: %v", err)
		}
		if _, err := s.GetSolution(ctx, "w", b.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetSolution(deleted) err = %v, want ErrNotFound", err)
		}
		list, err = s.ListSolutions(ctx, "w")
		if err != nil || !reflect.DeepEqual(list, []Solution{a}) {
			t.Fatalf("ListSolutions after delete = %+v, %v", list, err)
		}
		// The key is free again: a new solution with it gets a new ID.
		b2 := Solution{Workspace: "w", Key: "kb", Goal: "write docs again"}
		mustPut(t, s, &b2)
		if b2.ID == b.ID {
			t.Fatalf("re-created solution reused deleted ID %s", b.ID)
		}
	})

	t.Run("put solutions in one transaction", func(t *testing.T) {
		s := open(t)
		known := Solution{Workspace: "w", Key: "k1", Goal: "first"}
		mustPut(t, s, &known)
		_, before, err := s.SolutionChanges(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		sols := []*Solution{
			{Workspace: "w", Key: "k1", Goal: "first, again", Source: SourceAuto},
			{Workspace: "w", Key: "k2", Goal: "second"},
			{Workspace: "w2", Key: "k2", Goal: "elsewhere"},
			{Workspace: "w", Key: "k2", Goal: "second, later"},
		}
		if err := s.PutSolutions(ctx, sols); err != nil {
			t.Fatal(err)
		}
		if sols[0].ID != known.ID || !sols[0].Created.Equal(known.Created) || sols[3].ID != sols[1].ID || sols[2].ID == sols[1].ID {
			t.Fatalf("IDs: known %s; put %s %s %s %s", known.ID, sols[0].ID, sols[1].ID, sols[2].ID, sols[3].ID)
		}
		list, err := s.ListSolutions(ctx, "w")
		if err != nil || len(list) != 2 {
			t.Fatalf("ListSolutions = %+v, %v", list, err)
		}
		for _, want := range []*Solution{sols[0], sols[3]} {
			if got, err := s.GetSolution(ctx, "w", want.ID); err != nil || !reflect.DeepEqual(got, *want) {
				t.Fatalf("GetSolution = %+v, %v; want %+v", got, err, *want)
			}
		}
		if changes, _, err := s.SolutionChanges(ctx, before, 100); err != nil || len(changes) != 3 {
			t.Fatalf("changes after the put: %+v, %v; want one per solution", changes, err)
		}
		// One invalid solution: none is stored.
		err = s.PutSolutions(ctx, []*Solution{{Workspace: "w", Key: "k3", Goal: "fine"}, {Workspace: "w", Key: "k4"}})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
		if list, _ := s.ListSolutions(ctx, "w"); len(list) != 2 {
			t.Fatalf("%d solutions after an invalid batch, want 2", len(list))
		}
	})

	t.Run("upsert by key keeps ID and Created", func(t *testing.T) {
		s := open(t)
		first := Solution{Workspace: "w", Key: "k", Goal: "g1", Approach: "a1", Confidence: 0.3, Source: SourceAuto}
		mustPut(t, s, &first)
		second := Solution{ID: "ignored", Workspace: "w", Project: "p", Key: "k", Goal: "g2", Approach: "a2",
			Outcome: "o2", Confidence: 0.8, Source: SourceAPI, Verified: true, Created: testEpoch.Add(-time.Hour)}
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

	t.Run("invalid records", func(t *testing.T) {
		s := open(t)
		tests := []struct {
			name string
			call func() error
		}{
			{"incident without workspace", func() error { return s.AddIncident(ctx, &Incident{Project: "p"}) }},
			{"incident without project", func() error { return s.AddIncident(ctx, &Incident{Workspace: "w"}) }},
			{"nil incident", func() error { return s.AddIncident(ctx, nil) }},
			{"once without project", func() error {
				_, err := s.AddIncidentOnce(ctx, &Incident{Workspace: "w"}, "k")
				return err
			}},
			{"list without workspace", func() error {
				_, err := s.ListIncidents(ctx, IncidentQuery{Project: "p"})
				return err
			}},
			{"list without project", func() error {
				_, err := s.ListIncidents(ctx, IncidentQuery{Workspace: "w"})
				return err
			}},
			{"delete without project", func() error {
				_, err := s.DeleteIncidents(ctx, "w", "")
				return err
			}},
			{"solution without workspace", func() error { return s.PutSolution(ctx, &Solution{Key: "k", Goal: "g"}) }},
			{"solution without key", func() error { return s.PutSolution(ctx, &Solution{Workspace: "w", Goal: "g"}) }},
			{"solution without goal", func() error { return s.PutSolution(ctx, &Solution{Workspace: "w", Key: "k"}) }},
			{"solution with NaN confidence", func() error {
				return s.PutSolution(ctx, &Solution{Workspace: "w", Key: "k", Goal: "g", Confidence: math.NaN()})
			}},
			{"nil solution", func() error { return s.PutSolution(ctx, nil) }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(); !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
			})
		}
		if got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p"}); len(got) != 0 {
			t.Fatalf("invalid calls stored %d incidents", len(got))
		}
		if list, err := s.ListSolutions(ctx, "w"); err != nil || len(list) != 0 {
			t.Fatalf("invalid calls stored solutions: %+v, %v", list, err)
		}
	})

	t.Run("any JSON string in every text field", func(t *testing.T) {
		// JSON may carry "\u0000", which PostgreSQL text cannot hold; the
		// stores keep it as U+FFFD, and bytes that are not UTF-8 too.
		s := open(t)
		odd := func(s string) string { return s + "\x00nul\xffbad\x00" }
		clean := func(s string) string { return s + "\uFFFDnul\uFFFDbad\uFFFD" }
		ws, proj, sess := odd("w"), odd("p"), odd("s")
		inc := Incident{
			Time: testEpoch, Workspace: ws, Project: proj, Session: sess, Agent: odd("agent"),
			Provider: odd("provider"), Model: odd("model"), Type: odd("type"), StatusCode: 500,
			Code: odd("code"), Message: odd("message"), Fingerprint: odd("fp"),
		}
		mustAdd(t, s, &inc)
		want := Incident{
			ID: inc.ID, Time: testEpoch.Truncate(time.Microsecond), Workspace: clean("w"), Project: clean("p"),
			Session: clean("s"), Agent: clean("agent"), Provider: clean("provider"), Model: clean("model"),
			Type: clean("type"), StatusCode: 500, Code: clean("code"), Message: clean("message"), Fingerprint: clean("fp"),
		}
		if inc != want {
			t.Fatalf("stored record:\n got %+v\nwant %+v", inc, want)
		}
		once := Incident{Time: testEpoch, Workspace: ws, Project: proj, Message: odd("once")}
		for i, wantStored := range []bool{true, false} {
			stored, err := s.AddIncidentOnce(ctx, &once, odd("call"))
			if err != nil || stored != wantStored {
				t.Fatalf("AddIncidentOnce #%d = %v, %v; want %v", i+1, stored, err, wantStored)
			}
		}
		// Read back by the names as sent and by the names as stored.
		for _, q := range []IncidentQuery{
			{Workspace: ws, Project: proj, Session: sess},
			{Workspace: clean("w"), Project: clean("p"), Session: clean("s")},
		} {
			if got := mustList(t, s, q); len(got) != 1 || got[0] != want {
				t.Fatalf("list %q:\n got %+v\nwant [%+v]", q.Workspace, got, want)
			}
		}
		if got := mustList(t, s, IncidentQuery{Workspace: ws, Project: proj}); len(got) != 2 {
			t.Fatalf("tenant holds %d incidents, want 2", len(got))
		}
		if v, err := s.IncidentVersion(ctx, ws, proj); err != nil || v == 0 {
			t.Fatalf("IncidentVersion = %d, %v", v, err)
		}

		sol := Solution{
			Workspace: ws, Project: proj, Key: odd("key"), Goal: odd("goal"), Approach: odd("approach"),
			Outcome: odd("outcome"), Confidence: 0.5, Source: odd("source"), Verified: true,
		}
		mustPut(t, s, &sol)
		wantSol := Solution{
			ID: sol.ID, Workspace: clean("w"), Project: clean("p"), Key: clean("key"), Goal: clean("goal"),
			Approach: clean("approach"), Outcome: clean("outcome"), Confidence: 0.5, Source: clean("source"),
			Verified: true, Created: sol.Created, Updated: sol.Updated,
		}
		if sol != wantSol {
			t.Fatalf("stored solution:\n got %+v\nwant %+v", sol, wantSol)
		}
		// The same key as sent updates it.
		again := Solution{Workspace: ws, Key: odd("key"), Goal: odd("goal"), Approach: "second"}
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

	t.Run("not found", func(t *testing.T) {
		s := open(t)
		sol := Solution{Workspace: "w", Key: "k", Goal: "g"}
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
				if err := tt.call(); !errors.Is(err, ErrNotFound) {
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
		if err := s.DeleteSolution(ctx, "w", sol.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second DeleteSolution err = %v, want ErrNotFound", err)
		}
	})

	t.Run("incident code", func(t *testing.T) {
		s := open(t)
		with := Incident{Time: testEpoch, Workspace: "w", Project: "p", Type: "network_error", Code: "ECONNRESET", Message: "socket hang up"}
		without := Incident{Time: testEpoch.Add(time.Minute), Workspace: "w", Project: "p", Type: TypeHTTPError, StatusCode: 503, Message: "unavailable"}
		mustAdd(t, s, &with)
		mustAdd(t, s, &without)
		got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p"})
		if len(got) != 2 || got[0] != without || got[1] != with {
			t.Fatalf("list:\n got %+v\nwant [%+v %+v]", got, without, with)
		}
		once := Incident{Workspace: "w", Project: "p", Type: "tool_error", Code: "ENOENT", Message: "no such file"}
		if ok, err := s.AddIncidentOnce(ctx, &once, "call_1"); !ok || err != nil {
			t.Fatalf("AddIncidentOnce = %v, %v", ok, err)
		}
		if got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p", Limit: 1}); len(got) != 1 || got[0].Code != "ENOENT" {
			t.Fatalf("code of AddIncidentOnce: %+v", got)
		}
	})

	t.Run("delete solutions of a workspace", func(t *testing.T) {
		s := open(t)
		for i := range 3 {
			mustPut(t, s, &Solution{Workspace: "w", Project: fmt.Sprint("p", i%2), Key: fmt.Sprint(i), Goal: "g"})
		}
		keep := Solution{Workspace: "w2", Key: "0", Goal: "g"}
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
		again := Solution{Workspace: "w", Key: "0", Goal: "g again"}
		mustPut(t, s, &again)
		if list, err := s.ListSolutions(ctx, "w"); err != nil || len(list) != 1 || list[0].ID != again.ID {
			t.Fatalf("ListSolutions after a new put = %+v, %v", list, err)
		}
		// Retention counts the workspace afresh: one solution, under a cap of one.
		if n, err := s.PruneSolutions(ctx, time.Time{}, 1); n != 0 || err != nil {
			t.Fatalf("PruneSolutions after DeleteSolutions = %d, %v; want 0", n, err)
		}
		mustPut(t, s, &Solution{Workspace: "w", Key: "1", Goal: "g one more"})
		if n, err := s.PruneSolutions(ctx, time.Time{}, 1); n != 1 || err != nil {
			t.Fatalf("PruneSolutions over the cap = %d, %v; want 1", n, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DeleteSolutions(ctx, "w"); !errors.Is(err, ErrClosed) {
			t.Fatalf("DeleteSolutions after Close: err = %v, want ErrClosed", err)
		}
	})

	t.Run("change feed", func(t *testing.T) {
		s := open(t)
		if ch, last, err := s.SolutionChanges(ctx, 0, 10); err != nil || len(ch) != 0 || last != 0 {
			t.Fatalf("empty feed = %v, %d, %v", ch, last, err)
		}
		sols := map[string]*Solution{}
		for _, k := range []string{"a", "b", "c", "d"} {
			sol := &Solution{Workspace: "w" + k, Key: k, Goal: "goal " + k}
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
		e := &Solution{Workspace: "we", Key: "e", Goal: "goal e"}
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
			mustPut(t, s, &Solution{Workspace: "w", Key: fmt.Sprint(i), Goal: "g"})
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
				mustPut(t, s, &Solution{Workspace: "w", Key: "0", Goal: "g0 v2"})
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
				mustPut(t, s, &Solution{Workspace: "w", Key: "6", Goal: "g"})
			}
			step++
		}
		r.check(t, s, "w")
	})

	// Solutions are stamped by the store's clock, which ticks on every
	// call: in these tests the order of the puts is the order of Updated.
	putSol := func(t *testing.T, s Store, ws, key string, verified bool) *Solution {
		t.Helper()
		src := SourceAuto
		if verified {
			src = SourceAPI
		}
		sol := &Solution{Workspace: ws, Key: key, Goal: "goal " + key, Source: src, Verified: verified}
		mustPut(t, s, sol)
		return sol
	}
	// pruned prunes, checks the count, and checks that the change feed,
	// read from where r stands, shows exactly the removed solutions as
	// deletions, so a replica's recall index drops them.
	pruned := func(t *testing.T, s Store, r *feedReader, before time.Time, max int, want ...*Solution) {
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
			if _, err := s.GetSolution(ctx, sol.Workspace, sol.ID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("pruned solution %s still there: %v", sol.Key, err)
			}
		}
		if !reflect.DeepEqual(gone, wantGone) {
			t.Fatalf("feed deletions %v, want %v", gone, wantGone)
		}
		r.apply(t, ch, last)
	}
	// keys lists a workspace's solutions' keys, most recently updated first.
	keys := func(t *testing.T, s Store, ws string) string {
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

	t.Run("closed", func(t *testing.T) {
		s := open(t)
		mustAdd(t, s, &Incident{Workspace: "w", Project: "p"})
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		tests := []struct {
			name string
			call func() error
		}{
			{"AddIncident", func() error { return s.AddIncident(ctx, &Incident{Workspace: "w", Project: "p"}) }},
			{"AddIncidentOnce", func() error {
				_, err := s.AddIncidentOnce(ctx, &Incident{Workspace: "w", Project: "p"}, "k")
				return err
			}},
			{"ListIncidents", func() error {
				_, err := s.ListIncidents(ctx, IncidentQuery{Workspace: "w", Project: "p"})
				return err
			}},
			{"DeleteIncidents", func() error { _, err := s.DeleteIncidents(ctx, "w", "p"); return err }},
			{"PruneIncidents", func() error { _, err := s.PruneIncidents(ctx, testEpoch, 1); return err }},
			{"PutSolution", func() error { return s.PutSolution(ctx, &Solution{Workspace: "w", Key: "k", Goal: "g"}) }},
			{"GetSolution", func() error { _, err := s.GetSolution(ctx, "w", "x"); return err }},
			{"ListSolutions", func() error { _, err := s.ListSolutions(ctx, "w"); return err }},
			{"DeleteSolution", func() error { return s.DeleteSolution(ctx, "w", "x") }},
			{"PruneSolutions", func() error { _, err := s.PruneSolutions(ctx, testEpoch, 1); return err }},
			{"SolutionChanges", func() error { _, _, err := s.SolutionChanges(ctx, 0, 1); return err }},
			{"PutFix", func() error {
				return s.PutFix(ctx, &Fix{Workspace: "w", Project: "p", Key: "k", Tool: "t"})
			}},
			{"ListFixes", func() error { _, err := s.ListFixes(ctx, FixQuery{Workspace: "w", Project: "p"}); return err }},
			{"DeleteFix", func() error { return s.DeleteFix(ctx, "w", "p", "x") }},
			{"DeleteFixes", func() error { _, err := s.DeleteFixes(ctx, "w", "p"); return err }},
			{"PruneFixes", func() error { _, err := s.PruneFixes(ctx, testEpoch, 1); return err }},
			{"Ping", func() error { return s.Ping(ctx) }},
			{"Close", func() error { return s.Close() }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(); !errors.Is(err, ErrClosed) {
					t.Fatalf("err = %v, want ErrClosed", err)
				}
			})
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		s := open(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.AddIncident(cctx, &Incident{Workspace: "w", Project: "p"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("AddIncident err = %v, want context.Canceled", err)
		}
		if _, err := s.ListIncidents(cctx, IncidentQuery{Workspace: "w", Project: "p"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("ListIncidents err = %v, want context.Canceled", err)
		}
		if got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p"}); len(got) != 0 {
			t.Fatalf("cancelled AddIncident stored %d incidents", len(got))
		}
	})

	t.Run("persists across reopen", func(t *testing.T) {
		s := open(t)
		v, ok := reopeners.Load(s)
		if !ok {
			t.Fatalf("open did not register a reopen function")
		}
		inc := Incident{Workspace: "w", Project: "p", Session: "s", Message: "kept"}
		mustAdd(t, s, &inc)
		if ok, err := s.AddIncidentOnce(ctx, &Incident{Workspace: "w", Project: "p", Message: "once"}, "k"); !ok || err != nil {
			t.Fatalf("AddIncidentOnce = %v, %v", ok, err)
		}
		sol := Solution{Workspace: "w", Key: "k", Goal: "g"}
		mustPut(t, s, &sol)
		fix := Fix{Workspace: "w", Project: "p", Key: "k", Tool: "run", Call: `{"cmd":"ls"}`, Failures: 2}
		mustPutFix(t, s, &fix)
		_, last, err := s.SolutionChanges(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}

		s2 := v.(func(t *testing.T) Store)(t)
		if got := messages(mustList(t, s2, IncidentQuery{Workspace: "w", Project: "p", Session: "s"})); got != "kept" {
			t.Fatalf("after reopen, session incidents = %q", got)
		}
		if got := messages(mustList(t, s2, IncidentQuery{Workspace: "w", Project: "p"})); got != "once,kept" {
			t.Fatalf("after reopen, incidents = %q", got)
		}
		if ok, err := s2.AddIncidentOnce(ctx, &Incident{Workspace: "w", Project: "p"}, "k"); ok || err != nil {
			t.Fatalf("after reopen, dedupe key forgotten: AddIncidentOnce = %v, %v", ok, err)
		}
		if got, err := s2.GetSolution(ctx, "w", sol.ID); err != nil || !reflect.DeepEqual(got, sol) {
			t.Fatalf("after reopen, GetSolution = %+v, %v; want %+v", got, err, sol)
		}
		if got := mustListFixes(t, s2, FixQuery{Workspace: "w", Project: "p"}); len(got) != 1 || got[0] != fix {
			t.Fatalf("after reopen, ListFixes = %+v; want [%+v]", got, fix)
		}
		// The feed continues after the old sequence.
		mustPut(t, s2, &Solution{Workspace: "w", Key: "k2", Goal: "g2"})
		ch, _, err := s2.SolutionChanges(ctx, last, 0)
		if err != nil || len(ch) != 1 || ch[0].Seq <= last || ch[0].Solution.Key != "k2" {
			t.Fatalf("after reopen, changes after %d = %+v, %v", last, ch, err)
		}
	})

	testFixes(t, open)

	t.Run("concurrent writers", func(t *testing.T) {
		s := open(t)
		const writers, each = 8, 25
		var wg sync.WaitGroup
		errs := make(chan error, writers*each*3)
		var stored atomic.Int64
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					if err := s.AddIncident(ctx, &Incident{Workspace: "w", Project: "p",
						Session: fmt.Sprint("s", w%2), Message: fmt.Sprint(w, "/", i)}); err != nil {
						errs <- err
					}
					// Every writer tries the same 5 keys.
					ok, err := s.AddIncidentOnce(ctx, &Incident{Workspace: "w", Project: "once"}, fmt.Sprint("k", i%5))
					if err != nil {
						errs <- err
					}
					if ok {
						stored.Add(1)
					}
					if err := s.PutSolution(ctx, &Solution{Workspace: "w", Key: fmt.Sprint("k", i%10),
						Goal: fmt.Sprint("by ", w)}); err != nil {
						errs <- err
					}
					if _, err := s.ListIncidents(ctx, IncidentQuery{Workspace: "w", Project: "p", Limit: 10}); err != nil {
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
		if got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p", Limit: maxLimit}); len(got) != writers*each {
			t.Fatalf("%d incidents, want %d", len(got), writers*each)
		}
		for _, sess := range []string{"s0", "s1"} {
			got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "p", Session: sess, Limit: maxLimit})
			if len(got) != writers*each/2 {
				t.Fatalf("session %s: %d incidents, want %d", sess, len(got), writers*each/2)
			}
		}
		if got := mustList(t, s, IncidentQuery{Workspace: "w", Project: "once"}); len(got) != 5 || stored.Load() != 5 {
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

	testIncidentBatches(t, open)
	testDashboard(t, open)
}

// feedReader follows the change feed the way a replica does.
type feedReader struct {
	cursor   int64
	state    map[string]Solution // live solutions by ID
	liveSeen map[string]int      // live entries received per ID
}

func newFeedReader() *feedReader {
	return &feedReader{state: map[string]Solution{}, liveSeen: map[string]int{}}
}

func (r *feedReader) apply(t *testing.T, ch []SolutionChange, last int64) {
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
func (r *feedReader) readAll(t *testing.T, s Store, limit int) {
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
func (r *feedReader) check(t *testing.T, s Store, workspaces ...string) {
	t.Helper()
	want := map[string]Solution{}
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

func mustAdd(t *testing.T, s Store, inc *Incident) {
	t.Helper()
	if err := s.AddIncident(context.Background(), inc); err != nil {
		t.Fatalf("AddIncident: %v", err)
	}
}

func mustPut(t *testing.T, s Store, sol *Solution) {
	t.Helper()
	if err := s.PutSolution(context.Background(), sol); err != nil {
		t.Fatalf("PutSolution: %v", err)
	}
}

func mustList(t *testing.T, s Store, q IncidentQuery) []Incident {
	t.Helper()
	got, err := s.ListIncidents(context.Background(), q)
	if err != nil {
		t.Fatalf("ListIncidents(%+v): %v", q, err)
	}
	return got
}

// addN stores n incidents of one tenant at start, start+1m, ...; their
// Message is their index.
func addN(t *testing.T, s Store, ws, proj, session string, n int, start time.Time) {
	t.Helper()
	for i := range n {
		mustAdd(t, s, &Incident{Time: start.Add(time.Duration(i) * time.Minute), Workspace: ws, Project: proj,
			Session: session, Type: TypeHTTPError, StatusCode: 429, Message: fmt.Sprint(i)})
	}
}

// messages joins the incidents' messages with commas.
func messages(incs []Incident) string {
	m := make([]string, len(incs))
	for i, inc := range incs {
		m[i] = inc.Message
	}
	return strings.Join(m, ",")
}

// testFixes is the part of the conformance suite about learned fixes.
func testFixes(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	// Fixes are stamped by the store's clock, which ticks on every call:
	// the order of the puts is the order of Updated.
	putFix := func(t *testing.T, s Store, ws, proj, key string) *Fix {
		t.Helper()
		f := &Fix{Workspace: ws, Project: proj, Key: key, Pattern: "SYNTAX COMPLIANCE ERROR", Tool: "run_tests",
			Failure: "FAIL " + key, Call: `{"cmd":"go test ./` + key + `"}`, Failures: 2}
		mustPutFix(t, s, f)
		return f
	}
	keysOf := func(t *testing.T, s Store, ws, proj string) string {
		t.Helper()
		list := mustListFixes(t, s, FixQuery{Workspace: ws, Project: proj, Limit: maxLimit})
		k := make([]string, len(list))
		for i, f := range list {
			if f.Workspace != ws || f.Project != proj {
				t.Fatalf("%s/%s lists a fix of %s/%s", ws, proj, f.Workspace, f.Project)
			}
			k[i] = f.Key
		}
		return strings.Join(k, ",")
	}

	t.Run("fixes put list delete", func(t *testing.T) {
		s := open(t)
		a := Fix{Workspace: "w", Project: "p", Key: "p:run_tests|SYNTAX COMPLIANCE ERROR", Pattern: "SYNTAX COMPLIANCE ERROR",
			Fingerprint: "0123456789abcdef", Tool: "run_tests", Failure: "SyntaxError: Unexpected end of input",
			Call: `{"cmd":"node --check parser.js"}`, Explanation: "closed the brace", Failures: 3, Session: "s1"}
		mustPutFix(t, s, &a)
		if len(a.ID) != 26 || a.Created.IsZero() || !a.Created.Equal(a.Updated) {
			t.Fatalf("stored fix: %+v", a)
		}
		if d := a.Created.Sub(clockEpoch); d < 0 || d > time.Hour {
			t.Fatalf("Created %v not from the store clock (starts %v)", a.Created, clockEpoch)
		}
		b := Fix{Workspace: "w", Project: "p", Key: "f:shell|fedcba9876543210", Pattern: "REPEATED ERROR", Tool: "shell",
			Failure: "exit 1", Call: `{"command":["ls"]}`, Failures: 2}
		mustPutFix(t, s, &b)
		// The same key in other tenants is another fix.
		others := []Fix{
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
		if got := mustListFixes(t, s, FixQuery{Workspace: "w", Project: "p"}); !reflect.DeepEqual(got, []Fix{b, a}) {
			t.Fatalf("ListFixes:\n got %+v\nwant [b a] %+v", got, []Fix{b, a})
		}
		for _, o := range others[:3] {
			if got := mustListFixes(t, s, FixQuery{Workspace: o.Workspace, Project: o.Project}); len(got) != 1 || got[0] != o {
				t.Fatalf("ListFixes(%s/%s) = %+v, want [%+v]", o.Workspace, o.Project, got, o)
			}
		}
		if got := mustListFixes(t, s, FixQuery{Workspace: "nobody", Project: "p"}); got == nil || len(got) != 0 {
			t.Fatalf("ListFixes(unknown tenant) = %#v, want an empty list", got)
		}
		if err := s.DeleteFix(ctx, "w", "p", b.ID); err != nil {
			t.Fatalf("DeleteFix: %v", err)
		}
		if got := mustListFixes(t, s, FixQuery{Workspace: "w", Project: "p"}); !reflect.DeepEqual(got, []Fix{a}) {
			t.Fatalf("ListFixes after delete = %+v", got)
		}
		if err := s.DeleteFix(ctx, "w", "p", b.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second DeleteFix err = %v, want ErrNotFound", err)
		}
		// The key is free again: a new fix with it gets a new ID.
		b2 := Fix{Workspace: "w", Project: "p", Key: b.Key, Tool: "shell"}
		mustPutFix(t, s, &b2)
		if b2.ID == b.ID || !b2.Created.After(b.Created) {
			t.Fatalf("re-created fix %+v reused the deleted one's ID or Created (%s %v)", b2, b.ID, b.Created)
		}
	})

	t.Run("fix upsert by key keeps ID and Created", func(t *testing.T) {
		s := open(t)
		first := Fix{Workspace: "w", Project: "p", Key: "k", Pattern: "REPEATED ERROR", Fingerprint: "aaaa", Tool: "t1",
			Failure: "f1", Call: "c1", Explanation: "e1", Failures: 2, Session: "s1"}
		mustPutFix(t, s, &first)
		second := Fix{ID: "ignored", Workspace: "w", Project: "p", Key: "k", Pattern: "P2", Fingerprint: "bbbb", Tool: "t2",
			Failure: "f2", Call: "c2", Explanation: "", Failures: 5, Session: "s2", Created: testEpoch.Add(-time.Hour)}
		mustPutFix(t, s, &second)
		if second.ID != first.ID || !second.Created.Equal(first.Created) {
			t.Fatalf("upsert changed ID/Created: first %s %v, second %s %v", first.ID, first.Created, second.ID, second.Created)
		}
		if !second.Updated.After(first.Updated) {
			t.Fatalf("Updated %v not after %v", second.Updated, first.Updated)
		}
		want := Fix{ID: first.ID, Workspace: "w", Project: "p", Key: "k", Pattern: "P2", Fingerprint: "bbbb", Tool: "t2",
			Failure: "f2", Call: "c2", Failures: 5, Session: "s2", Created: first.Created, Updated: second.Updated}
		if second != want {
			t.Fatalf("returned record:\n got %+v\nwant %+v", second, want)
		}
		if got := mustListFixes(t, s, FixQuery{Workspace: "w", Project: "p"}); len(got) != 1 || got[0] != want {
			t.Fatalf("ListFixes = %+v, want [%+v]", got, want)
		}
		// A key of any length: kept whole, deduped on all of it.
		long := strings.Repeat("k", 3000)
		for _, key := range []string{long, long, long[:2999] + "x"} {
			putFix(t, s, "w", "long", key)
		}
		list := mustListFixes(t, s, FixQuery{Workspace: "w", Project: "long"})
		if len(list) != 2 || list[0].Key != long[:2999]+"x" || list[1].Key != long {
			t.Fatalf("long keys: %d fixes", len(list))
		}
	})

	t.Run("fixes limit", func(t *testing.T) {
		s := open(t)
		var newest *Fix
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
				got := mustListFixes(t, s, FixQuery{Workspace: "w", Project: "p", Limit: tt.limit})
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

	t.Run("invalid fixes", func(t *testing.T) {
		s := open(t)
		valid := func(edit func(f *Fix)) *Fix {
			f := &Fix{Workspace: "w", Project: "p", Key: "k", Tool: "t"}
			edit(f)
			return f
		}
		tests := []struct {
			name string
			call func() error
		}{
			{"nil", func() error { return s.PutFix(ctx, nil) }},
			{"without workspace", func() error { return s.PutFix(ctx, valid(func(f *Fix) { f.Workspace = "" })) }},
			{"without project", func() error { return s.PutFix(ctx, valid(func(f *Fix) { f.Project = "" })) }},
			{"without key", func() error { return s.PutFix(ctx, valid(func(f *Fix) { f.Key = "" })) }},
			{"without tool", func() error { return s.PutFix(ctx, valid(func(f *Fix) { f.Tool = "" })) }},
			{"negative failures", func() error { return s.PutFix(ctx, valid(func(f *Fix) { f.Failures = -1 })) }},
			{"list without workspace", func() error { _, err := s.ListFixes(ctx, FixQuery{Project: "p"}); return err }},
			{"list without project", func() error { _, err := s.ListFixes(ctx, FixQuery{Workspace: "w"}); return err }},
			{"delete all without project", func() error { _, err := s.DeleteFixes(ctx, "w", ""); return err }},
			{"delete all without workspace", func() error { _, err := s.DeleteFixes(ctx, "", "p"); return err }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := tt.call(); !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
			})
		}
		if got := mustListFixes(t, s, FixQuery{Workspace: "w", Project: "p"}); len(got) != 0 {
			t.Fatalf("invalid calls stored %d fixes", len(got))
		}
	})

	t.Run("any JSON string in every fix field", func(t *testing.T) {
		s := open(t)
		odd := func(s string) string { return s + "\x00nul\xffbad\x00" }
		clean := func(s string) string { return s + "\uFFFDnul\uFFFDbad\uFFFD" }
		f := Fix{Workspace: odd("w"), Project: odd("p"), Key: odd("key"), Pattern: odd("pattern"), Fingerprint: odd("fp"),
			Tool: odd("tool"), Failure: odd("failure"), Call: odd("call"), Explanation: odd("explanation"), Failures: 2,
			Session: odd("s")}
		mustPutFix(t, s, &f)
		want := Fix{ID: f.ID, Workspace: clean("w"), Project: clean("p"), Key: clean("key"), Pattern: clean("pattern"),
			Fingerprint: clean("fp"), Tool: clean("tool"), Failure: clean("failure"), Call: clean("call"),
			Explanation: clean("explanation"), Failures: 2, Session: clean("s"), Created: f.Created, Updated: f.Updated}
		if f != want {
			t.Fatalf("stored fix:\n got %+v\nwant %+v", f, want)
		}
		// The same key as sent updates it.
		again := Fix{Workspace: odd("w"), Project: odd("p"), Key: odd("key"), Tool: "t"}
		mustPutFix(t, s, &again)
		if again.ID != f.ID {
			t.Fatalf("the same key stored a second fix %s (first %s)", again.ID, f.ID)
		}
		// Read and deleted by the names as sent and as stored.
		for _, q := range []FixQuery{{Workspace: odd("w"), Project: odd("p")}, {Workspace: clean("w"), Project: clean("p")}} {
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
				if err := s.DeleteFix(ctx, tt.ws, tt.proj, tt.id); !errors.Is(err, ErrNotFound) {
					t.Fatalf("err = %v, want ErrNotFound", err)
				}
			})
		}
		if got := mustListFixes(t, s, FixQuery{Workspace: "w", Project: "p"}); len(got) != 1 || got[0] != *f {
			t.Fatalf("fix gone after failed deletes: %+v", got)
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

	t.Run("fix changes move the incident version", func(t *testing.T) {
		s := open(t)
		vw := versionWatch{t, s}
		ver, changed, same := vw.ver, vw.changed, vw.same
		v := ver("w", "p")
		a := putFix(t, s, "w", "p", "a")
		v = changed("put", v)
		putFix(t, s, "w", "p", "a")
		v = changed("put again (update)", v)
		mustListFixes(t, s, FixQuery{Workspace: "w", Project: "p"})
		same("list", v)
		putFix(t, s, "w", "other", "a")
		putFix(t, s, "other", "p", "a")
		same("other tenants' puts", v)
		if err := s.DeleteFix(ctx, "w", "p", "nope"); !errors.Is(err, ErrNotFound) {
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
		c := mustListFixes(t, s, FixQuery{Workspace: "w", Project: "p"})
		if len(c) != 1 {
			t.Fatalf("%d fixes left", len(c))
		}
		if _, err := s.PruneFixes(ctx, c[0].Updated.Add(time.Microsecond), 0); err != nil {
			t.Fatal(err)
		}
		changed("prune by age", v)
	})
}

func mustPutFix(t *testing.T, s Store, f *Fix) {
	t.Helper()
	if err := s.PutFix(context.Background(), f); err != nil {
		t.Fatalf("PutFix: %v", err)
	}
}

func mustListFixes(t *testing.T, s Store, q FixQuery) []Fix {
	t.Helper()
	got, err := s.ListFixes(context.Background(), q)
	if err != nil {
		t.Fatalf("ListFixes(%+v): %v", q, err)
	}
	return got
}

// versionWatch reads incident versions of a store in a test: ver reads a
// tenant's; changed and same check how tenant w/p's moved since before.
type versionWatch struct {
	t *testing.T
	s Store
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
