package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/store"
)

func TestClassify(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	cause := func(err error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(err)
		return ctx
	}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name           string
		client, attemp context.Context
		err            error
		status         int
		incident       string
	}{
		{"header timeout", live, cause(errHeaderTimeout), context.Canceled, http.StatusGatewayTimeout, store.TypeTimeout},
		{"idle timeout", live, cause(errIdleTimeout), context.Canceled, http.StatusGatewayTimeout, store.TypeTimeout},
		{"client left", gone, gone, context.Canceled, StatusClientClosed, ""},
		{"deadline", live, live, context.DeadlineExceeded, http.StatusGatewayTimeout, store.TypeTimeout},
		{"dial refused", live, live, dial, http.StatusBadGateway, store.TypeUnreachable},
		{"host not found", live, live, &net.DNSError{Err: "no such host", Name: "x"}, http.StatusBadGateway, store.TypeUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Classify(tc.client, tc.attemp, tc.err)
			if f.Status != tc.status || f.Incident != tc.incident {
				t.Fatalf("Classify = %+v, want status %d incident %q", f, tc.status, tc.incident)
			}
			if tc.incident != "" {
				if e := f.APIError(); e.Status != tc.status || e.Message == "" {
					t.Fatalf("APIError = %+v", e)
				}
			}
		})
	}
}

func TestOutgoingHeader(t *testing.T) {
	in := http.Header{
		"Connection":    {"keep-alive, X-Hop"},
		"X-Hop":         {"1"},
		"Keep-Alive":    {"timeout=5"},
		"X-Scar-Guard":  {"3"},
		"x-scar-secret": {"forged"},
		"Authorization": {"Bearer sk-client"},
		"X-Api-Key":     {"sk-ant"},
		"Content-Type":  {"application/json"},
		"Host":          {"proxy"},
	}
	for _, gateway := range []bool{false, true} {
		h := OutgoingHeader(in, gateway)
		for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "X-Scar-Guard", "x-scar-secret", "Host"} {
			if _, ok := h[k]; ok {
				t.Errorf("gateway=%v: %s reached the provider", gateway, k)
			}
		}
		if h.Get("Content-Type") != "application/json" {
			t.Errorf("gateway=%v: Content-Type lost", gateway)
		}
		if got := h.Get("Authorization") != ""; got == gateway {
			t.Errorf("gateway=%v: Authorization forwarded = %v", gateway, got)
		}
	}
	if in.Get("X-Scar-Guard") == "" {
		t.Error("OutgoingHeader changed the client's header")
	}
}

// TestSendFallsBack: a 429 from the first provider moves the request to
// the next, reporting the failure and the fallback; the last provider's
// answer goes back whatever its status.
func TestSendFallsBack(t *testing.T) {
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"message":"slow down"}}`))
	}))
	defer limited.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ok":true}`))
	}))
	defer ok.Close()
	router, err := providers.NewRouter([]providers.Config{
		{Name: "a", Type: providers.TypeOpenAI, BaseURL: limited.URL},
		{Name: "b", Type: providers.TypeOpenAI, BaseURL: ok.URL},
	}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var failed []ProviderFailure
	var moved []string
	a, f := Send(context.Background(), router.Providers(), &Request{Method: http.MethodPost, Path: "/chat/completions", Header: http.Header{}, Body: []byte(`{}`)},
		Hooks{Failed: func(pf ProviderFailure) { failed = append(failed, pf) }, Fallback: func(from, to string) { moved = append(moved, from+">"+to) }})
	if f != nil {
		t.Fatalf("Send failed: %+v", f)
	}
	defer a.Release()
	if a.Provider.Name() != "b" || a.Res.StatusCode != http.StatusOK {
		t.Fatalf("answered by %s with %d", a.Provider.Name(), a.Res.StatusCode)
	}
	if len(failed) != 1 || failed[0].Provider != "a" || failed[0].StatusCode != 429 || failed[0].Type != store.TypeHTTPError || !strings.Contains(failed[0].Message, "slow down") {
		t.Fatalf("failures = %+v", failed)
	}
	if len(moved) != 1 || moved[0] != "a>b" {
		t.Fatalf("fallbacks = %v", moved)
	}
}

func TestReadAnswer(t *testing.T) {
	body := `{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}`
	for _, c := range []struct {
		name   string
		length int64
		max    int64
		want   string
	}{
		{"known length", int64(len(body)), 1 << 10, body},
		{"unknown length", -1, 1 << 10, body},
		{"longer than max", int64(len(body)), 10, body[:10]},
		{"unknown and longer than max", -1, 10, body[:10]},
		{"shorter than it says", int64(len(body)) + 5, 1 << 10, body},
		{"longer than it says", 5, 1 << 10, body},
		{"as long as max, and longer than it says", 10, 10, body[:10]},
		{"one short of max, and longer than it says", 9, 10, body[:10]},
	} {
		res := &http.Response{ContentLength: c.length, Body: io.NopCloser(strings.NewReader(body))}
		if got := string(ReadAnswer(res, c.max)); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// OutgoingHeader deletes its fixed names as they are: they must be
// canonical, or a header the client sent would go through.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, k := range append(append([]string{"Host", "Content-Length"}, hopHeaders...), credentialHeaders...) {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
	}
	in := http.Header{}
	for _, k := range append(append([]string{"Host", "Content-Length"}, hopHeaders...), credentialHeaders...) {
		in.Set(strings.ToLower(k), "x") // Set canonicalizes, as the server does
	}
	in.Set("Accept", "application/json")
	if out := OutgoingHeader(in, true); len(out) != 1 || out.Get("Accept") != "application/json" {
		t.Errorf("OutgoingHeader kept %v, want only Accept", out)
	}
}
