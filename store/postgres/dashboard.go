package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// IncidentGroups counts the tenant's incidents in groups; see [store.Store].
// One aggregate over the tenant's (workspace, project, ts) index range, then
// one primary-key read of each group's sample message.
func (p *Store) IncidentGroups(ctx context.Context, q store.GroupQuery) ([]store.IncidentGroup, error) {
	if q.Workspace == "" || q.Project == "" {
		return nil, fmt.Errorf("store: incident groups: %w: workspace and project are required", store.ErrInvalid)
	}
	if err := p.use(ctx, "incident groups"); err != nil {
		return nil, err
	}
	q.Workspace, q.Project = stored.Text(q.Workspace), stored.Text(q.Project)
	var sb strings.Builder
	sb.WriteString(`SELECT floor(extract(epoch FROM ts) / 3600)::bigint * 3600 AS hour, type, status_code, code,
		provider, fingerprint, count(*), max(id)
		FROM incidents WHERE workspace = $1 AND project = $2`)
	args := []any{q.Workspace, q.Project}
	if !q.Since.IsZero() {
		args = append(args, stored.CeilMicro(q.Since))
		fmt.Fprintf(&sb, " AND ts >= $%d", len(args))
	}
	if !q.Until.IsZero() {
		args = append(args, stored.CeilMicro(q.Until))
		fmt.Fprintf(&sb, " AND ts < $%d", len(args))
	}
	sb.WriteString(" GROUP BY 1, 2, 3, 4, 5, 6")
	rows, err := p.pool.Query(ctx, sb.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("store: incident groups: %w", err)
	}
	out := []store.IncidentGroup{}
	for rows.Next() {
		var g store.IncidentGroup
		var hour int64
		if err := rows.Scan(&hour, &g.Type, &g.StatusCode, &g.Code, &g.Provider, &g.Fingerprint, &g.Count, &g.SampleID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: incident groups: %w", err)
		}
		g.Hour = time.Unix(hour, 0).UTC()
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: incident groups: %w", err)
	}
	if len(out) == 0 {
		return out, nil
	}
	ids := make([]string, len(out))
	for i := range out {
		ids[i] = out[i].SampleID
	}
	// By primary key alone: with the tenant's columns in the condition the
	// planner may walk the tenant's index and test every row against the
	// ids (seconds on a large tenant whose statistics are stale). The ids
	// come from this tenant's rows; the tenant is checked on each.
	rows, err = p.pool.Query(ctx, `SELECT id, workspace, project, message FROM incidents WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: incident groups: samples: %w", err)
	}
	msgs := make(map[string]string, len(ids))
	for rows.Next() {
		var id, ws, proj, msg string
		if err := rows.Scan(&id, &ws, &proj, &msg); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: incident groups: samples: %w", err)
		}
		if ws == q.Workspace && proj == q.Project {
			msgs[id] = msg
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: incident groups: samples: %w", err)
	}
	for i := range out {
		out[i].Sample = msgs[out[i].SampleID]
	}
	backend.SortGroups(out)
	return out, nil
}

// SearchIncidents returns a page of the tenant's incidents chosen by f,
// newest first; see [store.Store]. The cursor is the last incident's time in
// Unix microseconds and its seq, "<micros>.<seq>".
func (p *Store) SearchIncidents(ctx context.Context, f store.IncidentFilter) (store.IncidentPage, error) {
	if f.Workspace == "" || f.Project == "" {
		return store.IncidentPage{}, fmt.Errorf("store: search incidents: %w: workspace and project are required", store.ErrInvalid)
	}
	backend.CleanFilter(&f)
	var curTS time.Time
	var curSeq int64
	if f.Cursor != "" {
		a, b, ok := strings.Cut(f.Cursor, ".")
		us, err1 := strconv.ParseInt(a, 10, 64)
		seq, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return store.IncidentPage{}, fmt.Errorf("store: search incidents: %w: bad cursor", store.ErrInvalid)
		}
		curTS, curSeq = time.UnixMicro(us).UTC(), seq
	}
	if err := p.use(ctx, "search incidents"); err != nil {
		return store.IncidentPage{}, err
	}
	limit := backend.IncidentLimit(f.Limit)
	var sb strings.Builder
	sb.WriteString(`SELECT id, ts, seq, session, agent, provider, model, type, status_code, message, fingerprint, code
		FROM incidents WHERE workspace = $1 AND project = $2`)
	args := []any{f.Workspace, f.Project}
	for _, c := range []struct{ col, v string }{{"session", f.Session}, {"type", f.Type}, {"provider", f.Provider}, {"model", f.Model}} {
		if c.v != "" {
			args = append(args, c.v)
			fmt.Fprintf(&sb, " AND %s = $%d", c.col, len(args))
		}
	}
	if len(f.Fingerprints) > 0 {
		args = append(args, f.Fingerprints)
		fmt.Fprintf(&sb, " AND fingerprint = ANY($%d)", len(args))
	}
	if !f.Since.IsZero() {
		args = append(args, stored.CeilMicro(f.Since))
		fmt.Fprintf(&sb, " AND ts >= $%d", len(args))
	}
	if !f.Until.IsZero() {
		args = append(args, stored.CeilMicro(f.Until))
		fmt.Fprintf(&sb, " AND ts < $%d", len(args))
	}
	if f.Cursor != "" {
		args = append(args, curTS, curSeq)
		fmt.Fprintf(&sb, " AND (ts, seq) < ($%d, $%d)", len(args)-1, len(args))
	}
	args = append(args, limit+1)
	fmt.Fprintf(&sb, " ORDER BY ts DESC, seq DESC LIMIT $%d", len(args))
	rows, err := p.pool.Query(ctx, sb.String(), args...)
	if err != nil {
		return store.IncidentPage{}, fmt.Errorf("store: search incidents: %w", err)
	}
	page := store.IncidentPage{Incidents: []store.Incident{}}
	var lastTS time.Time
	var lastSeq int64
	for rows.Next() {
		inc := store.Incident{Workspace: f.Workspace, Project: f.Project}
		var seq int64
		if err := rows.Scan(&inc.ID, &inc.Time, &seq, &inc.Session, &inc.Agent, &inc.Provider, &inc.Model,
			&inc.Type, &inc.StatusCode, &inc.Message, &inc.Fingerprint, &inc.Code); err != nil {
			rows.Close()
			return store.IncidentPage{}, fmt.Errorf("store: search incidents: %w", err)
		}
		if len(page.Incidents) == limit {
			page.Next = strconv.FormatInt(lastTS.UnixMicro(), 10) + "." + strconv.FormatInt(lastSeq, 10)
			break
		}
		inc.Time = inc.Time.UTC()
		page.Incidents = append(page.Incidents, inc)
		lastTS, lastSeq = inc.Time, seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return store.IncidentPage{}, fmt.Errorf("store: search incidents: %w", err)
	}
	return page, nil
}
