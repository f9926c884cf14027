package ui

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// loginSource knows one token, the admin's; the login form needs no
// other method of a Source.
type loginSource struct{ Source }

func (loginSource) Login(token string) (Principal, bool) {
	return Principal{Admin: true}, token == "admin-secret"
}

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loginHarness is a dashboard on a clock the test moves.
type loginHarness struct {
	h   *Handler
	now time.Time
	log *syncBuffer
}

func newLoginHarness(t *testing.T) *loginHarness {
	lh := &loginHarness{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC), log: &syncBuffer{}}
	h, err := New(Options{Source: loginSource{}, Now: func() time.Time { return lh.now },
		Logger: slog.New(slog.NewTextHandler(lh.log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	lh.h = h
	return lh
}

// login posts token from addr with the given Origin ("": none).
func (lh *loginHarness) login(addr, token, origin string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "http://dash.example/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = addr + ":40000"
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	w := httptest.NewRecorder()
	lh.h.ServeHTTP(w, r)
	return w
}

// TestWrongLoginsAreLoggedAndSlowed: an address may give loginBurst wrong
// tokens, each logged; then its attempts, the right token's too, get 429
// with Retry-After until its bucket refills (one attempt per
// loginRefill). Other addresses are not slowed.
func TestWrongLoginsAreLoggedAndSlowed(t *testing.T) {
	lh := newLoginHarness(t)
	for i := range loginBurst {
		if w := lh.login("203.0.113.7", "guess", ""); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong login %d: %d", i+1, w.Code)
		}
	}
	if n := strings.Count(lh.log.String(), "wrong token"); n != loginBurst {
		t.Fatalf("%d wrong logins logged, want %d:\n%s", n, loginBurst, lh.log.String())
	}
	for _, token := range []string{"guess", "admin-secret", "guess"} {
		w := lh.login("203.0.113.7", token, "")
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "6" {
			t.Fatalf("attempt past the burst with %q: %d, Retry-After %q", token, w.Code, w.Header().Get("Retry-After"))
		}
	}
	if n := strings.Count(lh.log.String(), "logins refused"); n != 1 {
		t.Fatalf("the refusals were logged %d times, want once:\n%s", n, lh.log.String())
	}
	if w := lh.login("198.51.100.2", "admin-secret", ""); w.Code != http.StatusSeeOther {
		t.Fatalf("another address: %d", w.Code)
	}
	lh.now = lh.now.Add(loginRefill / 2)
	if w := lh.login("203.0.113.7", "admin-secret", ""); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "3" {
		t.Fatalf("half a refill later: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	lh.now = lh.now.Add(loginRefill / 2)
	if w := lh.login("203.0.113.7", "admin-secret", ""); w.Code != http.StatusSeeOther {
		t.Fatalf("the right token once the bucket refilled: %d", w.Code)
	}
	// The right token cost nothing: one wrong one still fits, then none.
	if w := lh.login("203.0.113.7", "guess", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong token after a refill: %d", w.Code)
	}
	if w := lh.login("203.0.113.7", "admin-secret", ""); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the next attempt: %d", w.Code)
	}
}

// TestLoginOrigin: a login posted from another site, or from an opaque
// origin (Origin: null: a sandboxed frame, a data: URL), is refused; one
// from the dashboard's own pages, or from a client that sends no Origin,
// is not.
func TestLoginOrigin(t *testing.T) {
	lh := newLoginHarness(t)
	for origin, want := range map[string]int{
		"null":                http.StatusForbidden,
		"http://evil.example": http.StatusForbidden,
		"http://dash.example": http.StatusSeeOther,
		"":                    http.StatusSeeOther,
	} {
		if w := lh.login("192.0.2.1", "admin-secret", origin); w.Code != want {
			t.Errorf("Origin %q: %d, want %d", origin, w.Code, want)
		}
	}
}

// TestLoginLimiterStaysBounded: the addresses remembered never pass
// loginAddrs: past it, those whose buckets are full again are forgotten,
// or, when none is, all of them.
func TestLoginLimiterStaysBounded(t *testing.T) {
	var l loginLimiter
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for i := range loginAddrs {
		l.failed("a"+strconv.Itoa(i), now)
	}
	if len(l.buckets) != loginAddrs {
		t.Fatalf("%d addresses remembered, want %d", len(l.buckets), loginAddrs)
	}
	// Later, every bucket is full again: all are forgotten for the new one.
	later := now.Add(loginBurst * loginRefill)
	l.failed("new", later)
	if len(l.buckets) != 1 {
		t.Fatalf("%d addresses remembered once the others refilled, want 1", len(l.buckets))
	}
	// None refilled: all are forgotten rather than holding more.
	for i := range loginAddrs + 10 {
		l.failed("b"+strconv.Itoa(i), later)
		if len(l.buckets) > loginAddrs {
			t.Fatalf("%d addresses remembered", len(l.buckets))
		}
	}
}
