// Package postgres is the [store.Store] shared by the replicas of a team
// gateway: a PostgreSQL database ([Open]) whose schema is migrated on first
// use from the files of migrations/, embedded in the binary. [Store] says
// how it behaves while the database is down and how its solution change
// feed stays in order; flight.go, how replicas share reads of a tenant's
// incident version.
//
// # Imports
//
// Only this package imports pgx. It imports store and store/internal, and
// must not import bbolt, Echo nor any other scarproxy package.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Advisory lock classes (first key of pg_advisory_xact_lock(int, int)); the
// second key is a hash of the current schema, so stores in different
// schemas of one database do not wait for each other.
const (
	lockMigrate   = 0x5ca4_0001 // schema migrations
	lockSolutions = 0x5ca4_0002 // solution writes: keeps the change feed in commit order
)

// defaultConnectTimeout bounds one connection attempt when the DSN sets no
// connect_timeout, so calls made while the database is unreachable fail
// instead of hanging.
const defaultConnectTimeout = 5 * time.Second

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Now is the clock used for incident times and solution timestamps.
	// Nil means time.Now.
	Now func() time.Time
	// Logger receives migration and availability events (never the DSN's
	// password). Nil discards them.
	Logger *slog.Logger
	// VersionMaxAge lets IncidentVersion answer from a read of the
	// version that began at most this long before the call, instead of
	// waiting for a read that begins after it: a change made through
	// another store (another replica) is then seen within VersionMaxAge of
	// its commit, and callers under steady load never wait for the
	// database (see flights). Changes made through this store are seen at
	// once either way. Zero: every call waits for a read begun after it.
	VersionMaxAge time.Duration
}

// Store is the [store.Store] shared by the replicas of a team gateway. It is
// safe for concurrent use by many goroutines and many processes.
//
// # Availability
//
// A database that is down when Open runs is not an error: the store
// migrates its schema on the first call that reaches the database, and
// every call made before that (or during a later outage) returns an error
// wrapping the cause, bounded by its ctx and by the connect timeout (the
// DSN's connect_timeout, else 5s). Ping reports the reason. The same value
// recovers by itself when the database comes back.
//
// # Change feed
//
// Every solution insert or update takes a new seq from one sequence, and a
// deletion leaves a tombstone with its own seq. Solution writes are
// serialized by an advisory lock held until commit, so seqs become visible
// in order and a reader polling SolutionChanges never skips one.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	log  *slog.Logger

	closed   atomic.Bool
	migrated atomic.Bool
	migrate  chan struct{} // one token: held while migrating
	down     atomic.Bool   // last migration attempt failed (for logging changes only)

	versions flights // IncidentVersion calls of a tenant share reads
}

// versionKey is a tenant's key in Store.versions. Workspace and project
// are cleaned, so neither holds the U+0000 that separates them.
func versionKey(workspace, project string) string { return workspace + "\x00" + project }

// versionMoved says that a write through p moved the tenant's incident
// version (workspace and project cleaned) by an amount p does not know:
// the next IncidentVersion reads it. Writes call it whether or not they
// report success: a write may have committed and still failed.
func (p *Store) versionMoved(workspace, project string) {
	p.versions.forget(versionKey(workspace, project))
}

// versionReadTimeout bounds a version read made for callers that waited
// for it (see flights).
const versionReadTimeout = 10 * time.Second

var _ store.Store = (*Store)(nil)

// Open returns a store on the database named by dsn (a URL or
// keyword/value connection string, as accepted by pgx; pool_* parameters
// included). A malformed dsn is an error; an unreachable database is not
// (see Availability). Open tries to migrate once, bounded by ctx.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, malformedDSN(err)
	}
	if cfg.ConnConfig.ConnectTimeout <= 0 {
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	p := &Store{
		pool:    pool,
		now:     opts.Now,
		log:     opts.Logger,
		migrate: make(chan struct{}, 1),
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.versions = flights{timeout: versionReadTimeout, maxAge: max(opts.VersionMaxAge, 0), now: p.now}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if err := p.ready(ctx); err != nil {
		p.log.Warn("store: postgres unavailable at start; will retry on use",
			"host", cfg.ConnConfig.Host, "port", cfg.ConnConfig.Port, "database", cfg.ConnConfig.Database, "err", err)
	}
	return p, nil
}

// malformedDSN reports a DSN pgx cannot parse without repeating the DSN
// (it may hold a password).
func malformedDSN(err error) error {
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return errors.New("store: open postgres: malformed DSN")
	}
	bare := *pce
	bare.ConnString = ""
	detail := strings.TrimPrefix(bare.Error(), "cannot parse ``: ")
	var ue *url.Error
	if errors.As(pce, &ue) {
		detail = strings.ReplaceAll(detail, ue.Error(), ue.Op+": "+ue.Err.Error())
	}
	return fmt.Errorf("store: open postgres: malformed DSN: %s", detail)
}

// Close closes the pool. Later calls of any method, Close included, return
// ErrClosed.
func (p *Store) Close() error {
	if p.closed.Swap(true) {
		return fmt.Errorf("store: close: %w", store.ErrClosed)
	}
	p.pool.Close()
	return nil
}

// Ping migrates the schema if not done yet and checks that the database
// answers; its error says why not.
func (p *Store) Ping(ctx context.Context) error {
	if err := p.use(ctx, "ping"); err != nil {
		return err
	}
	if err := p.pool.Ping(ctx); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// use checks Close and makes sure the schema is migrated.
func (p *Store) use(ctx context.Context, op string) error {
	if p.closed.Load() {
		return fmt.Errorf("store: %s: %w", op, store.ErrClosed)
	}
	if err := p.ready(ctx); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	return nil
}

// ready migrates the schema once. A failed attempt is retried by the next
// call; concurrent callers wait for the attempt in progress, or their ctx.
func (p *Store) ready(ctx context.Context) error {
	if p.migrated.Load() {
		return nil
	}
	select {
	case p.migrate <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("database not ready: %w", ctx.Err())
	}
	defer func() { <-p.migrate }()
	if p.migrated.Load() {
		return nil
	}
	applied, err := p.applyMigrations(ctx)
	if err != nil {
		if !p.down.Swap(true) {
			p.log.Warn("store: postgres not ready", "err", err)
		}
		return fmt.Errorf("database not ready: %w", err)
	}
	p.migrated.Store(true)
	p.down.Store(false)
	p.log.Info("store: postgres ready", "migrations_applied", applied)
	return nil
}

// applyMigrations applies, in name order, the embedded migrations not yet
// recorded in schema_migrations, in one transaction under an advisory lock
// so that replicas starting together apply each migration once. It returns
// the versions it applied.
func (p *Store) applyMigrations(ctx context.Context) ([]string, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var applied []string
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))`, lockMigrate); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version text PRIMARY KEY,
			applied timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		done, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		for _, name := range names {
			version := strings.TrimSuffix(path.Base(name), ".sql")
			if slices.Contains(done, version) {
				continue
			}
			sql, err := migrationFS.ReadFile(name)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return fmt.Errorf("migration %s: %w", version, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, version); err != nil {
				return fmt.Errorf("record migration %s: %w", version, err)
			}
			applied = append(applied, version)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	return applied, nil
}

const insertIncident = `INSERT INTO incidents
	(id, workspace, project, session, agent, provider, model, type, status_code, message, fingerprint, ts, code)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

func incidentArgs(r *store.Incident) []any {
	return []any{r.ID, r.Workspace, r.Project, r.Session, r.Agent, r.Provider, r.Model, r.Type,
		r.StatusCode, r.Message, r.Fingerprint, r.Time, r.Code}
}

// AddIncident stores inc; see [store.Store]. A caller-supplied ID must be
// unique.
func (p *Store) AddIncident(ctx context.Context, inc *store.Incident) error {
	rec, err := backend.PrepareIncident(inc, p.now)
	if err != nil {
		return fmt.Errorf("store: add incident: %w", err)
	}
	if err := p.use(ctx, "add incident"); err != nil {
		return err
	}
	defer p.versionMoved(rec.Workspace, rec.Project)
	if _, err := p.pool.Exec(ctx, insertIncident, incidentArgs(&rec)...); err != nil {
		return fmt.Errorf("store: add incident: %w", err)
	}
	*inc = rec
	return nil
}

// AddIncidentOnce stores inc unless dedupeKey was already recorded for the
// tenant; see [store.Store]. It is a batch of one (AddIncidents): the dedupe
// insert and the incident insert are one statement, and the tenant's
// version row is locked first, as every batch locks it, so that writers
// never wait for each other in opposite orders. An empty dedupeKey stores
// inc unconditionally.
func (p *Store) AddIncidentOnce(ctx context.Context, inc *store.Incident, dkey string) (bool, error) {
	if dkey == "" {
		err := p.AddIncident(ctx, inc)
		return err == nil, err
	}
	rec := *inc
	batch := []store.IncidentWrite{{Incident: &rec, DedupeKey: dkey}}
	if _, err := p.AddIncidents(ctx, batch); err != nil {
		return false, fmt.Errorf("store: add incident once: %w", err)
	}
	if batch[0].Stored {
		*inc = rec
	}
	return batch[0].Stored, nil
}

// ListIncidents returns the tenant's incidents, newest first (incidents of
// the same microsecond: last stored first), from the (workspace, project,
// ts) or (workspace, project, session, ts) index; see [store.Store].
func (p *Store) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	if q.Workspace == "" || q.Project == "" {
		return nil, fmt.Errorf("store: list incidents: %w: workspace and project are required", store.ErrInvalid)
	}
	if err := p.use(ctx, "list incidents"); err != nil {
		return nil, err
	}
	q.Workspace, q.Project, q.Session = stored.Text(q.Workspace), stored.Text(q.Project), stored.Text(q.Session)
	var sb strings.Builder
	sb.WriteString(`SELECT id, ts, session, agent, provider, model, type, status_code, message, fingerprint, code
		FROM incidents WHERE workspace = $1 AND project = $2`)
	args := []any{q.Workspace, q.Project}
	if q.Session != "" {
		args = append(args, q.Session)
		fmt.Fprintf(&sb, " AND session = $%d", len(args))
	}
	if !q.Since.IsZero() {
		args = append(args, stored.CeilMicro(q.Since))
		fmt.Fprintf(&sb, " AND ts >= $%d", len(args))
	}
	args = append(args, backend.IncidentLimit(q.Limit))
	fmt.Fprintf(&sb, " ORDER BY ts DESC, seq DESC LIMIT $%d", len(args))

	rows, err := p.pool.Query(ctx, sb.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("store: list incidents: %w", err)
	}
	out := []store.Incident{}
	for rows.Next() {
		inc := store.Incident{Workspace: q.Workspace, Project: q.Project}
		if err := rows.Scan(&inc.ID, &inc.Time, &inc.Session, &inc.Agent, &inc.Provider, &inc.Model,
			&inc.Type, &inc.StatusCode, &inc.Message, &inc.Fingerprint, &inc.Code); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list incidents: %w", err)
		}
		inc.Time = inc.Time.UTC()
		out = append(out, inc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list incidents: %w", err)
	}
	return out, nil
}

// IncidentVersion returns the tenant's incident version, kept by triggers
// on every insert and delete of incidents (migration 0002) and every
// insert, update and delete of fixes (migration 0005); see [store.Store].
func (p *Store) IncidentVersion(ctx context.Context, workspace, project string) (int64, error) {
	if err := p.use(ctx, "incident version"); err != nil {
		return 0, err
	}
	workspace, project = stored.Text(workspace), stored.Text(project)
	v, err := p.versions.do(ctx, versionKey(workspace, project), func(ctx context.Context) (int64, error) {
		var v int64
		err := p.pool.QueryRow(ctx, `SELECT version FROM incident_versions WHERE workspace = $1 AND project = $2`,
			workspace, project).Scan(&v)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, nil
		}
		return v, err
	})
	if err != nil {
		return 0, fmt.Errorf("store: incident version: %w", err)
	}
	return v, nil
}

// DeleteIncidents removes the tenant's incidents and dedupe keys; see
// [store.Store].
func (p *Store) DeleteIncidents(ctx context.Context, workspace, project string) (int, error) {
	if workspace == "" || project == "" {
		return 0, fmt.Errorf("store: delete incidents: %w: workspace and project are required", store.ErrInvalid)
	}
	if err := p.use(ctx, "delete incidents"); err != nil {
		return 0, err
	}
	workspace, project = stored.Text(workspace), stored.Text(project)
	defer p.versionMoved(workspace, project)
	var n int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM incidents WHERE workspace = $1 AND project = $2`, workspace, project)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		_, err = tx.Exec(ctx, `DELETE FROM incident_dedupe WHERE workspace = $1 AND project = $2`, workspace, project)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: delete incidents: %w", err)
	}
	return int(n), nil
}

// PruneIncidents removes incidents and dedupe keys older than before, then
// the oldest incidents of each tenant beyond maxPerTenant, in one
// transaction; see [store.Store]. A zero before applies no age rule.
func (p *Store) PruneIncidents(ctx context.Context, before time.Time, maxPerTenant int) (int, error) {
	if err := p.use(ctx, "prune incidents"); err != nil {
		return 0, err
	}
	defer p.versions.forgetAll()
	var n int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if !before.IsZero() {
			cut := stored.CeilMicro(before)
			tag, err := tx.Exec(ctx, `DELETE FROM incidents WHERE ts < $1`, cut)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
			if _, err := tx.Exec(ctx, `DELETE FROM incident_dedupe WHERE ts < $1`, cut); err != nil {
				return err
			}
		}
		if maxPerTenant > 0 {
			tag, err := tx.Exec(ctx, `DELETE FROM incidents AS i USING (
					SELECT id FROM (
						SELECT id, row_number() OVER (PARTITION BY workspace, project ORDER BY ts DESC, seq DESC) AS rn
						FROM incidents) ranked
					WHERE rn > $1) AS doomed
				WHERE i.id = doomed.id`, maxPerTenant)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune incidents: %w", err)
	}
	return int(n), nil
}

// solutionColumns are the columns PutSolutions writes; solutionRead those
// scanSolution reads, the embedding's included.
const (
	solutionColumns = `id, workspace, project, key, goal, approach, outcome, confidence, source, verified, created, updated,
	wrong_at, wrong_note`
	solutionRead = solutionColumns + `, embedding_model, embedding`
)

func scanSolution(row pgx.Row, s *store.Solution, extra ...any) error {
	var w wrongColumns
	var model string
	var vec []byte
	dst := append([]any{&s.ID, &s.Workspace, &s.Project, &s.Key, &s.Goal, &s.Approach, &s.Outcome,
		&s.Confidence, &s.Source, &s.Verified, &s.Created, &s.Updated, &w.at, &w.note, &model, &vec}, extra...)
	if err := row.Scan(dst...); err != nil {
		return err
	}
	s.Created, s.Updated = s.Created.UTC(), s.Updated.UTC()
	s.Wrong = w.mark()
	s.Embedding = nil
	if model != "" {
		v, ok := stored.ParseVector(vec)
		if !ok || len(v) == 0 {
			return fmt.Errorf("solution %s: embedding of %d bytes", s.ID, len(vec))
		}
		s.Embedding = &store.Embedding{Model: model, Vector: v}
	}
	return nil
}

// wrongColumns receives the wrong_at and wrong_note columns of a fix or a
// solution (migration 0008).
type wrongColumns struct {
	at   *time.Time
	note string
}

// mark returns the Wrong mark the columns hold, nil when wrong_at is NULL.
func (w *wrongColumns) mark() *store.Wrong {
	if w.at == nil {
		return nil
	}
	return &store.Wrong{At: w.at.UTC(), Note: w.note}
}

// wrongArgs returns the wrong_at and wrong_note values of w.
func wrongArgs(w *store.Wrong) (any, string) {
	if w == nil {
		return nil, ""
	}
	return w.At, w.Note
}

// keepWrong is the part of an upsert's SET list that keeps a stored mark
// (see [store.Wrong]): a mark given with the record replaces it; else it
// stays while the column named same (the judged text) is unchanged.
func keepWrong(table, same string) string {
	return `wrong_at = CASE WHEN EXCLUDED.wrong_at IS NOT NULL THEN EXCLUDED.wrong_at
			WHEN ` + table + `.` + same + ` = EXCLUDED.` + same + ` THEN ` + table + `.wrong_at END,
		wrong_note = CASE WHEN EXCLUDED.wrong_at IS NOT NULL THEN EXCLUDED.wrong_note
			WHEN ` + table + `.` + same + ` = EXCLUDED.` + same + ` THEN ` + table + `.wrong_note ELSE '' END`
}

// lockSolutionWrites serializes solution writes until tx ends (see Change feed).
func lockSolutionWrites(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext(coalesce(current_schema(), '')))`, lockSolutions)
	return err
}

// PutSolution inserts or updates s by (Workspace, Key); see [store.Store]. A
// new solution gets a new ID and Created time (any ID or Created in s is
// ignored); Updated is always set to now.
func (p *Store) PutSolution(ctx context.Context, s *store.Solution) error {
	_, err := p.PutSolutions(ctx, []*store.Solution{s}, 0)
	return err
}

// PutSolutions stores each of sols as PutSolution does, then brings each
// workspace it added a solution to back within maxPerWorkspace, in one
// transaction; see [store.Store].
func (p *Store) PutSolutions(ctx context.Context, sols []*store.Solution, maxPerWorkspace int) (int, error) {
	recs, err := backend.PrepareSolutions(sols)
	if err != nil {
		return 0, fmt.Errorf("store: put solution: %w", err)
	}
	if err := p.use(ctx, "put solution"); err != nil {
		return 0, err
	}
	now := stored.Time(p.now())
	removed := 0
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		removed = 0
		if err := lockSolutionWrites(ctx, tx); err != nil {
			return err
		}
		var grown []string // workspaces that gained a solution, in order
		for i := range recs {
			rec := &recs[i]
			rec.ID, rec.Created, rec.Updated = stored.NewID(now), now, now
			var added bool
			var w wrongColumns
			wrongAt, wrongNote := wrongArgs(rec.Wrong)
			row := tx.QueryRow(ctx, `INSERT INTO solutions (`+solutionColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
				ON CONFLICT (workspace, key) DO UPDATE SET
					project = EXCLUDED.project, goal = EXCLUDED.goal, approach = EXCLUDED.approach,
					outcome = EXCLUDED.outcome, confidence = EXCLUDED.confidence, source = EXCLUDED.source,
					verified = EXCLUDED.verified, updated = EXCLUDED.updated, seq = nextval('solution_seq'),
					`+keepWrong("solutions", "approach")+`,
					embedding_model = CASE WHEN solutions.goal = EXCLUDED.goal THEN solutions.embedding_model ELSE '' END,
					embedding = CASE WHEN solutions.goal = EXCLUDED.goal THEN solutions.embedding END
				RETURNING id, created, xmax = 0, wrong_at, wrong_note, embedding_model, embedding`,
				rec.ID, rec.Workspace, rec.Project, rec.Key, rec.Goal, rec.Approach, rec.Outcome,
				rec.Confidence, rec.Source, rec.Verified, rec.Created, rec.Updated, wrongAt, wrongNote)
			var model string
			var vec []byte
			if err := row.Scan(&rec.ID, &rec.Created, &added, &w.at, &w.note, &model, &vec); err != nil {
				return err
			}
			if model != "" {
				v, ok := stored.ParseVector(vec)
				if !ok || len(v) == 0 {
					return fmt.Errorf("solution %s: embedding of %d bytes", rec.ID, len(vec))
				}
				rec.Embedding = &store.Embedding{Model: model, Vector: v}
			}
			rec.Created, rec.Wrong = rec.Created.UTC(), w.mark()
			if added && !slices.Contains(grown, rec.Workspace) {
				grown = append(grown, rec.Workspace)
			}
		}
		if maxPerWorkspace <= 0 {
			return nil
		}
		for _, ws := range grown {
			n, err := capSolutions(ctx, tx, ws, maxPerWorkspace, 0)
			if err != nil {
				return err
			}
			removed += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: put solution: %w", err)
	}
	for i, s := range sols {
		*s = recs[i]
	}
	return removed, nil
}

// removeSolutions removes, in tx, the solutions whose ids selectIDs
// selects, each with its tombstone, and returns how many.
func removeSolutions(ctx context.Context, tx pgx.Tx, selectIDs string, args ...any) (int, error) {
	tag, err := tx.Exec(ctx, `WITH doomed AS (
			DELETE FROM solutions WHERE id IN (`+selectIDs+`)
			RETURNING workspace, id, verified, updated)
		INSERT INTO solution_tombstones (workspace, id)
		SELECT workspace, id FROM doomed ORDER BY verified, updated, id`, args...)
	return int(tag.RowsAffected()), err
}

// capSolutions removes, in tx (which holds the lock of solution writes),
// the solutions of workspace beyond maxPerWorkspace in retention order,
// at most limit of them (0: no limit), and returns how many.
func capSolutions(ctx context.Context, tx pgx.Tx, workspace string, maxPerWorkspace, limit int) (int, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	// The count is read under the lock, so no write slips in between.
	return removeSolutions(ctx, tx, `SELECT id FROM solutions WHERE workspace = $1
		ORDER BY verified, updated, id
		LIMIT least(greatest((SELECT count(*) FROM solutions WHERE workspace = $1) - $2, 0), $3)`,
		workspace, maxPerWorkspace, limit)
}

// MarkSolution sets or clears the Wrong mark of one solution, giving it a
// new seq so that the change feed carries it; see [store.Store].
func (p *Store) MarkSolution(ctx context.Context, workspace, id string, wrong *store.Wrong) (store.Solution, error) {
	if err := p.use(ctx, "mark solution"); err != nil {
		return store.Solution{}, err
	}
	wrong = backend.PrepareWrong(wrong)
	wrongAt, wrongNote := wrongArgs(wrong)
	var s store.Solution
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if err := lockSolutionWrites(ctx, tx); err != nil {
			return err
		}
		return scanSolution(tx.QueryRow(ctx, `UPDATE solutions SET wrong_at = $3, wrong_note = $4,
				seq = nextval('solution_seq')
			WHERE workspace = $1 AND id = $2 RETURNING `+solutionRead,
			stored.Text(workspace), stored.Text(id), wrongAt, wrongNote), &s)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Solution{}, fmt.Errorf("store: mark solution: %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Solution{}, fmt.Errorf("store: mark solution: %w", err)
	}
	return s, nil
}

// GetSolution returns one solution of the workspace; see [store.Store].
func (p *Store) GetSolution(ctx context.Context, workspace, id string) (store.Solution, error) {
	if err := p.use(ctx, "get solution"); err != nil {
		return store.Solution{}, err
	}
	var s store.Solution
	err := scanSolution(p.pool.QueryRow(ctx, `SELECT `+solutionRead+`
		FROM solutions WHERE workspace = $1 AND id = $2`, stored.Text(workspace), stored.Text(id)), &s)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Solution{}, fmt.Errorf("store: get solution: %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Solution{}, fmt.Errorf("store: get solution: %w", err)
	}
	return s, nil
}

// ListSolutions returns the workspace's solutions, most recently updated
// first (then by ID, descending); see [store.Store].
func (p *Store) ListSolutions(ctx context.Context, workspace string) ([]store.Solution, error) {
	if err := p.use(ctx, "list solutions"); err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, `SELECT `+solutionRead+`
		FROM solutions WHERE workspace = $1 ORDER BY updated DESC, id DESC`, stored.Text(workspace))
	if err != nil {
		return nil, fmt.Errorf("store: list solutions: %w", err)
	}
	out := []store.Solution{}
	for rows.Next() {
		var s store.Solution
		if err := scanSolution(rows, &s); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list solutions: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list solutions: %w", err)
	}
	return out, nil
}

// DeleteSolutions removes every solution of the workspace, leaving a
// tombstone for each, in one transaction; see [store.Store].
func (p *Store) DeleteSolutions(ctx context.Context, workspace string) (int, error) {
	if err := p.use(ctx, "delete solutions"); err != nil {
		return 0, err
	}
	var n int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if err := lockSolutionWrites(ctx, tx); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `WITH doomed AS (
				DELETE FROM solutions WHERE workspace = $1 RETURNING workspace, id)
			INSERT INTO solution_tombstones (workspace, id)
			SELECT workspace, id FROM doomed ORDER BY id`, stored.Text(workspace))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: delete solutions: %w", err)
	}
	return int(n), nil
}

// DeleteSolution removes one solution of the workspace and leaves a
// tombstone in the change feed; see [store.Store].
func (p *Store) DeleteSolution(ctx context.Context, workspace, id string) error {
	if err := p.use(ctx, "delete solution"); err != nil {
		return err
	}
	workspace, id = stored.Text(workspace), stored.Text(id)
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if err := lockSolutionWrites(ctx, tx); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM solutions WHERE workspace = $1 AND id = $2`, workspace, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		_, err = tx.Exec(ctx, `INSERT INTO solution_tombstones (workspace, id) VALUES ($1, $2)`, workspace, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete solution: %w", err)
	}
	return nil
}

// pruneBatch bounds the solutions one transaction of PruneSolutions
// removes, so that solution writes, which wait for its lock, never wait
// long, even on the first prune of a large table.
const pruneBatch = 5000

// PruneSolutions removes unverified solutions last updated before before,
// then the solutions of each workspace beyond maxPerWorkspace, in
// retention order, leaving a tombstone for each; see [store.Store]. Each
// transaction removes at most pruneBatch solutions, under the lock of
// solution writes (see Change feed); the age rule reads the partial index
// of migration 0003.
func (p *Store) PruneSolutions(ctx context.Context, before time.Time, maxPerWorkspace int) (int, error) {
	if err := p.use(ctx, "prune solutions"); err != nil {
		return 0, err
	}
	total := 0
	// removeBatch runs remove, which removes at most pruneBatch solutions,
	// in a transaction of its own under the lock of solution writes.
	removeBatch := func(remove func(tx pgx.Tx) (int, error)) (int, error) {
		var n int
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			if err := lockSolutionWrites(ctx, tx); err != nil {
				return err
			}
			var err error
			n, err = remove(tx)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("store: prune solutions: %w", err)
		}
		total += n
		return n, nil
	}
	if !before.IsZero() {
		for {
			n, err := removeBatch(func(tx pgx.Tx) (int, error) {
				return removeSolutions(ctx, tx, `SELECT id FROM solutions WHERE NOT verified AND updated < $1
					ORDER BY updated, id LIMIT $2`, stored.CeilMicro(before), pruneBatch)
			})
			if err != nil {
				return total, err
			}
			if n < pruneBatch {
				break
			}
		}
	}
	if maxPerWorkspace <= 0 {
		return total, nil
	}
	rows, err := p.pool.Query(ctx, `SELECT workspace FROM solutions
		GROUP BY workspace HAVING count(*) > $1 ORDER BY workspace`, maxPerWorkspace)
	if err != nil {
		return total, fmt.Errorf("store: prune solutions: %w", err)
	}
	over, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return total, fmt.Errorf("store: prune solutions: %w", err)
	}
	for _, ws := range over {
		for {
			n, err := removeBatch(func(tx pgx.Tx) (int, error) {
				return capSolutions(ctx, tx, ws, maxPerWorkspace, pruneBatch)
			})
			if err != nil {
				return total, err
			}
			if n < pruneBatch {
				break
			}
		}
	}
	return total, nil
}

// SolutionChanges returns live solutions and tombstones with seq > after, in
// seq order; see [store.Store]. A limit <= 0 means 1000; it is capped at 10000.
// Tombstones are kept.
func (p *Store) SolutionChanges(ctx context.Context, after int64, limit int) ([]store.SolutionChange, int64, error) {
	if err := p.use(ctx, "solution changes"); err != nil {
		return nil, after, err
	}
	rows, err := p.pool.Query(ctx, `
		SELECT `+solutionRead+`, seq, false FROM solutions WHERE seq > $1
		UNION ALL
		SELECT id, workspace, '', '', '', '', '', 0, '', false, ts, ts, NULL::timestamptz, '', '', NULL, seq, true
			FROM solution_tombstones WHERE seq > $1
		ORDER BY seq LIMIT $2`, after, backend.ChangeLimit(limit))
	if err != nil {
		return nil, after, fmt.Errorf("store: solution changes: %w", err)
	}
	out := []store.SolutionChange{}
	last := after
	for rows.Next() {
		var ch store.SolutionChange
		if err := scanSolution(rows, &ch.Solution, &ch.Seq, &ch.Deleted); err != nil {
			rows.Close()
			return nil, after, fmt.Errorf("store: solution changes: %w", err)
		}
		if ch.Deleted {
			ch.Solution = store.Solution{ID: ch.Solution.ID, Workspace: ch.Solution.Workspace}
		}
		out = append(out, ch)
		last = ch.Seq
	}
	if err := rows.Err(); err != nil {
		return nil, after, fmt.Errorf("store: solution changes: %w", err)
	}
	return out, last, nil
}
