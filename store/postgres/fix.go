package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

const fixColumns = `id, workspace, project, key, pattern, fingerprint, tool, failure, call, explanation,
	failures, session, created, updated, wrong_at, wrong_note`

func scanFix(row pgx.Row, f *store.Fix) error {
	var w wrongColumns
	if err := row.Scan(&f.ID, &f.Workspace, &f.Project, &f.Key, &f.Pattern, &f.Fingerprint, &f.Tool,
		&f.Failure, &f.Call, &f.Explanation, &f.Failures, &f.Session, &f.Created, &f.Updated, &w.at, &w.note); err != nil {
		return err
	}
	f.Created, f.Updated = f.Created.UTC(), f.Updated.UTC()
	f.Wrong = w.mark()
	return nil
}

// upsertFix inserts a fix or updates the one with its (workspace,
// project, key), and returns its id, its created time and whether it is
// new.
var upsertFix = `INSERT INTO fixes (` + fixColumns + `, key_id)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
	ON CONFLICT (workspace, project, key_id) DO UPDATE SET
		key = EXCLUDED.key, pattern = EXCLUDED.pattern, fingerprint = EXCLUDED.fingerprint,
		tool = EXCLUDED.tool, failure = EXCLUDED.failure, call = EXCLUDED.call,
		explanation = EXCLUDED.explanation, failures = EXCLUDED.failures, session = EXCLUDED.session,
		updated = EXCLUDED.updated, ` + keepWrongFix + `
	RETURNING id, created, xmax = 0, wrong_at, wrong_note`

// keepWrongFix keeps a fix's mark while its call is unchanged.
var keepWrongFix = keepWrong("fixes", "call")

// upsertFixArgs returns the arguments of upsertFix for rec, giving it a
// new ID and the time now.
func upsertFixArgs(rec *store.Fix, now time.Time) []any {
	rec.ID, rec.Created, rec.Updated = stored.NewID(now), now, now
	wrongAt, wrongNote := wrongArgs(rec.Wrong)
	return []any{rec.ID, rec.Workspace, rec.Project, rec.Key, rec.Pattern, rec.Fingerprint, rec.Tool, rec.Failure,
		rec.Call, rec.Explanation, rec.Failures, rec.Session, rec.Created, rec.Updated, wrongAt, wrongNote,
		stored.DedupeKey(rec.Key)}
}

// PutFix inserts or updates f by (Workspace, Project, Key) in one statement;
// see [store.Store]. A new fix gets a new ID and Created time (any ID or
// Created in f is ignored); Updated is always set to now. The triggers of
// migration 0005 move the tenant's incident version.
func (p *Store) PutFix(ctx context.Context, f *store.Fix) error {
	rec, err := backend.PrepareFix(f)
	if err != nil {
		return fmt.Errorf("store: put fix: %w", err)
	}
	if err := p.use(ctx, "put fix"); err != nil {
		return err
	}
	defer p.versionMoved(rec.Workspace, rec.Project)
	var added bool
	var w wrongColumns
	if err := p.pool.QueryRow(ctx, upsertFix, upsertFixArgs(&rec, stored.Time(p.now()))...).Scan(&rec.ID, &rec.Created, &added, &w.at, &w.note); err != nil {
		return fmt.Errorf("store: put fix: %w", err)
	}
	rec.Created, rec.Wrong = rec.Created.UTC(), w.mark()
	*f = rec
	return nil
}

// PutFixes stores each of fixes as PutFix does, then brings each tenant it
// added a fix to back within maxPerTenant, in one transaction; see
// [store.Store].
func (p *Store) PutFixes(ctx context.Context, fixes []*store.Fix, maxPerTenant int) (int, error) {
	recs := make([]store.Fix, len(fixes))
	for i, f := range fixes {
		rec, err := backend.PrepareFix(f)
		if err != nil {
			return 0, fmt.Errorf("store: put fix: %w", err)
		}
		recs[i] = rec
	}
	if err := p.use(ctx, "put fix"); err != nil {
		return 0, err
	}
	for i := range recs {
		defer p.versionMoved(recs[i].Workspace, recs[i].Project)
	}
	now := stored.Time(p.now())
	removed := 0
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		removed = 0
		var grown [][2]string // tenants that gained a fix
		for i := range recs {
			rec := &recs[i]
			var added bool
			var w wrongColumns
			if err := tx.QueryRow(ctx, upsertFix, upsertFixArgs(rec, now)...).Scan(&rec.ID, &rec.Created, &added, &w.at, &w.note); err != nil {
				return err
			}
			rec.Created, rec.Wrong = rec.Created.UTC(), w.mark()
			if tn := [2]string{rec.Workspace, rec.Project}; added && !slices.Contains(grown, tn) {
				grown = append(grown, tn)
			}
		}
		if maxPerTenant <= 0 {
			return nil
		}
		for _, tn := range grown {
			tag, err := tx.Exec(ctx, `DELETE FROM fixes WHERE id IN (
					SELECT id FROM fixes WHERE workspace = $1 AND project = $2 ORDER BY updated, id
					LIMIT greatest((SELECT count(*) FROM fixes WHERE workspace = $1 AND project = $2) - $3, 0))`,
				tn[0], tn[1], maxPerTenant)
			if err != nil {
				return err
			}
			removed += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: put fix: %w", err)
	}
	for i, f := range fixes {
		*f = recs[i]
	}
	return removed, nil
}

// ListFixes returns the tenant's fixes, most recently updated first, from
// the (workspace, project, updated, id) index; see [store.Store].
func (p *Store) ListFixes(ctx context.Context, q store.FixQuery) ([]store.Fix, error) {
	if q.Workspace == "" || q.Project == "" {
		return nil, fmt.Errorf("store: list fixes: %w: workspace and project are required", store.ErrInvalid)
	}
	if err := p.use(ctx, "list fixes"); err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, `SELECT `+fixColumns+` FROM fixes
		WHERE workspace = $1 AND project = $2 ORDER BY updated DESC, id DESC LIMIT $3`,
		stored.Text(q.Workspace), stored.Text(q.Project), backend.FixLimit(q.Limit))
	if err != nil {
		return nil, fmt.Errorf("store: list fixes: %w", err)
	}
	out := []store.Fix{}
	for rows.Next() {
		var f store.Fix
		if err := scanFix(rows, &f); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list fixes: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list fixes: %w", err)
	}
	return out, nil
}

// DeleteFix removes one fix of the tenant; see [store.Store].
func (p *Store) DeleteFix(ctx context.Context, workspace, project, id string) error {
	if err := p.use(ctx, "delete fix"); err != nil {
		return err
	}
	defer p.versionMoved(stored.Text(workspace), stored.Text(project))
	tag, err := p.pool.Exec(ctx, `DELETE FROM fixes WHERE workspace = $1 AND project = $2 AND id = $3`,
		stored.Text(workspace), stored.Text(project), stored.Text(id))
	if err != nil {
		return fmt.Errorf("store: delete fix: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: delete fix: %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// MarkFix sets or clears the Wrong mark of one fix of the tenant; the
// update trigger of migration 0005 moves the tenant's incident version.
// See [store.Store].
func (p *Store) MarkFix(ctx context.Context, workspace, project, id string, wrong *store.Wrong) (store.Fix, error) {
	if err := p.use(ctx, "mark fix"); err != nil {
		return store.Fix{}, err
	}
	workspace, project = stored.Text(workspace), stored.Text(project)
	defer p.versionMoved(workspace, project)
	wrongAt, wrongNote := wrongArgs(backend.PrepareWrong(wrong))
	var f store.Fix
	err := scanFix(p.pool.QueryRow(ctx, `UPDATE fixes SET wrong_at = $4, wrong_note = $5
		WHERE workspace = $1 AND project = $2 AND id = $3 RETURNING `+fixColumns,
		workspace, project, stored.Text(id), wrongAt, wrongNote), &f)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Fix{}, fmt.Errorf("store: mark fix: %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Fix{}, fmt.Errorf("store: mark fix: %w", err)
	}
	return f, nil
}

// DeleteFixes removes every fix of the tenant; see [store.Store].
func (p *Store) DeleteFixes(ctx context.Context, workspace, project string) (int, error) {
	if workspace == "" || project == "" {
		return 0, fmt.Errorf("store: delete fixes: %w: workspace and project are required", store.ErrInvalid)
	}
	if err := p.use(ctx, "delete fixes"); err != nil {
		return 0, err
	}
	defer p.versionMoved(stored.Text(workspace), stored.Text(project))
	tag, err := p.pool.Exec(ctx, `DELETE FROM fixes WHERE workspace = $1 AND project = $2`,
		stored.Text(workspace), stored.Text(project))
	if err != nil {
		return 0, fmt.Errorf("store: delete fixes: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// PruneFixes removes fixes last updated before before, then the least
// recently updated fixes of each tenant beyond maxPerTenant, in one
// transaction; see [store.Store]. A zero before applies no age rule.
func (p *Store) PruneFixes(ctx context.Context, before time.Time, maxPerTenant int) (int, error) {
	if err := p.use(ctx, "prune fixes"); err != nil {
		return 0, err
	}
	defer p.versions.forgetAll()
	var n int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if !before.IsZero() {
			tag, err := tx.Exec(ctx, `DELETE FROM fixes WHERE updated < $1`, stored.CeilMicro(before))
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
		}
		if maxPerTenant > 0 {
			tag, err := tx.Exec(ctx, `DELETE FROM fixes AS f USING (
					SELECT id FROM (
						SELECT id, row_number() OVER (PARTITION BY workspace, project ORDER BY updated DESC, id DESC) AS rn
						FROM fixes) ranked
					WHERE rn > $1) AS doomed
				WHERE f.id = doomed.id`, maxPerTenant)
			if err != nil {
				return err
			}
			n += tag.RowsAffected()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune fixes: %w", err)
	}
	return int(n), nil
}
