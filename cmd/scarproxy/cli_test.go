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

// cliEnv runs one command line with the variables of getenv.
func cliEnv(t *testing.T, getenv func(string) string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, getenv, &out, io.Discard)
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
	// Marked wrong: still listed, with the mark; --undo clears it.
	if out = mustCLI(t, with("fixes", "wrong", fix.ID, "--note", "it never installed", "--workspace", "acme", "--project", "api")...); !strings.Contains(out, "marked wrong: "+fix.ID) {
		t.Fatalf("fixes wrong:\n%s", out)
	}
	if out = mustCLI(t, with("fixes", "list", "--workspace", "acme", "--project", "api")...); !strings.Contains(out, "[wrong] {") {
		t.Fatalf("fixes list after the mark:\n%s", out)
	}
	if out = mustCLI(t, with("fixes", "list", "--json", "--workspace", "acme", "--project", "api")...); !strings.Contains(out, `"note": "it never installed"`) {
		t.Fatalf("fixes list --json after the mark:\n%s", out)
	}
	if out = mustCLI(t, with("fixes", "wrong", "--undo", fix.ID, "--workspace", "acme", "--project", "api")...); !strings.Contains(out, "not marked: "+fix.ID) {
		t.Fatalf("fixes wrong --undo:\n%s", out)
	}
	if _, err := cli(t, with("fixes", "wrong", "--workspace", "acme", fix.ID)...); err == nil {
		t.Fatal("marking a fix of another project succeeded")
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
		{"recall", `Prior Goal: "Download a web page`},
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

// TestStoreCommandsThroughURL: with --url the store commands act through
// a running proxy's memory API, while serve holds the bbolt store, with
// the admin token from SCARPROXY_ADMIN_TOKEN or from the variable the
// configuration's admin.token_env names.
func TestStoreCommandsThroughURL(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("mock: true\ndata_dir: "+dir+"\nadmin:\n  token_env: TEAM_ADMIN\n"), 0o644)
	serverEnv := func(k string) string {
		if k == "TEAM_ADMIN" {
			return "s3cret"
		}
		return ""
	}
	in, err := startServe(context.Background(), []string{"--config", cfg}, serverEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Stop() })
	hdr := map[string]string{"X-Scar-Workspace": "acme", "X-Scar-Project": "api", "X-Scar-Session": "s1"}
	for i := 0; i < 2; i++ {
		do(t, "POST", in.BaseURL+"/v1/chat/completions", fmt.Sprintf(failingTurn, fmt.Sprint("c", i), fmt.Sprint("c", i), 10+i), hdr)
	}

	withToken := func(k string) string {
		if k == "SCARPROXY_ADMIN_TOKEN" {
			return "s3cret"
		}
		return ""
	}
	remote := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), append(args, "--url", in.BaseURL), withToken, &out, io.Discard); err != nil {
			t.Fatalf("scarproxy %s --url: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}

	// Without a credential: the memory API's 401, and what to set.
	_, err = cli(t, "incidents", "list", "--url", in.BaseURL)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "SCARPROXY_ADMIN_TOKEN") {
		t.Fatalf("without a token: %v", err)
	}
	// The store is held by serve: opening it fails and points at --url.
	if _, err := cli(t, "incidents", "list", "--data", dir); err == nil || !strings.Contains(err.Error(), "--url") {
		t.Fatalf("opening a held store: %v", err)
	}

	out := remote("incidents", "list", "--workspace", "acme", "--project", "api")
	if strings.Count(out, "tool_error") != 2 || !strings.Contains(out, "Cannot find module") {
		t.Fatalf("incidents list:\n%s", out)
	}
	out = remote("incidents", "list", "--json", "--workspace", "acme", "--project", "api", "--limit", "1")
	if strings.Count(out, `"type": "tool_error"`) != 1 {
		t.Fatalf("incidents list --json --limit 1:\n%s", out)
	}
	out = remote("guard", "show", "--workspace", "acme", "--project", "api", "--session", "s1")
	if !strings.Contains(out, "REPEAT FAILURE GUARD") || !strings.Contains(out, "(Failed 2 times)") {
		t.Fatalf("guard show:\n%s", out)
	}
	if out = remote("guard", "show", "--workspace", "acme", "--project", "web"); !strings.Contains(out, "no repeated failure in the last 1h0m0s") {
		t.Fatalf("guard show of a quiet project:\n%s", out)
	}

	id := strings.TrimSpace(remote("solutions", "add", "--workspace", "acme", "--goal", "Migrate the users table to UUID primary keys",
		"--approach", "add uuid column, backfill, swap constraints in one transaction", "--outcome", "done", "--confidence", "90"))
	if id == "" {
		t.Fatal("solutions add printed no id")
	}
	if out = remote("solutions", "list", "--workspace", "acme"); !strings.Contains(out, id) || !strings.Contains(out, "90%") {
		t.Fatalf("solutions list:\n%s", out)
	}
	out = remote("recall", "--workspace", "acme", "migrating", "user", "tables", "to", "uuid", "keys")
	if !strings.Contains(out, "### RECALL") || !strings.Contains(out, "backfill") {
		t.Fatalf("recall:\n%s", out)
	}
	if out = remote("solutions", "wrong", id, "--workspace", "acme", "--note", "the swap lost rows"); !strings.Contains(out, "marked wrong: "+id) {
		t.Fatalf("solutions wrong:\n%s", out)
	}
	if out = remote("recall", "--workspace", "acme", "migrating", "user", "tables", "to", "uuid", "keys"); !strings.Contains(out, "no similar solution") {
		t.Fatalf("a solution marked wrong recalled:\n%s", out)
	}
	if out = remote("solutions", "list", "--workspace", "acme"); !strings.Contains(out, "[wrong] Migrate the users table") {
		t.Fatalf("solutions list after the mark:\n%s", out)
	}
	remote("solutions", "wrong", "--undo", id, "--workspace", "acme")
	if out = remote("recall", "--workspace", "acme", "migrating", "user", "tables", "to", "uuid", "keys"); !strings.Contains(out, "backfill") {
		t.Fatalf("recall after the mark was removed:\n%s", out)
	}
	remote("solutions", "rm", id, "--workspace", "acme")
	if out = remote("recall", "--workspace", "acme", "migrate users table to uuid"); !strings.Contains(out, "no similar solution") {
		t.Fatalf("deleted solution recalled:\n%s", out)
	}

	r := do(t, "POST", in.BaseURL+"/scar/v1/fixes", `{"workspace":"acme","project":"api","tool":"build",
		"failure":"build: Error: Cannot find module 'left-pad'","call":"{\"cmd\":\"npm install left-pad\"}","failures":2}`,
		map[string]string{"Authorization": "Bearer s3cret"})
	var fix struct{ ID string }
	if err := json.Unmarshal([]byte(r.body), &fix); err != nil || fix.ID == "" {
		t.Fatalf("posted fix: %d %s", r.status, r.body)
	}
	if out = remote("fixes", "list", "--workspace", "acme", "--project", "api"); !strings.Contains(out, fix.ID) || !strings.Contains(out, "npm install left-pad") {
		t.Fatalf("fixes list:\n%s", out)
	}
	if out = remote("fixes", "wrong", fix.ID, "--json", "--workspace", "acme", "--project", "api", "--note", "no"); !strings.Contains(out, `"wrong": {`) {
		t.Fatalf("fixes wrong --json:\n%s", out)
	}
	remote("fixes", "rm", fix.ID, "--workspace", "acme", "--project", "api")
	var buf bytes.Buffer
	err = run(context.Background(), []string{"fixes", "rm", fix.ID, "--workspace", "acme", "--project", "api", "--url", in.BaseURL}, withToken, &buf, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("removing a missing fix: %v", err)
	}

	// The token from the variable the configuration names.
	configEnv := func(k string) string { return serverEnv(k) }
	buf.Reset()
	if err := run(context.Background(), []string{"incidents", "list", "--config", cfg, "--workspace", "acme", "--project", "api", "--url", in.BaseURL + "/"},
		configEnv, &buf, io.Discard); err != nil || strings.Count(buf.String(), "tool_error") != 2 {
		t.Fatalf("with admin.token_env: %v\n%s", err, buf.String())
	}
	if _, err := cli(t, "incidents", "list", "--url", "127.0.0.1:8080"); err == nil || !strings.Contains(err.Error(), "want the proxy's address") {
		t.Fatalf("a URL without a scheme: %v", err)
	}
}

// TestHelp: -h and --help print a command's usage on stdout, and exit 0.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"scarproxy serve", "scarproxy fixes rm ID", "--url URL"}},
		{[]string{"help", "fixes"}, []string{"scarproxy fixes list", "scarproxy fixes rm"}},
		{[]string{"serve", "--help"}, []string{"scarproxy serve", "-listen"}},
		{[]string{"serve", "-h"}, []string{"scarproxy serve", "-mock"}},
		{[]string{"demo", "--help"}, []string{"scarproxy demo guard|persist|recall|loop", "-url"}},
		{[]string{"demo", "guard", "-h"}, []string{"scarproxy demo", "-url"}},
		{[]string{"solutions", "--help"}, []string{"solutions add", "solutions list", "solutions rm"}},
		{[]string{"solutions", "add", "--help"}, []string{"solutions add --goal", "-confidence", "-url"}},
		{[]string{"solutions", "rm", "-h"}, []string{"solutions rm ID", "-workspace"}},
		{[]string{"recall", "--help"}, []string{"scarproxy recall", "-k"}},
		{[]string{"incidents", "-h"}, []string{"incidents list"}},
		{[]string{"incidents", "list", "--help"}, []string{"incidents list", "-session", "-limit"}},
		{[]string{"guard", "--help"}, []string{"guard show"}},
		{[]string{"guard", "show", "-h"}, []string{"guard show", "-session"}},
		{[]string{"fixes", "list", "--help"}, []string{"fixes list", "-limit"}},
		{[]string{"mcp", "--help"}, []string{"scarproxy mcp", "-workspace"}},
		{[]string{"version", "--help"}, []string{"scarproxy version"}},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), tc.args, noEnv, &stdout, &stderr); err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v: usage lacks %q:\n%s", tc.args, w, stdout.String())
			}
		}
		if stderr.Len() > 0 {
			t.Errorf("%v: wrote to stderr: %s", tc.args, stderr.String())
		}
	}
}

// TestSolutionsAddKeepsTheCap: solutions added from the shell keep
// retention.solutions_max_per_workspace, as those the proxy writes.
func TestSolutionsAddKeepsTheCap(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("data_dir: "+dir+"\nmock: true\nretention:\n  solutions_max_per_workspace: 2\n"), 0o644)
	var ids []string
	for _, goal := range []string{"Rotate the ingress certificates", "Purge the CDN after a deploy", "Vacuum the events table"} {
		ids = append(ids, strings.TrimSpace(mustCLI(t, "solutions", "add", "--config", cfg, "--goal", goal, "--approach", "by hand", "--outcome", "ok")))
	}
	out := mustCLI(t, "solutions", "list", "--config", cfg)
	if strings.Contains(out, ids[0]) || !strings.Contains(out, ids[1]) || !strings.Contains(out, ids[2]) {
		t.Fatalf("solutions list with a cap of 2 after 3 adds:\n%s", out)
	}
}
