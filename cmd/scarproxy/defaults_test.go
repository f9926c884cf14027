package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfiguredDefaultTenantEverywhere: with tenant.default_workspace acme
// and default_project api, chat traffic, the memory API and the CLI all
// read and write acme/api when no workspace or project is named.
func TestConfiguredDefaultTenantEverywhere(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("mock: true\ndata_dir: "+dir+"\ntenant:\n  default_workspace: acme\n  default_project: api\n"), 0o644)
	in := start(t, "--config", cfg)

	// Chat traffic without tenant headers: recorded in acme/api.
	for i := range 2 {
		do(t, "POST", in.BaseURL+"/v1/chat/completions", fmt.Sprintf(failingTurn, fmt.Sprint("d", i), fmt.Sprint("d", i), 20+i), nil)
	}
	// The memory API without workspace or project: acme/api too.
	if r := do(t, "POST", in.BaseURL+"/scar/v1/incidents", `{"type":"test_failure","message":"TestParse failed"}`, nil); r.status != 201 ||
		!strings.Contains(r.body, `"workspace":"acme","project":"api"`) {
		t.Fatalf("post incident: %d %s", r.status, r.body)
	}
	var incs struct {
		Incidents []struct{ Workspace, Project string }
	}
	r := do(t, "GET", in.BaseURL+"/scar/v1/incidents", "", nil)
	if err := json.Unmarshal([]byte(r.body), &incs); err != nil || len(incs.Incidents) != 3 {
		t.Fatalf("list incidents: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", in.BaseURL+"/scar/v1/guard", "", nil); !strings.Contains(r.body, "(Failed 2 times)") {
		t.Fatalf("guard: %d %s", r.status, r.body)
	}
	r = do(t, "POST", in.BaseURL+"/scar/v1/solutions", `{"goal":"Speed up the CI cache for Go modules","approach":"cache GOMODCACHE keyed by go.sum","outcome":"builds 3x faster","confidence":0.8}`, nil)
	if r.status != 201 || !strings.Contains(r.body, `"workspace":"acme"`) {
		t.Fatalf("post solution: %d %s", r.status, r.body)
	}
	var sol struct{ ID string }
	json.Unmarshal([]byte(r.body), &sol)
	// acme/api traffic recalls it.
	r = do(t, "POST", in.BaseURL+"/v1/chat/completions", `{"model":"mock-gpt","messages":[{"role":"user","content":"make the go module cache in CI faster"}]}`, nil)
	if r.header.Get("X-Scar-Recall") != "1" {
		t.Fatalf("acme/api traffic does not recall the solution posted without a workspace: X-Scar-Recall %q", r.header.Get("X-Scar-Recall"))
	}
	if r := do(t, "GET", in.BaseURL+"/scar/v1/solutions", "", nil); !strings.Contains(r.body, sol.ID) {
		t.Fatalf("list solutions: %d %s", r.status, r.body)
	}
	if r := do(t, "GET", in.BaseURL+"/scar/v1/recall?goal=go+module+cache+in+CI", "", nil); !strings.Contains(r.body, "GOMODCACHE") {
		t.Fatalf("recall: %d %s", r.status, r.body)
	}
	if r := do(t, "DELETE", in.BaseURL+"/scar/v1/solutions/"+sol.ID, "", nil); r.status != 204 {
		t.Fatalf("delete solution: %d %s", r.status, r.body)
	}
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}

	// The CLI, on the same configuration.
	out := mustCLI(t, "incidents", "list", "--config", cfg)
	if strings.Count(out, "tool_error") != 2 || !strings.Contains(out, "TestParse failed") {
		t.Fatalf("incidents list:\n%s", out)
	}
	if out := mustCLI(t, "guard", "show", "--config", cfg); !strings.Contains(out, "(Failed 2 times)") {
		t.Fatalf("guard show:\n%s", out)
	}
	id := strings.TrimSpace(mustCLI(t, "solutions", "add", "--config", cfg,
		"--goal", "Rotate the ingress TLS certificates", "--approach", "cert-manager renew", "--outcome", "ok"))
	web := strings.TrimSpace(mustCLI(t, "solutions", "add", "--config", cfg, "--project", "web",
		"--goal", "Purge the CDN cache after a deploy", "--approach", "call the purge API from the pipeline", "--outcome", "ok"))
	if out := mustCLI(t, "solutions", "list", "--config", cfg); !strings.Contains(out, id) || !strings.Contains(out, web) {
		t.Fatalf("solutions list:\n%s", out)
	}
	if out := mustCLI(t, "recall", "--config", cfg, "rotate", "TLS", "certificates"); !strings.Contains(out, "cert-manager") {
		t.Fatalf("recall:\n%s", out)
	}
	// Without --project, recall searches every project, as the memory
	// API's recall does, whatever the default project is called...
	if out := mustCLI(t, "recall", "--config", cfg, "purge", "the", "CDN", "cache"); !strings.Contains(out, "purge API") {
		t.Fatalf("recall without --project:\n%s", out)
	}
	// ...and with it, that project's solutions and the workspace's.
	if out := mustCLI(t, "recall", "--config", cfg, "--project", "api", "purge", "the", "CDN", "cache"); strings.Contains(out, "purge API") {
		t.Fatalf("recall --project api found a solution of project web:\n%s", out)
	}
	mustCLI(t, "solutions", "rm", "--config", cfg, id)
	// Nothing went to default/default.
	if out := mustCLI(t, "incidents", "list", "--config", cfg, "--workspace", "default", "--project", "default"); strings.Contains(out, "error") || strings.Contains(out, "failed") {
		t.Fatalf("default/default holds incidents:\n%s", out)
	}
}
