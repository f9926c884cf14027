package storetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// testIncidents checks adding and listing incidents: order, limits,
// windows, sessions, tenants, dedupe keys, deletion.
func testIncidents(t *testing.T, open func(t *testing.T) store.Store) {
	ctx := context.Background()

	t.Run("add and list newest first", func(t *testing.T) {
		s := open(t)
		// Stored out of order; listed by Time.
		offsets := []int{3, 1, 4, 0, 2}
		want := make([]store.Incident, len(offsets))
		for _, off := range offsets {
			inc := store.Incident{
				Time: Epoch.Add(time.Duration(off) * time.Minute), Workspace: "w", Project: "p",
				Session: "s1", Agent: "agent", Provider: "openai", Model: "gpt-x", Type: store.TypeHTTPError,
				StatusCode: 500 + off, Message: fmt.Sprintf("boom %d", off), Fingerprint: "fp",
			}
			mustAdd(t, s, &inc)
			if len(inc.ID) != 26 {
				t.Fatalf("ID %q: want 26 characters", inc.ID)
			}
			want[len(offsets)-1-off] = inc
		}
		got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("list:\n got %+v\nwant %+v", got, want)
		}
	})

	t.Run("zero time gets the store clock", func(t *testing.T) {
		s := open(t)
		inc := store.Incident{Workspace: "w", Project: "p", Type: store.TypeTimeout, Message: "slow"}
		mustAdd(t, s, &inc)
		if inc.Time.IsZero() || inc.ID == "" {
			t.Fatalf("Time and ID not assigned: %+v", inc)
		}
		if d := inc.Time.Sub(ClockEpoch); d < 0 || d > time.Hour {
			t.Fatalf("Time %v not from the store clock (starts %v)", inc.Time, ClockEpoch)
		}
		got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"})
		if len(got) != 1 || !reflect.DeepEqual(got[0], inc) {
			t.Fatalf("list = %+v, want [%+v]", got, inc)
		}
	})

	t.Run("same time listed last stored first", func(t *testing.T) {
		s := open(t)
		for i := range 3 {
			mustAdd(t, s, &store.Incident{Time: Epoch, Workspace: "w", Project: "p", Message: fmt.Sprint(i)})
		}
		got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"}))
		if want := "2,1,0"; got != want {
			t.Fatalf("order = %s, want %s", got, want)
		}
	})

	t.Run("limit", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "p", "", 150, Epoch)
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
				got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Limit: tt.limit})
				if len(got) != tt.want {
					t.Fatalf("got %d incidents, want %d", len(got), tt.want)
				}
				// The newest ones: minute 149 first.
				if want := Epoch.Add(149 * time.Minute); !got[0].Time.Equal(want) {
					t.Fatalf("first = %v, want %v", got[0].Time, want)
				}
			})
		}
	})

	t.Run("since", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "p", "", 10, Epoch) // minutes 0..9
		tests := []struct {
			name  string
			since time.Time
			want  string
		}{
			{"zero is no bound", time.Time{}, "9,8,7,6,5,4,3,2,1,0"},
			{"inclusive", Epoch.Add(5 * time.Minute), "9,8,7,6,5"},
			{"a nanosecond later excludes", Epoch.Add(5*time.Minute + time.Nanosecond), "9,8,7,6"},
			{"after all", Epoch.Add(time.Hour), ""},
			{"before all", Epoch.Add(-time.Hour), "9,8,7,6,5,4,3,2,1,0"},
			{"other time zone", Epoch.Add(8 * time.Minute).In(time.FixedZone("X", 5*3600)), "9,8"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Since: tt.since}))
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
			mustAdd(t, s, &store.Incident{Time: Epoch.Add(time.Duration(i) * time.Minute),
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
			{"with since", "a", Epoch.Add(4 * time.Minute), 0, "8,4"},
			{"with limit", "b", time.Time{}, 2, "9,5"},
			{"unknown", "zzz", time.Time{}, 0, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p",
					Session: tt.session, Since: tt.since, Limit: tt.limit})
				for _, inc := range got {
					if tt.session != "" && inc.Session != tt.session {
						t.Fatalf("incident of session %q in %q", inc.Session, tt.session)
					}
				}
				if m := Messages(got); m != tt.want {
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
			addN(t, s, tn.ws, tn.proj, "s", i+1, Epoch)
		}
		for i, tn := range tenants {
			got := mustList(t, s, store.IncidentQuery{Workspace: tn.ws, Project: tn.proj})
			if len(got) != i+1 {
				t.Fatalf("%s/%s: %d incidents, want %d", tn.ws, tn.proj, len(got), i+1)
			}
			for _, inc := range got {
				if inc.Workspace != tn.ws || inc.Project != tn.proj {
					t.Fatalf("%s/%s: got incident of %s/%s", tn.ws, tn.proj, inc.Workspace, inc.Project)
				}
			}
			got = mustList(t, s, store.IncidentQuery{Workspace: tn.ws, Project: tn.proj, Session: "s"})
			if len(got) != i+1 {
				t.Fatalf("%s/%s session: %d incidents, want %d", tn.ws, tn.proj, len(got), i+1)
			}
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w3", Project: "p1"}); len(got) != 0 {
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
			inc := store.Incident{Workspace: st.ws, Project: st.proj, Type: store.TypeToolError, Message: fmt.Sprint(i)}
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
		if got := Messages(mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"})); got != "12,11,10,8,5,0" {
			t.Fatalf("w/p incidents = %q", got)
		}
	})

	t.Run("delete incidents of one tenant", func(t *testing.T) {
		s := open(t)
		addN(t, s, "w", "p", "s", 4, Epoch)
		addN(t, s, "w", "q", "s", 3, Epoch)
		addN(t, s, "v", "p", "s", 2, Epoch)
		if ok, err := s.AddIncidentOnce(ctx, &store.Incident{Workspace: "w", Project: "p"}, "k"); !ok || err != nil {
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
			if got := mustList(t, s, store.IncidentQuery{Workspace: tc.ws, Project: tc.proj}); len(got) != tc.want {
				t.Fatalf("%s/%s: %d incidents, want %d", tc.ws, tc.proj, len(got), tc.want)
			}
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Session: "s"}); len(got) != 0 {
			t.Fatalf("session index kept %d deleted incidents", len(got))
		}
		if ok, err := s.AddIncidentOnce(ctx, &store.Incident{Workspace: "w", Project: "p"}, "k"); !ok || err != nil {
			t.Fatalf("dedupe key survived DeleteIncidents: AddIncidentOnce = %v, %v", ok, err)
		}
		if n, err := s.DeleteIncidents(ctx, "nobody", "p"); n != 0 || err != nil {
			t.Fatalf("DeleteIncidents(unknown) = %d, %v", n, err)
		}
	})

	t.Run("incident code", func(t *testing.T) {
		s := open(t)
		with := store.Incident{Time: Epoch, Workspace: "w", Project: "p", Type: "network_error", Code: "ECONNRESET", Message: "socket hang up"}
		without := store.Incident{Time: Epoch.Add(time.Minute), Workspace: "w", Project: "p", Type: store.TypeHTTPError, StatusCode: 503, Message: "unavailable"}
		mustAdd(t, s, &with)
		mustAdd(t, s, &without)
		got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p"})
		if len(got) != 2 || got[0] != without || got[1] != with {
			t.Fatalf("list:\n got %+v\nwant [%+v %+v]", got, without, with)
		}
		once := store.Incident{Workspace: "w", Project: "p", Type: "tool_error", Code: "ENOENT", Message: "no such file"}
		if ok, err := s.AddIncidentOnce(ctx, &once, "call_1"); !ok || err != nil {
			t.Fatalf("AddIncidentOnce = %v, %v", ok, err)
		}
		if got := mustList(t, s, store.IncidentQuery{Workspace: "w", Project: "p", Limit: 1}); len(got) != 1 || got[0].Code != "ENOENT" {
			t.Fatalf("code of AddIncidentOnce: %+v", got)
		}
	})
}
