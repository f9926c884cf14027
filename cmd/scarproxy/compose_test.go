package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeFile is what the tests read of compose.yaml.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Configs     []struct {
			Source string `yaml:"source"`
			Target string `yaml:"target"`
		} `yaml:"configs"`
	} `yaml:"services"`
	Configs map[string]struct {
		Content string `yaml:"content"`
	} `yaml:"configs"`
}

// composeReplica is one scarproxy service of compose.yaml: its
// configuration file and its environment.
type composeReplica struct {
	name   string
	config string            // the configuration's content
	env    map[string]string // as compose gives it, before interpolation
}

// readCompose returns the scarproxy services of compose.yaml.
func readCompose(t *testing.T) []composeReplica {
	t.Helper()
	b, err := os.ReadFile("../../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(b, &cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	var out []composeReplica
	for name, s := range cf.Services {
		if !strings.Contains(s.Image, "scarproxy") {
			continue
		}
		r := composeReplica{name: name, env: s.Environment}
		for _, c := range s.Configs {
			if c.Target == s.Environment["SCARPROXY_CONFIG"] {
				r.config = cf.Configs[c.Source].Content
			}
		}
		if r.config == "" {
			t.Fatalf("compose.yaml: service %s has no configuration at SCARPROXY_CONFIG", name)
		}
		out = append(out, r)
	}
	return out
}

var composeVar = regexp.MustCompile(`\$\{(\w+)(:[-?][^}]*)?\}`)

// interpolate replaces ${VAR}, ${VAR:-default} and ${VAR:?message} in s
// as compose does, from vars; a missing required variable fails the test.
func interpolate(t *testing.T, s string, vars map[string]string) string {
	return composeVar.ReplaceAllStringFunc(s, func(m string) string {
		sub := composeVar.FindStringSubmatch(m)
		if v := vars[sub[1]]; v != "" {
			return v
		}
		switch {
		case strings.HasPrefix(sub[2], ":-"):
			return sub[2][2:]
		case strings.HasPrefix(sub[2], ":?"):
			t.Fatalf("compose.yaml needs %s: %s", sub[1], sub[2][2:])
		}
		return ""
	})
}

// TestComposeGateway runs compose.yaml's gateway as compose would: its
// scarproxy replicas with their configuration and environment, on one
// PostgreSQL, the providers pointed at a fake. Gateway keys decide the
// team, the providers get the gateway's key, a failure through one
// replica is in the other's memory, and the memory API takes the admin
// token.
func TestComposeGateway(t *testing.T) {
	dsn := schemaDSN(t, postgresDSN(t))
	var mu sync.Mutex
	var gotAuth []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(b), "overloaded") {
			w.WriteHeader(529)
			io.WriteString(w, `{"error":{"message":"the upstream is overloaded","type":"server_error"}}`)
			return
		}
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`)
	}))
	defer up.Close()

	replicas := readCompose(t)
	if len(replicas) != 2 {
		t.Fatalf("compose.yaml has %d scarproxy replicas, want 2", len(replicas))
	}
	vars := map[string]string{
		"POSTGRES_PASSWORD": "unused", "SCARPROXY_ADMIN_TOKEN": "admin-s3cret",
		"TEAM_A_KEY": "key-team-a", "TEAM_B_KEY": "key-team-b", "OPENAI_API_KEY": "sk-gateway",
	}
	var bases []string
	for _, r := range replicas {
		// The providers' addresses point at the fake; the rest is as shipped.
		config := regexp.MustCompile(`base_url: \S+`).ReplaceAllString(r.config, "base_url: "+up.URL+"/v1")
		path := filepath.Join(t.TempDir(), "gateway.yaml")
		os.WriteFile(path, []byte(config), 0o644)
		env := map[string]string{}
		for k, v := range r.env {
			env[k] = interpolate(t, v, vars)
		}
		env["SCARPROXY_CONFIG"] = path
		env["SCARPROXY_STORE_DSN"] = dsn // the test's database for compose's
		in, err := startServe(context.Background(), nil, func(k string) string { return env[k] }, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		t.Cleanup(func() { in.Stop() })
		bases = append(bases, in.BaseURL)
	}
	a, b := bases[0], bases[1]
	chat := func(content string) string {
		return `{"model":"gpt-x","messages":[{"role":"user","content":"` + content + `"}]}`
	}
	teamA := map[string]string{"Authorization": "Bearer key-team-a", "X-Scar-Project": "api"}

	if r := do(t, "POST", a+"/v1/chat/completions", chat("hi"), nil); r.status != 401 {
		t.Fatalf("without a gateway key: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", a+"/v1/chat/completions", chat("hi"), teamA); r.status != 200 {
		t.Fatalf("team A: %d %s", r.status, r.body)
	}
	if r := do(t, "POST", a+"/v1/chat/completions", chat("overloaded"), teamA); r.status != 529 {
		t.Fatalf("a provider failure: %d %s", r.status, r.body)
	}
	mu.Lock()
	for _, auth := range gotAuth {
		if auth != "Bearer sk-gateway" {
			t.Errorf("the provider got Authorization %q, want the gateway's key", auth)
		}
	}
	mu.Unlock()
	// The failure through A is in B's memory: for the admin, for team A;
	// not for team B, nor without credentials.
	admin := map[string]string{"Authorization": "Bearer admin-s3cret"}
	if r := do(t, "GET", b+"/scar/v1/incidents?workspace=team-a&project=api", "", admin); r.status != 200 || !strings.Contains(r.body, "overloaded") {
		t.Fatalf("B's memory API, admin: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", b+"/scar/v1/incidents?project=api", "", teamA); r.status != 200 || !strings.Contains(r.body, "overloaded") {
		t.Fatalf("B's memory API, team A: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", b+"/scar/v1/incidents?workspace=team-a&project=api", "", map[string]string{"Authorization": "Bearer key-team-b"}); r.status != 403 {
		t.Fatalf("B's memory API, team B reading team A: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", b+"/scar/v1/incidents", "", nil); r.status != 401 {
		t.Fatalf("B's memory API without credentials: %d %s", r.status, r.body)
	}
	// The CLI through B, with the token compose gives the replicas.
	out, err := cliEnv(t, func(k string) string { return vars[k] }, "incidents", "list", "--url", b, "--workspace", "team-a", "--project", "api")
	if err != nil || !strings.Contains(out, "overloaded") {
		t.Fatalf("incidents list --url: %v\n%s", err, out)
	}
}

// TestContainerConfig runs the configuration the image ships
// (container.yaml) on the address it ships, as the image's user would:
// it starts with its two providers, serves, and closes the memory (no
// credentials beyond loopback) saying so.
func TestContainerConfig(t *testing.T) {
	var logs syncBuffer
	in, err := startServe(context.Background(), []string{"--config", "../../container.yaml", "--data", t.TempDir(), "--listen", "0.0.0.0:0"}, noEnv, &logs)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop()
	base := strings.Replace(in.BaseURL, "0.0.0.0", "127.0.0.1", 1)
	if r := do(t, "GET", base+"/healthz", "", nil); r.status != 200 {
		t.Fatalf("healthz: %d", r.status)
	}
	if r := do(t, "GET", base+"/scar/v1/incidents", "", nil); r.status != 403 {
		t.Fatalf("memory API: %d %s", r.status, r.body)
	}
	if !strings.Contains(logs.String(), `"level":"WARN"`) || !strings.Contains(logs.String(), "answer 403") {
		t.Fatalf("no WARN about the closed memory (JSON logs):\n%s", logs.String())
	}
	cfg := Default()
	if err := cfg.loadFile("../../container.yaml"); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/data" || cfg.Listen != "0.0.0.0:8080" || len(cfg.Providers) != 2 {
		t.Fatalf("container.yaml: %+v", cfg)
	}
}
