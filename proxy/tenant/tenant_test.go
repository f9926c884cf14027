package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"
)

func sum(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

func TestResolve(t *testing.T) {
	open, err := New(Config{DefaultWorkspace: "ws", DefaultProject: "pj"})
	if err != nil {
		t.Fatal(err)
	}
	keyed, err := New(Config{GatewayKeys: []Key{{SHA256: sum("key-a"), Workspace: "team-a", Projects: []string{"api"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		p          *Policy
		hdr        map[string]string
		query      string
		pathWS     string
		pathPJ     string
		want       Tenant
		wantStatus int
	}{
		{"defaults", open, nil, "", "", "", Tenant{Workspace: "ws", Project: "pj"}, 0},
		{"headers", open, map[string]string{HeaderWorkspace: "a", HeaderProject: "b", HeaderSession: "s", HeaderAgent: "g"}, "", "", "", Tenant{"a", "b", "s", "g"}, 0},
		{"path over headers", open, map[string]string{HeaderWorkspace: "a"}, "", "p", "q", Tenant{Workspace: "p", Project: "q"}, 0},
		{"bad session", open, map[string]string{HeaderSession: "a b"}, "", "", "", Tenant{}, http.StatusBadRequest},
		{"bad path name", open, nil, "", "a/b", "", Tenant{}, http.StatusBadRequest},
		{"key decides the workspace", keyed, map[string]string{"Authorization": "Bearer key-a", HeaderProject: "api"}, "", "", "", Tenant{Workspace: "team-a", Project: "api"}, 0},
		{"key as x-api-key", keyed, map[string]string{"X-Api-Key": "key-a", HeaderProject: "api"}, "", "", "", Tenant{Workspace: "team-a", Project: "api"}, 0},
		{"key as x-goog-api-key", keyed, map[string]string{"X-Goog-Api-Key": "key-a", HeaderProject: "api"}, "", "", "", Tenant{Workspace: "team-a", Project: "api"}, 0},
		{"key in the query", keyed, map[string]string{HeaderProject: "api"}, "alt=sse&key=key-a", "", "", Tenant{Workspace: "team-a", Project: "api"}, 0},
		{"a header key before the query's", keyed, map[string]string{"X-Goog-Api-Key": "key-b", HeaderProject: "api"}, "key=key-a", "", "", Tenant{}, http.StatusUnauthorized},
		{"no key", keyed, nil, "", "", "", Tenant{}, http.StatusUnauthorized},
		{"wrong key", keyed, map[string]string{"Authorization": "Bearer key-b"}, "", "", "", Tenant{}, http.StatusUnauthorized},
		{"other workspace named", keyed, map[string]string{"Authorization": "Bearer key-a", HeaderWorkspace: "team-b", HeaderProject: "api"}, "", "", "", Tenant{}, http.StatusForbidden},
		{"project outside the allow-list", keyed, map[string]string{"Authorization": "Bearer key-a", HeaderProject: "web"}, "", "", "", Tenant{}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/v1beta/models/m:generateContent?"+tc.query, nil)
			for k, v := range tc.hdr {
				r.Header.Set(k, v)
			}
			got, aerr := tc.p.Resolve(r, tc.pathWS, tc.pathPJ)
			if tc.wantStatus != 0 {
				if aerr == nil || aerr.Status != tc.wantStatus {
					t.Fatalf("Resolve = %+v, %v; want status %d", got, aerr, tc.wantStatus)
				}
				return
			}
			if aerr != nil || got != tc.want {
				t.Fatalf("Resolve = %+v, %v; want %+v", got, aerr, tc.want)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	for _, c := range []Config{
		{DefaultWorkspace: "my team"},
		{DefaultProject: "a/b"},
		{GatewayKeys: []Key{{SHA256: "not hex", Workspace: "w"}}},
		{GatewayKeys: []Key{{SHA256: sum("k"), Workspace: ""}}},
	} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v) accepted it", c)
		}
	}
}

func TestAuthorizeAndScope(t *testing.T) {
	p, err := New(Config{AdminToken: "admin", GatewayKeys: []Key{{SHA256: sum("key-a"), Workspace: "team-a", Projects: []string{"api"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Open() {
		t.Fatal("a policy with a token and keys is open")
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	if k, ok := p.Authorize(bearer("admin")); !ok || k != nil {
		t.Fatalf("admin token: %v %v", k, ok)
	}
	k, ok := p.Authorize(bearer("key-a"))
	if !ok || k == nil || k.Workspace != "team-a" {
		t.Fatalf("key: %v %v", k, ok)
	}
	if _, ok := p.Authorize(bearer("nope")); ok {
		t.Fatal("an unknown token passed")
	}
	if got := p.BySHA256(sum("key-a")); got != k {
		t.Fatalf("BySHA256 = %v, want the key", got)
	}
	if tn, aerr := p.Scoped(k, "", "api", false); aerr != nil || tn.Workspace != "team-a" {
		t.Fatalf("Scoped = %+v %v", tn, aerr)
	}
	if _, aerr := p.Scoped(k, "team-b", "api", false); aerr == nil || aerr.Status != http.StatusForbidden {
		t.Fatalf("another workspace: %v", aerr)
	}
	if _, aerr := p.Scoped(k, "", "web", false); aerr == nil || aerr.Status != http.StatusForbidden {
		t.Fatalf("another project: %v", aerr)
	}
	if aerr := ProjectScope(k, ""); aerr == nil {
		t.Fatal("a key limited to projects reached workspace-wide solutions")
	}
	if tn, aerr := p.Scoped(nil, "", "", false); aerr != nil || tn != (Tenant{Workspace: DefaultName, Project: DefaultName}) {
		t.Fatalf("admin defaults: %+v %v", tn, aerr)
	}
	if _, aerr := p.Scoped(nil, "", "", true); aerr == nil {
		t.Fatal("required names missing passed")
	}
}

// TestUpdate: an update replaces the whole policy; an invalid one changes
// nothing; a key looked up before stays usable.
func TestUpdate(t *testing.T) {
	p, err := New(Config{GatewayKeys: []Key{{SHA256: sum("key-a"), Workspace: "team-a"}}})
	if err != nil {
		t.Fatal(err)
	}
	held := p.Lookup("key-a")
	if err := p.Update(Config{DefaultProject: "bad name"}); err == nil {
		t.Fatal("an invalid update was accepted")
	}
	if p.Lookup("key-a") == nil || !p.Keys() {
		t.Fatal("an invalid update changed the policy")
	}
	if err := p.Update(Config{DefaultWorkspace: "ws", GatewayKeys: []Key{{SHA256: sum("key-b"), Workspace: "team-b"}}}); err != nil {
		t.Fatal(err)
	}
	if p.Lookup("key-a") != nil || p.Lookup("key-b") == nil {
		t.Fatal("the update did not replace the keys")
	}
	if ws, _ := p.Defaults(); ws != "ws" {
		t.Fatalf("default workspace %q after the update", ws)
	}
	if held.Workspace != "team-a" {
		t.Fatalf("a key held across the update changed: %+v", held)
	}
	if err := p.Update(Config{}); err != nil || !p.Open() {
		t.Fatalf("an update without keys: %v, open %v", err, p.Open())
	}
}

// The tenant headers are read by their names as they are: the names must
// be canonical, as the server makes the names a client sends.
func TestHeaderNamesCanonical(t *testing.T) {
	for _, k := range []string{HeaderWorkspace, HeaderProject, HeaderSession, HeaderAgent} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
	}
}
