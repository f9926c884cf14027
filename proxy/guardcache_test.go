package proxy

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

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
	if sys := toldOf(t, a.body); a.guard != "1" || !strings.Contains(sys, "API RATE LIMIT TRIGGER (Failed 2 times)") {
		t.Fatalf("guard %q, system text:\n%s", a.guard, sys)
	}
	// At the request's arrival there was no failure yet.
	entries, _, _, err := h.srv.memory.Preview(context.Background(), "default", "default", "", arrived.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("guard at the arrival: %+v, want none", entries)
	}
}
