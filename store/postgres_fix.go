package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

const fixColumns = `id, workspace, project, key, pattern, fingerprint, tool, failure, call, explanation,
	failures, session, created, updated`

func scanFix(row pgx.Row, f *Fix) error {
	if err := row.Scan(&f.ID, &f.Workspace, &f.Project, &f.Key, &f.Pattern, &f.Fingerprint, &f.Tool,
		&f.Failure, &f.Call, &f.Explanation, &f.Failures, &f.Session, &f.Created, &f.Updated); err != nil {
		return err
	}
	f.Created, f.Updated = f.Created.UTC(), f.Updated.UTC()
	return nil
}

// PutFix inserts or updates f by (Workspace, Project, Key) in one
// statement; see [Store]. A new fix gets a new ID and Created time (any ID
// or Created in f is ignored); Updated is always set to now. The triggers
// of migration 0005 move the tenant's incident version.
func (p *Postgres) PutFix(ctx context.Context, f *Fix) error {
	if err := validFix(f); err != nil {
		return fmt.Errorf("store: put fix: %w", err)
	}
	if err := p.use(ctx, "put fix"); err != nil {
		return err
	}
	rec := *f
	cleanFix(&rec)
	defer p.versionMoved(rec.Workspace, rec.Project)
	now := normTime(p.now())
	rec.ID, rec.Created, rec.Updated = newID(now), now, now
	row := p.pool.QueryRow(ctx, `INSERT INTO fixes (`+fixColumns+`, key_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (workspace, project, key_id) DO UPDATE SET
			key = EXCLUDED.key, pattern = EXCLUDED.pattern, fingerprint = EXCLUDED.fingerprint,
			tool = EXCLUDED.tool, failure = EXCLUDED.failure, call = EXCLUDED.call,
			explanation = EXCLUDED.explanation, failures = EXCLUDED.failures, session = EXCLUDED.session,
			updated = EXCLUDED.updated
		RETURNING id, created`,
		rec.ID, rec.Workspace, rec.Project, rec.Key, rec.Pattern, rec.Fingerprint, rec.Tool, rec.Failure,
		rec.Call, rec.Explanation, rec.Failures, rec.Session, rec.Created, rec.Updated, dedupeKey(rec.Key))
	if err := row.Scan(&rec.ID, &rec.Created); err != nil {
		return fmt.Errorf("store: put fix: %w", err)
	}
	rec.Created = rec.Created.UTC()
	*f = rec
	return nil
}

// ListFixes returns the tenant's fixes, most recently updated first, from
// the (workspace, project, updated, id) index; see [Store].
func (p *Postgres) ListFixes(ctx context.Context, q FixQuery) ([]Fix, error) {
	if q.Workspace == "" || q.Project == "" {
		return nil, fmt.Errorf("store: list fixes: %w: workspace and project are required", ErrInvalid)
	}
	if err := p.use(ctx, "list fixes"); err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, `SELECT `+fixColumns+` FROM fixes
		WHERE workspace = $1 AND project = $2 ORDER BY updated DESC, id DESC LIMIT $3`,
		cleanText(q.Workspace), cleanText(q.Project), fixLimit(q.Limit))
	if err != nil {
		return nil, fmt.Errorf("store: list fixes: %w", err)
	}
	out := []Fix{}
	for rows.Next() {
		var f Fix
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

// DeleteFix removes one fix of the tenant; see [Store].
func (p *Postgres) DeleteFix(ctx context.Context, workspace, project, id string) error {
	if err := p.use(ctx, "delete fix"); err != nil {
		return err
	}
	defer p.versionMoved(cleanText(workspace), cleanText(project))
	tag, err := p.pool.Exec(ctx, `DELETE FROM fixes WHERE workspace = $1 AND project = $2 AND id = $3`,
		cleanText(workspace), cleanText(project), cleanText(id))
	if err != nil {
		return fmt.Errorf("store: delete fix: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: delete fix: %s: %w", id, ErrNotFound)
	}
	return nil
}

// DeleteFixes removes every fix of the tenant; see [Store].
func (p *Postgres) DeleteFixes(ctx context.Context, workspace, project string) (int, error) {
	if workspace == "" || project == "" {
		return 0, fmt.Errorf("store: delete fixes: %w: workspace and project are required", ErrInvalid)
	}
	if err := p.use(ctx, "delete fixes"); err != nil {
		return 0, err
	}
	defer p.versionMoved(cleanText(workspace), cleanText(project))
	tag, err := p.pool.Exec(ctx, `DELETE FROM fixes WHERE workspace = $1 AND project = $2`,
		cleanText(workspace), cleanText(project))
	if err != nil {
		return 0, fmt.Errorf("store: delete fixes: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// PruneFixes removes fixes last updated before before, then the least
// recently updated fixes of each tenant beyond maxPerTenant, in one
// transaction; see [Store]. A zero before applies no age rule.
func (p *Postgres) PruneFixes(ctx context.Context, before time.Time, maxPerTenant int) (int, error) {
	if err := p.use(ctx, "prune fixes"); err != nil {
		return 0, err
	}
	defer p.versions.forgetAll()
	var n int64
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if !before.IsZero() {
			tag, err := tx.Exec(ctx, `DELETE FROM fixes WHERE updated < $1`, ceilMicro(before))
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
