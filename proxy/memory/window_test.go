package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/store"
)

// TestWindowFollowsWithoutCopying: a window that follows new incidents
// appends them to its array when it is the first to follow it, copies
// when another window already did, merges incidents older than its
// newest, keeps the newest limit of them, and its provider failures'
// tally (an oldest incident that was its group's newest included) says
// what Detect says of what it holds.
func TestWindowFollowsWithoutCopying(t *testing.T) {
	s := newTestMemory(t, tempBolt(t))
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	fail := func(id string, at time.Time, msg string) store.Incident {
		return store.Incident{ID: id, Time: at, Workspace: "w", Project: "p", Type: store.TypeHTTPError,
			StatusCode: 500, Provider: "p1", Message: msg}
	}
	// Two members of one group at the same time, the later write first by
	// ID: the oldest in the window's order is the group's newest.
	incs := make([]store.Incident, 2, 8)
	incs[0] = fail("b", t0, "shard 7 is rebuilding")
	incs[1] = fail("a", t0, "shard 9 is rebuilding")
	w := &guardWindow{workspace: "w", project: "p", incidents: incs, span: time.Hour, limit: 3,
		validUntil: t0.Add(time.Hour), newest: t0, own: &ownCache{}}
	check := func(w *guardWindow) {
		t.Helper()
		got := w.providerTally(s.Guard(), 0, nil)
		if got.Stale() {
			t.Fatal("stale tally")
		}
		if want := s.Guard().DetectAll(w.incidents, w.newest); !reflect.DeepEqual(got.Entries(1), want) {
			t.Fatalf("tally %+v\nDetect %+v", got.Entries(1), want)
		}
	}
	check(w)

	s.guardCache.mu.Lock()
	defer s.guardCache.mu.Unlock()
	w1 := w.with([]store.Incident{fail("c", t0.Add(time.Second), "other")}, 1, nil, false)
	if &w1.incidents[0] != &w.incidents[0] || len(w1.incidents) != 3 {
		t.Fatal("the first window to follow did not append to the array")
	}
	check(w1)
	w2 := w.with([]store.Incident{fail("d", t0.Add(time.Second), "more")}, 1, nil, false)
	if &w2.incidents[0] == &w.incidents[0] || w1.incidents[2].ID != "c" {
		t.Fatal("a second window to follow wrote over the first one's array")
	}
	check(w2)
	// At the limit: the oldest ("b", the group's newest) leaves.
	w3 := w1.with([]store.Incident{fail("e", t0.Add(2*time.Second), "other")}, 2, nil, false)
	if len(w3.incidents) != 3 || w3.incidents[0].ID != "a" || !w3.full {
		t.Fatalf("window %+v", ids(w3.incidents))
	}
	check(w3)
	if e := w3.providerTally(s.Guard(), 0, nil).Entries(1); len(e) != 2 || e[1].Example != "shard 9 is rebuilding" {
		t.Fatalf("entries %+v", e)
	}
	// Older than the newest: merged in order; the oldest leaves.
	w4 := w3.with([]store.Incident{fail("f", t0.Add(500*time.Millisecond), "shard 7 is rebuilding")}, 3, nil, false)
	if got := ids(w4.incidents); !reflect.DeepEqual(got, []string{"f", "c", "e"}) {
		t.Fatalf("window %v", got)
	}
	check(w4)
}

// countingStore counts reads of a tenant's window (incident reads not
// limited to a session).
type countingStore struct {
	store.Store
	lists atomic.Int64
}

func (s *countingStore) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	if q.Session == "" {
		s.lists.Add(1)
	}
	return s.Store.ListIncidents(ctx, q)
}

// TestIncrementalGuardMatchesAFullRead: whatever mix of writes a tenant
// sees (this replica's provider failures and tool errors, another
// replica's writes, deletions), the guard this replica derives from the
// window it keeps up to date is the one a replica reading everything from
// the store derives; and its own writes cost it no read.
func TestIncrementalGuardMatchesAFullRead(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 14))
			bolt := tempBolt(t)
			counted := &countingStore{Store: bolt}
			now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			limit := 10 + rnd.IntN(20)
			inc := newTestMemory(t, counted, func(o *Options) { o.Now, o.GuardReadLimit = clock, limit })
			ctx := context.Background()
			providers := []string{"p1", "p2"}
			convs := []string{"", "c1", "c2"}
			msgs := []string{"Rate limit reached", "SyntaxError: Unexpected end of input", "connection reset by peer", "FAIL: TestParse",
				"upstream said: shard 7 of 9 is rebuilding", "upstream said: shard 3 of 9 is rebuilding", ""}
			foreign := 0
			type mark struct {
				provider string
				at       time.Time
			}
			var marks []mark // recoveries, replayed on the replica reading everything
			for step := range 60 {
				now = now.Add(time.Duration(rnd.IntN(30)) * time.Second) // sometimes not at all: ties
				in := &store.Incident{Time: now.Add(-time.Duration(rnd.IntN(3)) * time.Second), Workspace: "w", Project: "p",
					Message: msgs[rnd.IntN(len(msgs))]}
				if rnd.IntN(2) == 0 {
					in.Type, in.StatusCode, in.Provider = store.TypeHTTPError, []int{429, 500, 502}[rnd.IntN(3)], providers[rnd.IntN(2)]
				} else {
					in.Type, in.Session = store.TypeToolError, convs[1+rnd.IntN(2)]
				}
				switch r := rnd.IntN(20); {
				case r == 0:
					if _, err := bolt.DeleteIncidents(ctx, "w", "p"); err != nil {
						t.Fatal(err)
					}
					foreign++
				case r < 4: // another replica
					if err := bolt.AddIncident(ctx, in); err != nil {
						t.Fatal(err)
					}
					foreign++
				case in.Type == store.TypeToolError:
					if _, err := inc.writeIncident(within(ctx), in, fmt.Sprint(in.Session, "|call_", step%7), false, nil); err != nil {
						t.Fatal(err)
					}
				default:
					if _, err := inc.writeIncident(within(ctx), in, "", true, nil); err != nil {
						t.Fatal(err)
					}
				}
				if rnd.IntN(8) == 0 { // a provider answered well
					m := mark{providers[rnd.IntN(2)], now.Add(-time.Duration(rnd.IntN(40)) * time.Second)}
					marks = append(marks, m)
					inc.recovered.mark(tenantKey{"w", "p"}, m.provider, m.at)
				}
				if rnd.IntN(3) > 0 && step < 59 {
					continue // several writes between two reads of the guard
				}
				// What this replica shows before its commits, a full read
				// finds once they are done.
				inc.writer.wait()
				at := map[string]time.Time{} // the latest recovery of each provider
				for _, m := range marks {
					at[m.provider] = m.at
				}
				// At now, and for a request that arrived before the newest
				// incidents (a private window).
				for _, when := range []time.Time{now, now.Add(-time.Duration(rnd.IntN(40)) * time.Second)} {
					for _, conv := range convs {
						got, gotBlock, _, err := inc.Preview(ctx, "w", "p", conv, when)
						if err != nil {
							t.Fatal(err)
						}
						want := fullGuard(t, inc, bolt, conv, when, limit, at)
						if wantBlock := guard.Block(want); !reflect.DeepEqual(got, want) || gotBlock != wantBlock {
							t.Fatalf("step %d, conversation %q at %v:\nincremental %+v\n  full read %+v", step, conv, when, got, want)
						}
					}
				}
			}
			// Window reads: the first, and at most one after each foreign
			// write (fullGuard reads the store on its own).
			if reads := counted.lists.Load(); reads > int64(1+foreign) {
				t.Fatalf("%d incident reads for %d foreign writes: the window was read again after its own writes", reads, foreign)
			}
		})
	}
}

// fullGuard is the guard of a conversation at now derived from scratch:
// the tenant's newest limit incidents inside the window read from the
// store, those after now left out, provider failures after their
// provider's latest recovery (at), the conversation's own failures (read
// on their own too when the read hit its limit), run through Detect.
func fullGuard(t *testing.T, s *Memory, st store.Store, conv string, now time.Time, limit int, at map[string]time.Time) []guard.Entry {
	t.Helper()
	ctx := context.Background()
	lo := now.Add(-s.Guard().Config().Window)
	read, err := st.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p", Since: lo, Limit: limit})
	if err != nil {
		t.Fatal(err)
	}
	var incs []store.Incident
	seen := map[string]bool{}
	own := func(in store.Incident) bool {
		return in.Type != store.TypeLoop && !guard.ProviderFailure(in.Type) && in.Session == conv && !in.Time.After(now) && !in.Time.Before(lo)
	}
	for _, in := range read {
		seen[in.ID] = true
		if in.Time.After(now) {
			continue
		}
		if guard.ProviderFailure(in.Type) {
			if r, ok := at[in.Provider]; !ok || in.Time.After(r) {
				incs = append(incs, in)
			}
		} else if own(in) {
			incs = append(incs, in)
		}
	}
	if len(read) >= limit && conv != "" {
		mine, err := st.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p", Session: conv, Since: lo, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range mine {
			if !seen[in.ID] && own(in) {
				incs = append(incs, in)
			}
		}
	}
	return s.withFixes(s.Guard().DetectAll(incs, now), nil)
}

// TestPendingWithAppendsInPlaceOnce: the first window to follow another
// with one more pending write appends to its array; any other copies,
// so neither sees the other's write.
func TestPendingWithAppendsInPlaceOnce(t *testing.T) {
	a, b, c := &pendingWrite{}, &pendingWrite{}, &pendingWrite{}
	w := &guardWindow{pending: make([]*pendingWrite, 1, 4)}
	w.pending[0] = a
	first := w.pendingWith(b)
	second := w.pendingWith(c)
	if &first[0] != &w.pending[0] {
		t.Error("the first follower copied the array")
	}
	if &second[0] == &w.pending[0] {
		t.Error("a second follower appended to the array the first one did")
	}
	if !slices.Equal(first, []*pendingWrite{a, b}) || !slices.Equal(second, []*pendingWrite{a, c}) || !slices.Equal(w.pending, []*pendingWrite{a}) {
		t.Errorf("pending: first %v, second %v, w %v", first, second, w.pending)
	}
	full := &guardWindow{pending: []*pendingWrite{a}}
	if got := full.pendingWith(b); !slices.Equal(got, []*pendingWrite{a, b}) || cap(got) < 4 {
		t.Errorf("from a full array: %v (cap %d)", got, cap(got))
	}
}
