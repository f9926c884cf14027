package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// TestOpenMemoryAPIOnlyOnLoopback: without admin token or gateway keys,
// serve refuses a listen address other than loopback unless admin.open
// says an open memory API is meant.
func TestOpenMemoryAPIOnlyOnLoopback(t *testing.T) {
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
	for _, tc := range []struct {
		name   string
		listen string
		config string
		getenv func(string) string
		ok     bool
	}{
		{"loopback", "127.0.0.1:0", "", noEnv, true},
		{"localhost", "localhost:0", "", noEnv, true},
		{"every interface", anywhere, "", noEnv, false},
		{"every interface, admin.open", anywhere, "admin:\n  open: true\n", noEnv, true},
		{"every interface, SCARPROXY_ADMIN_OPEN", anywhere, "", env("SCARPROXY_ADMIN_OPEN", "true"), true},
		{"every interface, admin token", anywhere, "admin:\n  token_env: ADMIN\n", env("ADMIN", "s3cret"), true},
		{"every interface, gateway keys", anywhere, "gateway:\n  keys:\n    - key_env: TEAM\n      workspace: team\n", env("TEAM", "k"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := conf(strings.ReplaceAll(tc.name, " ", "_"), tc.config)
			if !tc.ok {
				// Cancelled: a serve that starts anyway returns at once.
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				var stdout strings.Builder
				err := run(ctx, []string{"serve", "--config", cfg, "--listen", tc.listen}, tc.getenv, &stdout, io.Discard)
				if err == nil || !strings.Contains(err.Error(), "admin.open: true") || !strings.Contains(err.Error(), "admin.token_env") ||
					!strings.Contains(err.Error(), "SCARPROXY_ADMIN_OPEN") {
					t.Fatalf("serve on %s with an open memory API: err = %v", tc.listen, err)
				}
				if strings.Contains(stdout.String(), "listening") {
					t.Fatalf("it listened: %s", stdout.String())
				}
				return
			}
			in, err := startServe(context.Background(), []string{"--config", cfg, "--listen", tc.listen}, tc.getenv, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if err := in.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
