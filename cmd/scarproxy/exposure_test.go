package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLoopbackListen(t *testing.T) {
	for _, tc := range []struct {
		listen string
		want   bool
	}{
		{"127.0.0.1:8080", true},
		{"127.8.9.10:8080", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{"LOCALHOST:8080", true},
		{"0.0.0.0:8080", false},
		{"[::]:8080", false},
		{":8080", false},
		{"10.0.0.5:8080", false},
		{"gateway.internal:8080", false},
		{"[::ffff:127.0.0.1]:8080", true},
	} {
		if got := loopbackListen(tc.listen); got != tc.want {
			t.Errorf("loopbackListen(%q) = %v, want %v", tc.listen, got, tc.want)
		}
	}
}

// TestOpenMemoryClosedBeyondLoopback: without admin token or gateway
// keys, serve on an address other than loopback starts and serves the
// proxied APIs, while the memory API, MCP and the dashboard answer 403
// saying what to set, and a WARN line says so at start-up; admin.open
// opens them, credentials guard them.
func TestOpenMemoryClosedBeyondLoopback(t *testing.T) {
	dir := t.TempDir()
	conf := func(name, yaml string) string {
		p := filepath.Join(dir, name+".yaml")
		os.WriteFile(p, []byte("mock: true\ndata_dir: "+filepath.Join(dir, name)+"\n"+yaml), 0o644)
		return p
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	const anywhere = "0.0.0.0:0"
	const closed, open, unauthorized = 403, 200, 401
	for _, tc := range []struct {
		name   string
		listen string
		config string
		getenv func(string) string
		memory int // what /scar/v1 answers without credentials
	}{
		{"loopback", "127.0.0.1:0", "", noEnv, open},
		{"localhost", "localhost:0", "", noEnv, open},
		{"every interface", anywhere, "", noEnv, closed},
		{"every interface, admin.open", anywhere, "admin:\n  open: true\n", noEnv, open},
		{"every interface, SCARPROXY_ADMIN_OPEN", anywhere, "", env("SCARPROXY_ADMIN_OPEN", "true"), open},
		{"every interface, admin token", anywhere, "admin:\n  token_env: ADMIN\n", env("ADMIN", "s3cret"), unauthorized},
		{"every interface, gateway keys", anywhere, "gateway:\n  keys:\n    - key_env: TEAM\n      workspace: team\n", env("TEAM", "k"), unauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := conf(strings.ReplaceAll(tc.name, " ", "_"), tc.config)
			var logs syncBuffer
			in, err := startServe(context.Background(), []string{"--config", cfg, "--listen", tc.listen}, tc.getenv, &logs)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Stop()
			base := strings.Replace(in.BaseURL, "0.0.0.0", "127.0.0.1", 1)
			base = strings.Replace(base, "[::]", "127.0.0.1", 1)
			hdr := map[string]string{"Authorization": "Bearer k"}
			if r := do(t, "POST", base+"/v1/chat/completions", `{"model":"mock-gpt","messages":[{"role":"user","content":"hi"}]}`, hdr); r.status != 200 {
				t.Fatalf("the proxied API: %d %s", r.status, r.body)
			}
			for _, path := range []string{"/scar/v1/incidents", "/mcp", "/ui/", "/ui", "/w/a/b/mcp"} {
				method := "GET"
				if strings.HasSuffix(path, "mcp") {
					method = "POST"
				}
				r := do(t, method, base+path, "", nil)
				switch {
				case tc.memory == closed && (r.status != 403 || !strings.Contains(r.body, "admin.token_env") ||
					!strings.Contains(r.body, "gateway.keys") || !strings.Contains(r.body, "admin.open: true")):
					t.Errorf("%s %s: %d %s, want 403 saying what to set", method, path, r.status, r.body)
				case tc.memory != closed && r.status == 403:
					t.Errorf("%s %s: %d %s", method, path, r.status, r.body)
				}
			}
			if r := do(t, "GET", base+"/scar/v1/incidents", "", nil); r.status != tc.memory {
				t.Errorf("memory API: %d, want %d: %s", r.status, tc.memory, r.body)
			}
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "answer 403")
			if warned != (tc.memory == closed) {
				t.Errorf("WARN at start-up: %v, want %v:\n%s", warned, tc.memory == closed, logs.String())
			}
		})
	}
}

// syncBuffer is a bytes.Buffer that a server's logger and a test may use
// at once.
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
