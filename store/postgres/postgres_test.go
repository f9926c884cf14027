package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/storetest"
)

// envPostgresDSN names the variable holding the DSN of a PostgreSQL
// database the tests may create schemas in (.ci/postgres.sh starts one).
const envPostgresDSN = "SCARPROXY_TEST_POSTGRES_DSN"

// testPostgresDSN returns the test database's DSN, or skips t.
func testPostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(envPostgresDSN)
	if dsn == "" {
		t.Skipf("PostgreSQL tests skipped: set %s (e.g. eval \"$(.ci/postgres.sh)\")", envPostgresDSN)
	}
	return dsn
}

// freshSchema creates a schema of its own for t, dropped when t ends, and
// returns dsn with its search_path set to it.
func freshSchema(t testing.TB, dsn string) string {
	t.Helper()
	ctx := context.Background()
	var r [6]byte
	_, _ = rand.Read(r[:])
	name := "scarproxy_test_" + hex.EncodeToString(r[:])
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", envPostgresDSN, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return withSearchPath(dsn, name)
}

// withSearchPath adds a search_path run-time parameter to a URL or
// keyword/value DSN.
func withSearchPath(dsn, schema string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// openTestPostgres opens a store on a fresh schema, closed at the end of
// the test, and returns how to reopen it (a new pool on the same schema).
func openTestPostgres(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
	return openTestPostgresWith(t, 0)
}

// openTestPostgresWith is openTestPostgres with a VersionMaxAge.
func openTestPostgresWith(t *testing.T, versionMaxAge time.Duration) (store.Store, func(t *testing.T) store.Store) {
	t.Helper()
	dsn := freshSchema(t, testPostgresDSN(t))
	clock := storetest.TickClock(storetest.ClockEpoch, time.Millisecond)
	open := func(t *testing.T) store.Store {
		t.Helper()
		p, err := Open(context.Background(), dsn, Options{Now: clock, Logger: testLogger(t), VersionMaxAge: versionMaxAge})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { p.Close() })
		if err := p.Ping(context.Background()); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		return p
	}
	return open(t), open
}

// TestPostgres runs the conformance suite on fresh schemas.
func TestPostgres(t *testing.T) {
	testPostgresDSN(t)
	storetest.Run(t, openTestPostgres)
}

// TestPostgresMigrateConcurrently starts several stores on one empty schema
// at once, as replicas do: each migration is applied exactly once.
func TestPostgresMigrateConcurrently(t *testing.T) {
	dsn := freshSchema(t, testPostgresDSN(t))
	const replicas = 6
	var wg sync.WaitGroup
	errs := make(chan error, replicas)
	for i := range replicas {
		wg.Go(func() {
			p, err := Open(context.Background(), dsn, Options{Logger: testLogger(t)})
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			if err := p.Ping(context.Background()); err != nil {
				errs <- err
				return
			}
			errs <- p.AddIncident(context.Background(), &store.Incident{Workspace: "w", Project: "p", Message: fmt.Sprint(i)})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("embedded migrations: %v, %v", names, err)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var applied, incidents int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != len(names) {
		t.Fatalf("schema_migrations has %d rows, want %d", applied, len(names))
	}
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM incidents`).Scan(&incidents); err != nil {
		t.Fatal(err)
	}
	if incidents != replicas {
		t.Fatalf("%d incidents, want %d", incidents, replicas)
	}
}

// TestPostgresUsesIndexes checks that the hot reads are answered from the
// tenant indexes, not a scan of the table, and so is the age rule of fixes.
func TestPostgresUsesIndexes(t *testing.T) {
	st, _ := openTestPostgres(t)
	s := st.(*Store)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `INSERT INTO incidents (id, workspace, project, session, ts)
		SELECT 'i' || i, 'w' || (i % 50), 'p', 's' || (i % 7), now() - make_interval(secs => i)
		FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO fixes (id, workspace, project, key, key_id, tool, created, updated)
		SELECT 'f' || i, 'w' || (i % 50), 'p', 'k' || i, 'k' || i, 't', now(), now() - make_interval(secs => i)
		FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE incidents, fixes`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, query, index string
	}{
		{"tenant", `SELECT id FROM incidents WHERE workspace = 'w1' AND project = 'p'
			AND ts >= now() - interval '1 hour' ORDER BY ts DESC, seq DESC LIMIT 1000`, "incidents_tenant_ts"},
		{"session", `SELECT id FROM incidents WHERE workspace = 'w1' AND project = 'p' AND session = 's1'
			ORDER BY ts DESC, seq DESC LIMIT 1000`, "incidents_session_ts"},
		{"fixes", `SELECT id FROM fixes WHERE workspace = 'w1' AND project = 'p'
			ORDER BY updated DESC, id DESC LIMIT 100`, "fixes_tenant_updated"},
		{"fixes by age", `SELECT id FROM fixes WHERE updated < now() - interval '19990 seconds'`, "fixes_updated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := s.pool.Query(ctx, "EXPLAIN "+tt.query)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, line := range plan {
				if strings.Contains(line, tt.index) {
					found = true
				}
			}
			if !found {
				t.Fatalf("plan does not use %s:\n%s", tt.index, strings.Join(plan, "\n"))
			}
		})
	}
}

// TestPostgresPruneSolutions: the age rule is answered from its partial
// index, and a prune larger than one batch removes everything due, each
// removal with its tombstone.
func TestPostgresPruneSolutions(t *testing.T) {
	st, _ := openTestPostgres(t)
	s := st.(*Store)
	ctx := context.Background()
	now := storetest.ClockEpoch.Add(time.Hour)
	// Workspace a: 6,500 solutions, the first 6,000 a year old, one in
	// three of those verified; b: 7,000 recent ones; c: 100.
	if _, err := s.pool.Exec(ctx, `INSERT INTO solutions
			(id, workspace, key, goal, verified, created, updated)
		SELECT 'a' || lpad(i::text, 6, '0'), 'a', 'ka' || i, 'g', i % 3 = 0, ts, ts
		FROM generate_series(1, 6500) AS i,
			LATERAL (SELECT $1::timestamptz - CASE WHEN i <= 6000 THEN interval '365 days' ELSE interval '0' END
				+ make_interval(secs => i) AS ts) t
		UNION ALL
		SELECT 'b' || lpad(i::text, 6, '0'), 'b', 'kb' || i, 'g', false, $1::timestamptz + make_interval(secs => i),
			$1::timestamptz + make_interval(secs => i)
		FROM generate_series(1, 7000) AS i
		UNION ALL
		SELECT 'c' || lpad(i::text, 6, '0'), 'c', 'kc' || i, 'g', false, $1::timestamptz, $1::timestamptz
		FROM generate_series(1, 100) AS i`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE solutions`); err != nil {
		t.Fatal(err)
	}
	rows, err := s.pool.Query(ctx, `EXPLAIN SELECT id FROM solutions WHERE NOT verified AND updated < $1
		ORDER BY updated, id LIMIT 5000`, now.Add(-400*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(plan, "\n"), "solutions_unverified_updated") {
		t.Fatalf("the age rule does not use solutions_unverified_updated:\n%s", strings.Join(plan, "\n"))
	}

	// Age: the 4,000 old unverified ones of a. Then the cap of 1,000
	// removes b's 6,000 oldest and, of a's 2,500 left (2,166 verified), the
	// 334 unverified and the 1,166 least recently updated verified ones.
	n, err := s.PruneSolutions(ctx, now.Add(-24*time.Hour), 1000)
	if want := 4000 + 6000 + 1500; err != nil || n != want {
		t.Fatalf("PruneSolutions = %d, %v; want %d", n, err, want)
	}
	var left, verified, tombstones int
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE verified) FROM solutions WHERE workspace = 'a'`).Scan(&left, &verified); err != nil {
		t.Fatal(err)
	}
	if left != 1000 || verified != 1000 {
		t.Fatalf("a keeps %d solutions, %d verified; want 1000 verified", left, verified)
	}
	for ws, want := range map[string]int{"b": 1000, "c": 100} {
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM solutions WHERE workspace = $1`, ws).Scan(&left); err != nil || left != want {
			t.Fatalf("%s keeps %d solutions (%v), want %d", ws, left, err, want)
		}
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM solution_tombstones`).Scan(&tombstones); err != nil || tombstones != n {
		t.Fatalf("%d tombstones (%v), want %d", tombstones, err, n)
	}
	// The kept ones of b are its newest.
	var oldest string
	if err := s.pool.QueryRow(ctx, `SELECT min(id) FROM solutions WHERE workspace = 'b'`).Scan(&oldest); err != nil || oldest != "b006001" {
		t.Fatalf("oldest kept of b = %s (%v), want b006001", oldest, err)
	}
}

// BenchmarkListIncidentsPostgres runs BenchmarkListIncidents' cases against
// PostgreSQL, on a schema seeded with the same 1M incidents.
func BenchmarkListIncidentsPostgres(b *testing.B) {
	dsn := freshSchema(b, testPostgresDSN(b))
	ctx := context.Background()
	p, err := Open(ctx, dsn, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	if err := p.Ping(ctx); err != nil {
		b.Fatal(err)
	}
	_, err = p.pool.Exec(ctx, `INSERT INTO incidents
			(id, workspace, project, session, agent, provider, model, type, message, fingerprint, ts)
		SELECT lpad(to_hex(i), 26, '0'), 'bench', 'p', 'session-' || lpad((i % 100)::text, 2, '0'),
			'agent-1', 'openai', 'gpt-4o-mini', 'tool_error',
			'exit status 1: go test ./... failed: undefined: foo (compile error)', 'tool:go_test:undefined',
			$1::timestamptz - make_interval(secs => $2 - 1 - i)
		FROM generate_series(0, $2 - 1) AS i`, storetest.BenchNewest, storetest.BenchIncidents)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := p.pool.Exec(ctx, `VACUUM ANALYZE incidents`); err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkList(b, p)
}

// TestPostgresIncidentCodeMigration opens a database written before
// incidents had a code: its rows read back with none, and new rows keep
// theirs.
func TestPostgresIncidentCodeMigration(t *testing.T) {
	dsn := freshSchema(t, testPostgresDSN(t))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version text PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		version := strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
		if version >= "0004_incident_code" {
			break
		}
		sql, err := migrationFS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, version); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO incidents (id, workspace, project, type, status_code, message, ts)
		VALUES ('old', 'w', 'p', 'http_error', 502, 'bad gateway', $1)`, storetest.Epoch); err != nil {
		t.Fatal(err)
	}
	p, err := Open(ctx, dsn, Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	inc := store.Incident{Time: storetest.Epoch.Add(time.Minute), Workspace: "w", Project: "p", Type: "network_error", Code: "ECONNRESET", Message: "socket hang up"}
	if err := p.AddIncident(ctx, &inc); err != nil {
		t.Fatal(err)
	}
	got, err := p.ListIncidents(ctx, store.IncidentQuery{Workspace: "w", Project: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Code != "ECONNRESET" || got[1].ID != "old" || got[1].Code != "" || got[1].StatusCode != 502 {
		t.Fatalf("incidents after migration: %+v", got)
	}
}

// TestPostgresVersionMaxAge runs the store's tests on a store whose
// IncidentVersion may answer from a read an hour old: every change made
// through the store must still move its version at once.
func TestPostgresVersionMaxAge(t *testing.T) {
	testPostgresDSN(t)
	storetest.Run(t, func(t *testing.T) (store.Store, func(t *testing.T) store.Store) {
		return openTestPostgresWith(t, time.Hour)
	})
}
