package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// insertDeduped stores an incident only when its dedupe key is new: one
// statement, so that a batch is sent in one round trip.
const insertDeduped = `WITH d AS (
		INSERT INTO incident_dedupe (workspace, project, key, ts) VALUES ($2, $3, $14, $12)
		ON CONFLICT DO NOTHING RETURNING 1)
	INSERT INTO incidents
		(id, workspace, project, session, agent, provider, model, type, status_code, message, fingerprint, ts, code)
	SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 WHERE EXISTS (SELECT 1 FROM d)`

// insertIncidents inserts several incidents in one statement, in the
// order of its arrays (see incidentColumns).
const insertIncidents = `INSERT INTO incidents
	(id, workspace, project, session, agent, provider, model, type, status_code, message, fingerprint, ts, code)
	SELECT id, workspace, project, session, agent, provider, model, type, status_code, message, fingerprint, ts, code
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::integer[], $10::text[], $11::text[], $12::timestamptz[], $13::text[])
		WITH ORDINALITY AS r(id, workspace, project, session, agent, provider, model, type, status_code, message, fingerprint, ts, code, n)
	ORDER BY n`

// incidentColumns returns the arguments of insertIncidents for ws: one
// array per column.
func incidentColumns(ws []store.IncidentWrite) []any {
	n := len(ws)
	ids, wss, projects, sessions, agents := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	providers, models, types, messages, fps, codes := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	statuses, times := make([]int32, n), make([]time.Time, n)
	for i := range ws {
		r := ws[i].Incident
		ids[i], wss[i], projects[i], sessions[i], agents[i] = r.ID, r.Workspace, r.Project, r.Session, r.Agent
		providers[i], models[i], types[i], messages[i], fps[i], codes[i] = r.Provider, r.Model, r.Type, r.Message, r.Fingerprint, r.Code
		statuses[i], times[i] = int32(r.StatusCode), r.Time
	}
	return []any{ids, wss, projects, sessions, agents, providers, models, types, statuses, messages, fps, times, codes}
}

// AddIncidents stores a batch of incidents in one transaction, sent in one
// round trip; see [store.Store]. Each tenant's version row is locked from the
// start of the transaction, so the steps it returns cover this batch
// alone. Incidents of the same microsecond are stored in batch order.
func (p *Store) AddIncidents(ctx context.Context, batch []store.IncidentWrite) ([]store.VersionStep, error) {
	if err := backend.PrepareBatch(batch, p.now); err != nil {
		return nil, fmt.Errorf("store: add incidents: %w", err)
	}
	if len(batch) == 0 {
		return nil, nil
	}
	if err := p.use(ctx, "add incidents"); err != nil {
		return nil, err
	}
	tenants := backend.BatchTenants(batch)
	from := make([]int64, len(tenants))
	to := make([]int64, len(tenants))
	// Every change committed before began is in from, so in to: the
	// version row is locked from then until the commit.
	began := p.now()
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		var q pgx.Batch
		for i, tn := range tenants {
			// The row must exist to be locked: a first writer of a tenant
			// would otherwise insert it under another's feet.
			q.Queue(`INSERT INTO incident_versions (workspace, project, version) VALUES ($1, $2, 0)
				ON CONFLICT DO NOTHING`, tn[0], tn[1])
			q.Queue(`SELECT version FROM incident_versions WHERE workspace = $1 AND project = $2 FOR UPDATE`,
				tn[0], tn[1]).QueryRow(func(row pgx.Row) error { return row.Scan(&from[i]) })
		}
		for i := 0; i < len(batch); {
			w := &batch[i]
			w.Stored = false
			if w.DedupeKey != "" {
				args := append(incidentArgs(w.Incident), stored.DedupeKey(stored.Text(w.DedupeKey)))
				q.Queue(insertDeduped, args...).Exec(func(tag pgconn.CommandTag) error {
					w.Stored = tag.RowsAffected() == 1
					return nil
				})
				i++
				continue
			}
			// A run of incidents without dedupe keys is one statement (one
			// trigger run moving the version), its rows in batch order.
			j := i + 1
			for j < len(batch) && batch[j].DedupeKey == "" {
				j++
			}
			run := batch[i:j]
			q.Queue(insertIncidents, incidentColumns(run)...).Exec(func(tag pgconn.CommandTag) error {
				if tag.RowsAffected() != int64(len(run)) {
					return fmt.Errorf("%d of %d incidents inserted", tag.RowsAffected(), len(run))
				}
				for k := range run {
					run[k].Stored = true
				}
				return nil
			})
			i = j
		}
		for i, tn := range tenants {
			q.Queue(`SELECT version FROM incident_versions WHERE workspace = $1 AND project = $2`,
				tn[0], tn[1]).QueryRow(func(row pgx.Row) error { return row.Scan(&to[i]) })
		}
		return tx.SendBatch(ctx, &q).Close()
	})
	if err != nil {
		for i := range batch {
			batch[i].Stored = false
		}
		for _, tn := range tenants {
			p.versionMoved(tn[0], tn[1])
		}
		return nil, fmt.Errorf("store: add incidents: %w", err)
	}
	var steps []store.VersionStep
	for i, tn := range tenants {
		p.versions.saw(versionKey(tn[0], tn[1]), to[i], began)
		if from[i] != to[i] {
			steps = append(steps, store.VersionStep{Workspace: tn[0], Project: tn[1], From: from[i], To: to[i]})
		}
	}
	return steps, nil
}
