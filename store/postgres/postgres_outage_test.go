package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/storetest"
)

// envPgCtl names the variable holding a command prefix that runs pg_ctl on
// a test cluster (words split on spaces; no quoting), e.g.
// `runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D /tmp/scarpg/outage -w`.
// envPgCtlDSN names the DSN of a database in that cluster; when unset the
// cluster is the one of SCARPROXY_TEST_POSTGRES_DSN. A cluster of its own
// (.ci/postgres.sh makes one) keeps the outage from failing the tests of
// other packages that run at the same time.
const (
	envPgCtl    = "SCARPROXY_TEST_PGCTL"
	envPgCtlDSN = "SCARPROXY_TEST_PGCTL_DSN"
)

// recoverDeadline bounds how long a test waits for a store to recover after
// its database comes back.
const recoverDeadline = 60 * time.Second

// freePort returns a loopback port where nothing listens (at the time).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestOpenMalformedDSN(t *testing.T) {
	const password = "hunter2"
	tests := []struct {
		name string
		dsn  string
	}{
		{"bad port in URL", "postgres://scar:" + password + "@db.example:notaport/scar"},
		{"broken URL", "postgres://scar:" + password + "@[::1/scar"},
		{"bad port keyword/value", "host=db.example user=scar password=" + password + " port=abc"},
		{"bad connect_timeout", "host=db.example password=" + password + " connect_timeout=soon"},
		{"bad pool parameter", "postgres://scar:" + password + "@db.example/scar?pool_max_conns=many"},
		{"unknown sslmode", "postgres://scar:" + password + "@db.example/scar?sslmode=maybe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Open(context.Background(), tt.dsn, Options{})
			if err == nil {
				p.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), "malformed DSN") {
				t.Fatalf("error %q does not say the DSN is malformed", err)
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("error %q shows the password", err)
			}
		})
	}
}

// TestOpenNothingListening: a database that is down at start is not
// an error at Open; calls fail with the reason, promptly, until it is up.
func TestOpenNothingListening(t *testing.T) {
	const password = "hunter2"
	dsn := "postgres://scar:" + password + "@127.0.0.1:" + strconv.Itoa(freePort(t)) + "/scar?sslmode=disable&connect_timeout=5"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Open(ctx, dsn, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open with the database down: %v", err)
	}
	defer p.Close()

	err = p.Ping(ctx)
	if err == nil {
		t.Fatal("Ping succeeded with nothing listening")
	}
	if !strings.Contains(err.Error(), "connect") || strings.Contains(err.Error(), password) {
		t.Fatalf("Ping error %q: want the connection failure, without the password", err)
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"AddIncident", func() error { return p.AddIncident(ctx, &store.Incident{Workspace: "w", Project: "p"}) }},
		{"AddIncidentOnce", func() error {
			_, err := p.AddIncidentOnce(ctx, &store.Incident{Workspace: "w", Project: "p"}, "k")
			return err
		}},
		{"ListIncidents", func() error {
			_, err := p.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p"})
			return err
		}},
		{"PutSolution", func() error { return p.PutSolution(ctx, &store.Solution{Workspace: "w", Key: "k", Goal: "g"}) }},
		{"SolutionChanges", func() error { _, _, err := p.SolutionChanges(ctx, 0, 10); return err }},
		{"AddUsage", func() error {
			return p.AddUsage(ctx, []store.Usage{{Workspace: "w", Project: "p", Hour: time.Now(), Requests: 1}})
		}},
		{"ListUsage", func() error {
			_, err := p.ListUsage(ctx, store.UsageQuery{Workspace: "w", Project: "p"})
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call()
			if err == nil {
				t.Fatal("succeeded with nothing listening")
			}
			// Refused at once: the error is the cause, not our deadline.
			if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connect") {
				t.Fatalf("err = %v, want the connection failure", err)
			}
		})
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Ping(ctx); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Ping after Close = %v, want ErrClosed", err)
	}
}

// TestPostgresAppearsLater opens a store on a port where nothing listens,
// then puts the real database behind that port: the same store migrates and
// works without being reopened.
func TestPostgresAppearsLater(t *testing.T) {
	target, err := parseHostPort(freshSchema(t, testPostgresDSN(t)))
	if err != nil {
		t.Skipf("needs a URL DSN in %s: %v", envPostgresDSN, err)
	}
	port := freePort(t)
	dsn := replaceHostPort(t, target.dsn, "127.0.0.1:"+strconv.Itoa(port))
	ctx := context.Background()
	p, err := Open(ctx, dsn, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer p.Close()
	if err := p.Ping(ctx); err == nil {
		t.Fatal("Ping succeeded before the database appeared")
	}
	if err := p.AddIncident(ctx, &store.Incident{Workspace: "w", Project: "p"}); err == nil {
		t.Fatal("AddIncident succeeded before the database appeared")
	}

	stop := forwardTCP(t, "127.0.0.1:"+strconv.Itoa(port), target.addr)
	defer stop()
	waitPing(t, p)
	inc := store.Incident{Workspace: "w", Project: "p", Message: "after"}
	if err := p.AddIncident(ctx, &inc); err != nil {
		t.Fatalf("AddIncident after the database appeared: %v", err)
	}
	got, err := p.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p"})
	if err != nil || len(got) != 1 || got[0].ID != inc.ID {
		t.Fatalf("ListIncidents = %+v, %v", got, err)
	}
}

// TestPostgresOutage stops the real server under a working store, checks
// that calls fail promptly, starts it again, and checks that the same store
// recovers by itself.
func TestPostgresOutage(t *testing.T) {
	pgctl := strings.Fields(os.Getenv(envPgCtl))
	if len(pgctl) == 0 {
		t.Skipf("outage test skipped: set %s to a pg_ctl command prefix for a test cluster", envPgCtl)
	}
	dsn := os.Getenv(envPgCtlDSN)
	if dsn == "" {
		dsn = testPostgresDSN(t)
	}
	dsn = freshSchema(t, dsn)
	ctx := context.Background()
	p, err := Open(ctx, dsn, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	before := store.Incident{Workspace: "w", Project: "p", Message: "before"}
	if err := p.AddIncident(ctx, &before); err != nil {
		t.Fatal(err)
	}

	logFile, err := os.CreateTemp("", "scarproxy-pg-*.log")
	if err != nil {
		t.Fatal(err)
	}
	logFile.Close()
	defer os.Remove(logFile.Name())
	// The server runs as the cluster's owner and appends to this file.
	if err := os.Chmod(logFile.Name(), 0o666); err != nil {
		t.Fatal(err)
	}
	start := func() error { return runPgCtl(t, pgctl, "start", "-l", logFile.Name()) }
	if err := runPgCtl(t, pgctl, "stop", "-m", "fast"); err != nil {
		t.Fatalf("stop server: %v", err)
	}
	restarted := false
	defer func() {
		if !restarted {
			if err := start(); err != nil {
				t.Errorf("restart server after failure: %v", err)
			}
		}
	}()

	down, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.Ping(down); err == nil {
		t.Fatal("Ping succeeded with the server stopped")
	}
	err = p.AddIncident(down, &store.Incident{Workspace: "w", Project: "p", Message: "lost"})
	if err == nil {
		t.Fatal("AddIncident succeeded with the server stopped")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AddIncident waited for the deadline instead of failing: %v", err)
	}
	if _, err := p.ListIncidents(down, store.IncidentQuery{Workspace: "w", Project: "p"}); err == nil {
		t.Fatal("ListIncidents succeeded with the server stopped")
	}

	if err := start(); err != nil {
		b, _ := os.ReadFile(logFile.Name())
		t.Fatalf("start server: %v\n%s", err, b)
	}
	restarted = true
	waitPing(t, p)
	after := store.Incident{Workspace: "w", Project: "p", Message: "after"}
	if err := p.AddIncident(ctx, &after); err != nil {
		t.Fatalf("AddIncident after restart: %v", err)
	}
	got, err := p.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if m := storetest.Messages(got); m != "after,before" {
		t.Fatalf("incidents after restart = %q, want \"after,before\"", m)
	}
}

// TestPostgresConnectionLost cuts the network path to a working database
// (a TCP relay in between) and restores it: calls fail promptly while it is
// cut, and the same store recovers by itself. Unlike TestPostgresOutage it
// needs no control of the server.
func TestPostgresConnectionLost(t *testing.T) {
	target, err := parseHostPort(freshSchema(t, testPostgresDSN(t)))
	if err != nil {
		t.Skipf("needs a URL DSN in %s: %v", envPostgresDSN, err)
	}
	relay := "127.0.0.1:" + strconv.Itoa(freePort(t))
	stop := forwardTCP(t, relay, target.addr)
	ctx := context.Background()
	p, err := Open(ctx, replaceHostPort(t, target.dsn, relay), Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	before := store.Incident{Workspace: "w", Project: "p", Message: "before"}
	if err := p.AddIncident(ctx, &before); err != nil {
		t.Fatal(err)
	}

	stop()
	down, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.Ping(down); err == nil {
		t.Fatal("Ping succeeded with the connection cut")
	}
	err = p.AddIncident(down, &store.Incident{Workspace: "w", Project: "p", Message: "lost"})
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AddIncident with the connection cut = %v, want the connection failure", err)
	}

	defer forwardTCP(t, relay, target.addr)()
	waitPing(t, p)
	after := store.Incident{Workspace: "w", Project: "p", Message: "after"}
	if err := p.AddIncident(ctx, &after); err != nil {
		t.Fatalf("AddIncident after reconnect: %v", err)
	}
	got, err := p.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p"})
	if err != nil || storetest.Messages(got) != "after,before" {
		t.Fatalf("incidents after reconnect = %q, %v; want \"after,before\"", storetest.Messages(got), err)
	}
}

// runPgCtl runs the pg_ctl prefix with args. Output goes to a file, not a
// pipe: a server started without -l would hold a pipe open forever.
func runPgCtl(t *testing.T, prefix []string, args ...string) error {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "pgctl-*.out")
	if err != nil {
		return err
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prefix[0], append(prefix[1:], args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	b, _ := os.ReadFile(out.Name())
	t.Logf("%s %s: %s", strings.Join(prefix, " "), strings.Join(args, " "), strings.TrimSpace(string(b)))
	return err
}

// waitPing polls Ping until it succeeds or recoverDeadline passes.
func waitPing(t *testing.T, p *Store) {
	t.Helper()
	deadline := time.Now().Add(recoverDeadline)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = p.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("store did not recover within %s: %v", recoverDeadline, err)
}

// hostPort is a DSN and the TCP address of its server.
type hostPort struct {
	dsn  string
	addr string
}

// parseHostPort finds the server address of a URL DSN.
func parseHostPort(dsn string) (hostPort, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return hostPort{}, err
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return hostPort{}, errors.New("not a postgres:// URL")
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	return hostPort{dsn: dsn, addr: net.JoinHostPort(host, port)}, nil
}

// replaceHostPort returns the URL DSN with another host:port.
func replaceHostPort(t *testing.T, dsn, addr string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// forwardTCP listens on from and copies every connection to and from to.
// The returned function stops it and closes open connections.
func forwardTCP(t *testing.T, from, to string) func() {
	t.Helper()
	l, err := net.Listen("tcp", from)
	if err != nil {
		t.Fatalf("listen %s: %v", from, err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			track(c)
			up, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			track(up)
			wg.Go(func() { io.Copy(up, c); up.Close() })
			wg.Go(func() { io.Copy(c, up); c.Close() })
		}
	})
	return func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}
