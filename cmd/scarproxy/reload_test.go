package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/store/bolt"
)

// upstreamSaying is a provider that answers every chat with text.
func upstreamSaying(t *testing.T, text string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, text)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// reloadFixture is a server built as serve builds it, with the reloader
// serve's SIGHUP calls, on a configuration file the test rewrites.
type reloadFixture struct {
	path string
	base string
	r    *reloader
	logs *syncBuffer
}

func newReloadFixture(t *testing.T, yaml string, getenv func(string) string) *reloadFixture {
	t.Helper()
	dir := t.TempDir()
	fx := &reloadFixture{path: filepath.Join(dir, "c.yaml"), logs: &syncBuffer{}}
	fx.write(t, yaml)
	fs, f := newServeFlags()
	if err := fs.Parse([]string{"--config", fx.path, "--data", dir}); err != nil {
		t.Fatal(err)
	}
	load := func() (Config, error) { return f.load(fs, getenv) }
	cfg, err := load()
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(fx.logs, nil))
	st, err := bolt.Open(filepath.Join(dir, "scarproxy.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := buildServer(context.Background(), cfg, st, getenv, log)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
		st.Close()
	})
	fx.base = hs.URL
	fx.r = &reloader{load: load, getenv: getenv, srv: srv, st: st, log: log, started: cfg}
	return fx
}

func (fx *reloadFixture) write(t *testing.T, yaml string) {
	t.Helper()
	if err := os.WriteFile(fx.path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReload: a reload gives the running server its new providers,
// gateway keys, guard and recall at once; a bad configuration is refused
// whole, with an ERROR line, and the running one stays; a key that needs
// a restart is named in a WARN line.
func TestReload(t *testing.T) {
	a, b := upstreamSaying(t, "from A"), upstreamSaying(t, "from B")
	env := func(k string) string {
		if k == "TEAM_KEY" {
			return "team-secret"
		}
		return ""
	}
	const first = `listen: 0.0.0.0:8080
providers:
  - name: a
    type: openai
    base_url: %s
`
	fx := newReloadFixture(t, fmt.Sprintf(first, a.URL), env)
	chat := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	failing := func(i int) string { return fmt.Sprintf(failingTurn, fmt.Sprint("c", i), fmt.Sprint("c", i), 10+i) }
	team := map[string]string{"Authorization": "Bearer team-secret", "X-Scar-Session": "s1", "X-Scar-Project": "api"}

	if r := do(t, "POST", fx.base+"/v1/chat/completions", chat, nil); !strings.Contains(r.body, "from A") {
		t.Fatalf("before: %d %s", r.status, r.body)
	}
	// Beyond loopback without credentials: the memory is closed.
	if r := do(t, "GET", fx.base+"/scar/v1/incidents", "", nil); r.status != 403 {
		t.Fatalf("memory API before the keys: %d %s", r.status, r.body)
	}
	// Two failures in a conversation: guarded (guard.min_repeats 2).
	for i := range 2 {
		do(t, "POST", fx.base+"/v1/chat/completions", failing(i), map[string]string{"X-Scar-Session": "s1", "X-Scar-Project": "api"})
	}
	if r := do(t, "POST", fx.base+"/v1/chat/completions", chat, map[string]string{"X-Scar-Session": "s1", "X-Scar-Project": "api"}); r.header.Get("X-Scar-Guard") != "1" {
		t.Fatalf("guard before: %q", r.header.Get("X-Scar-Guard"))
	}

	// The new configuration: provider B, a gateway key, a guard that
	// wants three repeats, another recall threshold, and a new address.
	fx.write(t, fmt.Sprintf(`listen: 0.0.0.0:9090
providers:
  - name: b
    type: openai
    base_url: %s
    api_key_env: B_KEY
gateway:
  keys:
    - key_env: TEAM_KEY
      workspace: default
guard:
  min_repeats: 3
recall:
  min_similarity: 0.5
`, b.URL))
	if err := fx.r.Reload(); err != nil {
		t.Fatal(err)
	}
	logs := fx.logs.String()
	if !strings.Contains(logs, "configuration reloaded") || !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "keys=listen") {
		t.Fatalf("reload logs:\n%s", logs)
	}
	if r := do(t, "POST", fx.base+"/v1/chat/completions", chat, nil); r.status != 401 {
		t.Fatalf("without the new gateway key: %d %s", r.status, r.body)
	}
	r := do(t, "POST", fx.base+"/v1/chat/completions", chat, team)
	if r.status != 200 || !strings.Contains(r.body, "from B") || r.header.Get("X-Scar-Provider") != "b" {
		t.Fatalf("after: %d %s %s", r.status, r.header.Get("X-Scar-Provider"), r.body)
	}
	if r.header.Get("X-Scar-Guard") != "0" {
		t.Fatalf("the guard wants 3 repeats now: X-Scar-Guard %q", r.header.Get("X-Scar-Guard"))
	}
	r = do(t, "GET", fx.base+"/scar/v1/patterns", "", map[string]string{"Authorization": "Bearer team-secret"})
	if r.status != 200 || !strings.Contains(r.body, `"min_repeats":3`) {
		t.Fatalf("patterns after the reload: %d %s", r.status, r.body)
	}
	r = do(t, "GET", fx.base+"/scar/v1/recall?goal=anything", "", map[string]string{"Authorization": "Bearer team-secret"})
	if !strings.Contains(r.body, `"min_similarity":0.5`) {
		t.Fatalf("recall after the reload: %s", r.body)
	}

	// Refused whole: a provider type that does not exist, a key whose
	// variable is not set, an unknown key. Nothing changes.
	for _, bad := range []struct{ yaml, why string }{
		{fmt.Sprintf("providers:\n  - name: c\n    type: grpc\n    base_url: %s\n", a.URL), "providers[0].type"},
		{fmt.Sprintf("providers:\n  - name: c\n    type: openai\n    base_url: %s\ngateway:\n  keys:\n    - key_env: UNSET_KEY\n      workspace: w\n", a.URL), "UNSET_KEY is not set"},
		{"providers: []\nguard:\n  min_repeat: 2\n", "min_repeat"},
	} {
		fx.write(t, bad.yaml)
		err := fx.r.Reload()
		if err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Fatalf("reload of a bad configuration: %v, want it to say %q", err, bad.why)
		}
		if logs := fx.logs.String(); !strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "reload refused") {
			t.Fatalf("no ERROR line for a refused reload:\n%s", logs)
		}
		r := do(t, "POST", fx.base+"/v1/chat/completions", chat, team)
		if r.status != 200 || !strings.Contains(r.body, "from B") {
			t.Fatalf("after a refused reload: %d %s", r.status, r.body)
		}
	}
}

func TestRestartKeys(t *testing.T) {
	a := Default()
	b := a
	b.Providers = append(b.Providers, a.Providers...)
	b.Guard.MinRepeats = 5
	b.Gateway.Keys = []GatewayKeyConfig{{KeyEnv: "K", Workspace: "w"}}
	if keys := restartKeys(a, b); len(keys) != 0 {
		t.Fatalf("reloadable changes reported as needing a restart: %v", keys)
	}
	b.Listen, b.Store.Driver, b.Admin.TokenEnv = "0.0.0.0:1", "postgres", "T"
	if got := strings.Join(restartKeys(a, b), ","); got != "listen,store,admin" {
		t.Fatalf("restartKeys = %s", got)
	}
}
