package proxy

import (
	"io"
	"net/http"
	"testing"

	"github.com/scarproxy/scarproxy/proxy/tenant"
)

// TestGatewayKeyFromXAPIKey: Anthropic clients send their key as x-api-key;
// a gateway key sent there is accepted and decides the workspace, on the
// proxied routes and on the memory API.
func TestGatewayKeyFromXAPIKey(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL, withOptions(func(o *Options) {
		o.GatewayKeys = []tenant.Key{{SHA256: sha("key-a"), Workspace: "team-a"}}
	}))
	res, b := h.chat(agentTurns(t, 1, nil), map[string]string{"X-Api-Key": "key-a", tenant.HeaderProject: "api"})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("x-api-key: %d %s", res.StatusCode, b)
	}
	if n := len(h.incidents("team-a", "api")); n != 1 {
		t.Fatalf("team-a/api has %d incidents, want the request's 1", n)
	}
	res, b = h.chat(agentTurns(t, 1, nil), map[string]string{"X-Api-Key": "wrong"})
	assertOpenAIError(t, res, b, http.StatusUnauthorized)

	res = h.do(http.MethodGet, "/scar/v1/incidents?project=api", nil, map[string]string{"X-Api-Key": "key-a"})
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("memory API with x-api-key: %d %s", res.StatusCode, b)
	}
}

// TestGatewayStripsClientCredentials: with gateway keys, no credential of
// the client reaches a provider, whichever header carries it.
func TestGatewayStripsClientCredentials(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL, withOptions(func(o *Options) {
		o.GatewayKeys = []tenant.Key{{SHA256: sha("key-a"), Workspace: "team-a"}}
	}))
	credentials := []string{"Authorization", "Api-Key", "X-Api-Key", "X-Goog-Api-Key", "Cookie", "Proxy-Authorization"}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"key as bearer", map[string]string{"Authorization": "Bearer key-a", "X-Api-Key": "sk-ant-client", "Cookie": "session=client", "Proxy-Authorization": "Basic Y2xpZW50"}},
		{"key as x-api-key", map[string]string{"X-Api-Key": "key-a", "Cookie": "session=client", "Proxy-Authorization": "Basic Y2xpZW50"}},
		{"key as api-key", map[string]string{"Api-Key": "key-a", "X-Api-Key": "sk-ant-client", "Cookie": "session=client"}},
		{"key as x-goog-api-key", map[string]string{"X-Goog-Api-Key": "key-a", "Cookie": "session=client"}},
		{"a gemini key beside the key", map[string]string{"Authorization": "Bearer key-a", "X-Goog-Api-Key": "client-gemini-key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, route := range []string{"/v1/chat/completions", "/v1/embeddings"} {
				res := h.do(http.MethodPost, route, []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"input":"x"}`), tc.hdr)
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				h.inflight.Wait()
				if res.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %s", route, res.StatusCode, b)
				}
				got := up.last(t).Header
				for _, k := range credentials {
					if v := got.Get(k); v != "" {
						t.Errorf("%s: the provider received %s: %q", route, k, v)
					}
				}
			}
		})
	}
}
