package postgres

import (
	"context"
	"fmt"

	"github.com/scarproxy/scarproxy/store"
)

// listTenants finds the tenants with incidents or fixes through
// incident_versions (one row per tenant that ever held one), each probed
// on its (workspace, project, ...) index; usage records and solutions are
// grouped on theirs. Names order byte by byte, as the bbolt store's do.
const listTenants = `WITH refs AS (
	SELECT v.workspace COLLATE "C" AS workspace, v.project COLLATE "C" AS project, greatest(
		(SELECT max(ts) FROM incidents i WHERE i.workspace = v.workspace AND i.project = v.project),
		(SELECT max(updated) FROM fixes f WHERE f.workspace = v.workspace AND f.project = v.project)) AS latest
	FROM incident_versions v
	UNION ALL SELECT workspace COLLATE "C", project COLLATE "C", max(hour) FROM usage GROUP BY 1, 2
	UNION ALL SELECT workspace COLLATE "C", '' COLLATE "C", max(updated) FROM solutions GROUP BY 1
)
SELECT workspace, project, max(latest) FROM refs WHERE latest IS NOT NULL
GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2 LIMIT $1`

// ListTenants returns the tenants that hold records; see [store.Store].
func (p *Store) ListTenants(ctx context.Context, limit int) ([]store.TenantRef, error) {
	if err := p.use(ctx, "list tenants"); err != nil {
		return nil, err
	}
	rows, err := p.pool.Query(ctx, listTenants, store.TenantLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: list tenants: %w", err)
	}
	out := []store.TenantRef{}
	for rows.Next() {
		var r store.TenantRef
		if err := rows.Scan(&r.Workspace, &r.Project, &r.Latest); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list tenants: %w", err)
		}
		r.Latest = r.Latest.UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list tenants: %w", err)
	}
	return out, nil
}
