package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL tests need SCARPROXY_TEST_POSTGRES_DSN (and, for the
// outage test, SCARPROXY_TEST_PGCTL); `.ci/postgres.sh` prints both.

func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("SCARPROXY_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PostgreSQL tests skipped: set SCARPROXY_TEST_POSTGRES_DSN (eval \"$(bash .ci/postgres.sh)\")")
	}
	return dsn
}

// schemaDSN creates a schema for the test and returns the DSN using it.
func schemaDSN(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	var r [6]byte
	rand.Read(r[:])
	name := "scarproxy_cmd_" + hex.EncodeToString(r[:])
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
			c.Close(ctx)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func postgresConfig(t *testing.T, dsn string) string {
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte(fmt.Sprintf("mock: true\nstore:\n  driver: postgres\n  dsn: %q\n", dsn)), 0o644)
	return path
}

type call struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url, body string, hdr map[string]string) call {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return call{res.StatusCode, res.Header, string(b)}
}

// waitFor polls cond until it holds or the deadline passes. It bounds a
// wait for something asynchronous; it asserts no duration.
func waitFor(t *testing.T, deadline time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > deadline {
			t.Fatalf("%s: not within %s", what, deadline)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// failingTurn is a turn of one run of an agent (its first call, an ls,
// names the run) whose latest build failed; fill in the failed call's id
// twice and a line number.
const failingTurn = `{"model":"mock-gpt","messages":[{"role":"user","content":"build it"},
 {"role":"assistant","tool_calls":[{"id":"call_ls","type":"function","function":{"name":"ls","arguments":"{}"}}]},
 {"role":"tool","tool_call_id":"call_ls","content":"package.json src"},
 {"role":"assistant","tool_calls":[{"id":"%s","type":"function","function":{"name":"build","arguments":"{}"}}]},
 {"role":"tool","tool_call_id":"%s","content":"Error: Cannot find module 'left-pad' (required from /app/src/index.js:%d)"}]}`

func TestTwoReplicasShareOnePostgres(t *testing.T) {
	dsn := schemaDSN(t, postgresDSN(t))
	cfg := postgresConfig(t, dsn)
	a := start(t, "--config", cfg)
	b := start(t, "--config", cfg)
	hdr := map[string]string{"X-Scar-Workspace": "team", "X-Scar-Project": "api", "X-Scar-Session": "s1"}

	// One failure through each replica: the second replica's request sees both.
	r := do(t, "POST", a.BaseURL+"/v1/chat/completions", fmt.Sprintf(failingTurn, "c1", "c1", 10), hdr)
	if r.status != 200 || r.header.Get("X-Scar-Guard") != "0" {
		t.Fatalf("A: %d guard %s %s", r.status, r.header.Get("X-Scar-Guard"), r.body)
	}
	// B computes (and caches) its guard with one incident...
	plain := `{"model":"mock-gpt","messages":[{"role":"user","content":"status?"}]}`
	if r := do(t, "POST", b.BaseURL+"/v1/chat/completions", plain, hdr); r.header.Get("X-Scar-Guard") != "0" {
		t.Fatalf("B: guard %q before the repeat", r.header.Get("X-Scar-Guard"))
	}
	// ...then the failure repeats through A, and B's requests see it
	// within store.replica_delay (5ms).
	do(t, "POST", a.BaseURL+"/v1/chat/completions", fmt.Sprintf(failingTurn, "c2", "c2", 11), hdr)
	waitFor(t, 10*time.Second, "B sees A's incident", func() bool {
		r := do(t, "POST", b.BaseURL+"/v1/chat/completions", plain, hdr)
		return r.status == 200 && r.header.Get("X-Scar-Guard") == "1"
	})
	// The same tool result re-sent through the other replica is not recorded twice.
	do(t, "POST", a.BaseURL+"/v1/chat/completions", fmt.Sprintf(failingTurn, "c2", "c2", 11), hdr)
	r = do(t, "GET", a.BaseURL+"/scar/v1/incidents?workspace=team&project=api", "", nil)
	if n := strings.Count(r.body, `"type":"tool_error"`); n != 2 {
		t.Fatalf("%d tool incidents across replicas, want 2: %s", n, r.body)
	}

	// A solution stored through A is recalled through B.
	r = do(t, "POST", a.BaseURL+"/scar/v1/solutions", `{"workspace":"team","goal":"Rotate the TLS certificates of the ingress","approach":"cert-manager renewal, then rollout restart","outcome":"no downtime","confidence":0.9}`, nil)
	if r.status != 201 {
		t.Fatalf("store solution: %d %s", r.status, r.body)
	}
	took := waitFor(t, 10*time.Second, "solution recalled through B", func() bool {
		r := do(t, "GET", b.BaseURL+"/scar/v1/recall?workspace=team&goal=rotate+ingress+tls+certificate", "", nil)
		return strings.Contains(r.body, "cert-manager")
	})
	t.Logf("solution written through A was recalled through B after %s", took)
	r = do(t, "POST", b.BaseURL+"/v1/chat/completions", `{"model":"mock-gpt","messages":[{"role":"user","content":"[[mock:echo]] rotate the ingress TLS certificates"}]}`, map[string]string{"X-Scar-Workspace": "team"})
	if r.header.Get("X-Scar-Recall") != "1" || !strings.Contains(r.body, "cert-manager") {
		t.Fatalf("B's chat did not recall: %s %s", r.header.Get("X-Scar-Recall"), r.body)
	}

	// A deletion through B disappears from A's recall too.
	var list struct {
		Solutions []struct {
			ID, Goal string
		} `json:"solutions"`
	}
	json.Unmarshal([]byte(do(t, "GET", a.BaseURL+"/scar/v1/solutions?workspace=team", "", nil).body), &list)
	var id string
	for _, s := range list.Solutions {
		if strings.HasPrefix(s.Goal, "Rotate the TLS") {
			id = s.ID
		}
	}
	if id == "" {
		t.Fatalf("solution not listed through A: %+v", list)
	}
	if r := do(t, "DELETE", b.BaseURL+"/scar/v1/solutions/"+id+"?workspace=team", "", nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	waitFor(t, 10*time.Second, "deletion seen by A", func() bool {
		r := do(t, "GET", a.BaseURL+"/scar/v1/recall?workspace=team&goal=rotate+ingress+tls+certificate", "", nil)
		return !strings.Contains(r.body, "cert-manager")
	})
}

// With store.replica_delay 0, every request reads its tenant's incident
// version: a failure committed through one replica guards the very next
// request through another.
func TestReplicaDelayZeroSeesEveryCommit(t *testing.T) {
	dsn := schemaDSN(t, postgresDSN(t))
	cfg := postgresConfig(t, dsn)
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, append(b, "  replica_delay: 0s\n"...), 0o644)
	a := start(t, "--config", cfg)
	other := start(t, "--config", cfg)
	hdr := map[string]string{"X-Scar-Workspace": "team", "X-Scar-Project": "api", "X-Scar-Session": "s1"}
	plain := `{"model":"mock-gpt","messages":[{"role":"user","content":"status?"}]}`
	for i := range 5 {
		do(t, "POST", a.BaseURL+"/v1/chat/completions", fmt.Sprintf(failingTurn, fmt.Sprint("c", i), fmt.Sprint("c", i), 10+i), hdr)
		want := "0"
		if i > 0 {
			want = "1"
		}
		if r := do(t, "POST", other.BaseURL+"/v1/chat/completions", plain, hdr); r.status != 200 || r.header.Get("X-Scar-Guard") != want {
			t.Fatalf("after %d failures through A, B's next request: %d guard %q, want %s", i+1, r.status, r.header.Get("X-Scar-Guard"), want)
		}
		r := do(t, "GET", other.BaseURL+"/scar/v1/guard?workspace=team&project=api&session=s1", "", nil)
		if i > 0 && !strings.Contains(r.body, fmt.Sprintf("(Failed %d times)", i+1)) {
			t.Fatalf("after %d failures through A, B's guard: %d %s", i+1, r.status, r.body)
		}
	}
}

func TestMalformedDSNFailsAtStart(t *testing.T) {
	cfg := postgresConfig(t, "postgres://u:secretpw@db:notaport/x")
	err := run(context.Background(), []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0"}, noEnv, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "malformed") || strings.Contains(err.Error(), "secretpw") {
		t.Fatalf("err = %v", err)
	}
}

// pgctl runs the test cluster's pg_ctl (SCARPROXY_TEST_PGCTL) with args.
func pgctl(t *testing.T, args ...string) {
	t.Helper()
	prefix := strings.Fields(os.Getenv("SCARPROXY_TEST_PGCTL"))
	if len(prefix) == 0 {
		t.Skip("PostgreSQL outage test skipped: set SCARPROXY_TEST_PGCTL (eval \"$(bash .ci/postgres.sh)\")")
	}
	out, err := exec.Command(prefix[0], append(prefix[1:], args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_ctl %v: %v\n%s", args, err, out)
	}
}

func TestPostgresOutageFailsOpenAndRecovers(t *testing.T) {
	base := postgresDSN(t)
	// SCARPROXY_TEST_PGCTL may control a cluster of its own (so stopping it
	// does not disturb other tests); SCARPROXY_TEST_PGCTL_DSN then names it.
	if d := os.Getenv("SCARPROXY_TEST_PGCTL_DSN"); d != "" {
		base = d
	}
	pgctl(t, "status")
	dsn := schemaDSN(t, base)
	cfg := postgresConfig(t, dsn)
	logFile, err := os.CreateTemp("", "scarproxy-cmd-pg-*.log")
	if err != nil {
		t.Fatal(err)
	}
	logFile.Close()
	defer os.Remove(logFile.Name())
	os.Chmod(logFile.Name(), 0o666) // the server runs as the cluster's owner
	startPG := func() { pgctl(t, "start", "-l", logFile.Name()) }
	stopped := false
	t.Cleanup(func() {
		if stopped {
			startPG()
		}
	})
	in := start(t, "--config", cfg)
	chat := `{"model":"mock-gpt","messages":[{"role":"user","content":"hello"}]}`
	if r := do(t, "POST", in.BaseURL+"/v1/chat/completions", chat, nil); r.status != 200 || r.header.Get("X-Scar-Degraded") != "" {
		t.Fatalf("healthy: %d %q", r.status, r.header.Get("X-Scar-Degraded"))
	}

	pgctl(t, "stop", "-m", "fast")
	stopped = true
	r := do(t, "POST", in.BaseURL+"/v1/chat/completions", chat, nil)
	if r.status != 200 || r.header.Get("X-Scar-Degraded") != "store" || !strings.Contains(r.body, "Mock answer") {
		t.Fatalf("database down: %d degraded=%q %s", r.status, r.header.Get("X-Scar-Degraded"), r.body)
	}
	if r := do(t, "GET", in.BaseURL+"/readyz", "", nil); r.status != 503 || !strings.Contains(r.body, "store") {
		t.Fatalf("readyz while down: %d %s", r.status, r.body)
	}
	// A replica started while the database is down starts, and says why it is not ready.
	late := start(t, "--config", cfg)
	if r := do(t, "GET", late.BaseURL+"/readyz", "", nil); r.status != 503 {
		t.Fatalf("late replica readyz: %d %s", r.status, r.body)
	}

	startPG()
	stopped = false
	for _, inst := range []*instance{in, late} {
		waitFor(t, 60*time.Second, "recovery after the database returned", func() bool {
			r := do(t, "POST", inst.BaseURL+"/v1/chat/completions", chat, nil)
			return r.status == 200 && r.header.Get("X-Scar-Degraded") == ""
		})
		if r := do(t, "GET", inst.BaseURL+"/readyz", "", nil); r.status != 200 {
			t.Fatalf("readyz after recovery: %d %s", r.status, r.body)
		}
	}
	// Memory works again: a failure recorded now is listed.
	do(t, "POST", late.BaseURL+"/v1/chat/completions", `{"model":"mock-gpt","messages":[{"role":"user","content":"[[mock:status=503]] x"}]}`, nil)
	if r := do(t, "GET", in.BaseURL+"/scar/v1/incidents", "", nil); !bytes.Contains([]byte(r.body), []byte(`"status_code":503`)) {
		t.Fatalf("incident after recovery not stored: %s", r.body)
	}
}
