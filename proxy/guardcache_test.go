package proxy

import (
	"reflect"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// TestWindowFollowsWithoutCopying: a window that follows new incidents
// appends them to its array when it is the first to follow it, copies
// when another window already did, merges incidents older than its
// newest, keeps the newest limit of them, and its provider failures'
// tally (an oldest incident that was its group's newest included) says
// what Detect says of what it holds.
func TestWindowFollowsWithoutCopying(t *testing.T) {
	h := newHarness(t, "http://127.0.0.1:1")
	s := h.srv
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
		got := w.providerTally(s.guard, 0, nil)
		if got.Stale() {
			t.Fatal("stale tally")
		}
		if want := s.guard.DetectAll(w.incidents, w.newest); !reflect.DeepEqual(got.Entries(1), want) {
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
	if e := w3.providerTally(s.guard, 0, nil).Entries(1); len(e) != 2 || e[1].Example != "shard 9 is rebuilding" {
		t.Fatalf("entries %+v", e)
	}
	// Older than the newest: merged in order; the oldest leaves.
	w4 := w3.with([]store.Incident{fail("f", t0.Add(500*time.Millisecond), "shard 7 is rebuilding")}, 3, nil, false)
	if got := ids(w4.incidents); !reflect.DeepEqual(got, []string{"f", "c", "e"}) {
		t.Fatalf("window %v", got)
	}
	check(w4)
}

func ids(incs []store.Incident) []string {
	var out []string
	for _, in := range incs {
		out = append(out, in.ID)
	}
	return out
}
