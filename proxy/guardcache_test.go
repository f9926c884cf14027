package proxy

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
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

// heldVersionStore holds the first IncidentVersion call made after hold,
// as a slow database round trip would: entered says it began, release
// lets it go on.
type heldVersionStore struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	entered chan struct{}
	release chan struct{}
}

func (s *heldVersionStore) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.entered, s.release = true, make(chan struct{}), make(chan struct{})
}

func (s *heldVersionStore) IncidentVersion(ctx context.Context, workspace, project string) (int64, error) {
	s.mu.Lock()
	held := s.armed
	s.armed = false
	entered, release := s.entered, s.release
	s.mu.Unlock()
	if held {
		close(entered)
		<-release
	}
	return s.Store.IncidentVersion(ctx, workspace, project)
}

// TestARequestIsGuardedByFailuresWhileItWaited: failures this replica
// records while a request's version read is under way (later than the
// request's arrival: in a storm, most of them) are in the guard the
// request gets, which is the tenant's when it is derived. The guard
// preview at the arrival time still leaves them out.
func TestARequestIsGuardedByFailuresWhileItWaited(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "fail") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
		okCompletion(w, r)
	})
	st := &heldVersionStore{Store: tempBolt(t)}
	h := newHarnessOn(t, st, up.srv.URL)
	send := func(content string) (*http.Response, []byte) {
		res := h.do(http.MethodPost, "/v1/chat/completions", []byte(`{"model":"m","messages":[{"role":"user","content":"`+content+`"}]}`), nil)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Error(err)
		}
		return res, b
	}
	arrived := h.clock() // the request's arrival is the clock's next reading
	st.hold()
	type answer struct {
		guard string
		body  []byte
	}
	done := make(chan answer)
	go func() {
		res, _ := send("go")
		done <- answer{res.Header.Get(HeaderGuard), up.last(t).Body}
	}()
	<-st.entered
	for range 2 {
		if res, _ := send("fail"); res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 429", res.StatusCode)
		}
	}
	close(st.release)
	a := <-done
	if sys := systemOf(t, a.body); a.guard != "1" || !strings.Contains(sys, "API RATE LIMIT TRIGGER (Failed 2 times)") {
		t.Fatalf("guard %q, system text:\n%s", a.guard, sys)
	}
	// At the request's arrival there was no failure yet.
	entries, _, _, err := h.srv.guardEntries(context.Background(), "default", "default", "", arrived.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("guard at the arrival: %+v, want none", entries)
	}
}
