package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cli runs one command line and returns its output.
func cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, noEnv, &out, io.Discard)
	return out.String(), err
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, err := cli(t, args...)
	if err != nil {
		t.Fatalf("scarproxy %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// testStoreCommands exercises the shell commands against one store; where
// is the flag pair naming it (--data DIR or --config FILE).
func testStoreCommands(t *testing.T, where ...string) {
	with := func(args ...string) []string { return append(args, where...) }

	// Failures recorded by a running proxy...
	in := start(t, with("--mock")...)
	for i := 0; i < 2; i++ {
		do(t, "POST", in.BaseURL+"/v1/chat/completions", fmt.Sprintf(failingTurn, fmt.Sprint("c", i), fmt.Sprint("c", i), 10+i),
			map[string]string{"X-Scar-Workspace": "acme", "X-Scar-Project": "api"})
	}
	// ...and a fix stored through the memory API...
	r := do(t, "POST", in.BaseURL+"/scar/v1/fixes", `{"workspace":"acme","project":"api","tool":"build",
		"failure":"build: Error: Cannot find module 'left-pad'","call":"{\"cmd\":\"npm install left-pad\"}","failures":2}`, nil)
	if r.status != 201 {
		t.Fatalf("post fix: %d %s", r.status, r.body)
	}
	var fix struct{ ID string }
	if err := json.Unmarshal([]byte(r.body), &fix); err != nil || fix.ID == "" {
		t.Fatalf("posted fix: %s (%v)", r.body, err)
	}
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	// ...are listed and guarded from the shell once it stopped.
	out := mustCLI(t, with("incidents", "list", "--workspace", "acme", "--project", "api")...)
	if strings.Count(out, "tool_error") != 2 || !strings.Contains(out, "Cannot find module") {
		t.Fatalf("incidents list:\n%s", out)
	}
	out = mustCLI(t, with("guard", "show", "--workspace", "acme", "--project", "api")...)
	if !strings.Contains(out, "REPEAT FAILURE GUARD") || !strings.Contains(out, "(Failed 2 times)") {
		t.Fatalf("guard show:\n%s", out)
	}

	out = mustCLI(t, with("fixes", "list", "--workspace", "acme", "--project", "api")...)
	if !strings.Contains(out, fix.ID) || !strings.Contains(out, "npm install left-pad") || !strings.Contains(out, "REPEATED ERROR") {
		t.Fatalf("fixes list:\n%s", out)
	}
	out = mustCLI(t, with("fixes", "list", "--json", "--workspace", "acme", "--project", "api")...)
	if !strings.Contains(out, `"id": "`+fix.ID+`"`) || !strings.Contains(out, `"failures": 2`) {
		t.Fatalf("fixes list --json:\n%s", out)
	}
	if out = mustCLI(t, with("fixes", "list", "--workspace", "acme")...); strings.Contains(out, fix.ID) {
		t.Fatalf("fixes list of the default project shows acme/api's fix:\n%s", out)
	}
	if _, err := cli(t, with("fixes", "rm", "--workspace", "acme", fix.ID)...); err == nil {
		t.Fatal("removing a fix of another project succeeded")
	}
	mustCLI(t, with("fixes", "rm", fix.ID, "--workspace", "acme", "--project", "api")...)
	if out = mustCLI(t, with("fixes", "list", "--workspace", "acme", "--project", "api")...); strings.Contains(out, fix.ID) {
		t.Fatalf("removed fix still listed:\n%s", out)
	}
	if _, err := cli(t, with("fixes", "rm", "--workspace", "acme", "--project", "api", fix.ID)...); err == nil {
		t.Fatal("removing a missing fix succeeded")
	}

	id := strings.TrimSpace(mustCLI(t, with("solutions", "add", "--workspace", "acme",
		"--goal", "Migrate the users table to UUID primary keys",
		"--approach", "add uuid column, backfill, swap constraints in one transaction",
		"--outcome", "done without downtime", "--confidence", "90")...))
	if id == "" {
		t.Fatal("solutions add printed no id")
	}
	out = mustCLI(t, with("solutions", "list", "--workspace", "acme")...)
	if !strings.Contains(out, id) || !strings.Contains(out, "90%") {
		t.Fatalf("solutions list:\n%s", out)
	}
	out = mustCLI(t, with("recall", "--workspace", "acme", "migrating", "user", "tables", "to", "uuid", "keys")...)
	if !strings.Contains(out, "### RECALL") || !strings.Contains(out, "backfill") {
		t.Fatalf("recall:\n%s", out)
	}
	if _, err := cli(t, with("solutions", "add", "--workspace", "acme", "--goal", "g", "--approach", "a", "--outcome", "o", "--confidence", "300")...); err == nil {
		t.Fatal("confidence 300 accepted")
	}
	mustCLI(t, with("solutions", "rm", "--workspace", "acme", id)...)
	out = mustCLI(t, with("recall", "--workspace", "acme", "migrate users table to uuid")...)
	if strings.Contains(out, "backfill") {
		t.Fatalf("deleted solution recalled:\n%s", out)
	}
	if _, err := cli(t, with("solutions", "rm", "--workspace", "acme", id)...); err == nil {
		t.Fatal("removing a missing solution succeeded")
	}
}

func TestStoreCommandsBolt(t *testing.T) {
	testStoreCommands(t, "--data", t.TempDir())
}

func TestStoreCommandsPostgres(t *testing.T) {
	testStoreCommands(t, "--config", postgresConfig(t, schemaDSN(t, postgresDSN(t))))
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"demo"}, {"demo", "nope"}, {"solutions"}, {"serve", "extra"},
		{"fixes"}, {"fixes", "nope"}, {"fixes", "rm"}, {"fixes", "list", "extra"}} {
		_, err := cli(t, args...)
		var ue usageError
		if err == nil || !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
	if out := mustCLI(t, "version"); !strings.HasPrefix(out, "scarproxy ") {
		t.Fatalf("version: %q", out)
	}
}

func TestDemosRun(t *testing.T) {
	for _, d := range []struct{ name, want string }{
		{"guard", "SYNTAX COMPLIANCE ERROR (Failed 2 times)"},
		{"persist", "API RATE LIMIT TRIGGER (Failed 2 times)"},
		{"recall", "Prior Goal: Download a web page"},
	} {
		t.Run(d.name, func(t *testing.T) {
			out := mustCLI(t, "demo", d.name)
			if !strings.Contains(out, d.want) {
				t.Fatalf("demo %s output lacks %q:\n%s", d.name, d.want, out)
			}
		})
	}
	// The loop demo: 12 failed calls without the proxy, the STOP block
	// after the fourth with it, the fix learned and shown to a new
	// conversation.
	out := mustCLI(t, "demo", "loop")
	// The prompt cache: the proxy's turns read from it nearly as much as
	// the bare loop's (they re-read the blocks of the turn before, a large
	// share of this small prompt).
	var with, without int
	if _, err := fmt.Sscanf(out[strings.Index(out, "after the first turn, "):], "after the first turn, %d%% of the input was read\nfrom the cache with scarproxy, %d%% without", &with, &without); err != nil {
		t.Fatalf("demo loop output lacks the cache line (%v):\n%s", err, out)
	}
	if without < 80 || with < without-15 {
		t.Fatalf("prompt cache: %d%% with scarproxy, %d%% without", with, without)
	}
	for _, want := range []string{
		"Without scarproxy: 12 failed calls, 13 turns",
		"X-Scar-Guard: 1, X-Scar-Loop: stop",
		"With scarproxy: 4 failed calls, 6 turns",
		`Learned fix (GET /scar/v1/fixes): after 4 failures (REPEATED ERROR), run_shell {"cmd":"mkdir -p config`,
		`Last time this was fixed by: calling run_shell "{\"cmd\":\"mkdir -p config`,
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("demo loop output lacks %q:\n%s", want, out)
		}
	}
}

func TestFlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	id := strings.TrimSpace(mustCLI(t, "solutions", "add", "--data", dir, "--workspace", "w", "--goal", "g", "--approach", "a", "--outcome", "o"))
	mustCLI(t, "solutions", "rm", id, "--data", dir, "--workspace", "w")
	if out := mustCLI(t, "solutions", "list", "--data", dir, "--workspace", "w"); strings.Contains(out, id) {
		t.Fatalf("not removed:\n%s", out)
	}
}

func TestStoreCommandsUseConfiguredDefaultTenant(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("mock: true\ndata_dir: "+dir+"\ntenant:\n  default_workspace: acme\n"), 0o644)
	mustCLI(t, "solutions", "add", "--config", cfg, "--goal", "Tune the GC", "--approach", "GOGC=200", "--outcome", "ok")
	if out := mustCLI(t, "solutions", "list", "--data", dir, "--workspace", "acme"); !strings.Contains(out, "Tune the GC") {
		t.Fatalf("solution not stored in the configured default workspace:\n%s", out)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("mock: true\ntenant:\n  default_workspace: my team\n"), 0o644)
	if _, err := cli(t, "serve", "--config", bad, "--listen", "127.0.0.1:0", "--data", dir); err == nil || !strings.Contains(err.Error(), "tenant.default_workspace") {
		t.Fatalf("err = %v", err)
	}
}
