package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	bolt "go.etcd.io/bbolt"
)

// IncidentWrite is one incident of a batch given to AddIncidents.
type IncidentWrite struct {
	Incident *Incident
	// DedupeKey, when set, stores the incident only when the key is new
	// for its tenant, as AddIncidentOnce does.
	DedupeKey string
	// Stored is set by AddIncidents: the incident was stored (false: its
	// dedupe key was known).
	Stored bool
}

// VersionStep says that one AddIncidents call moved a tenant's incident
// version from From to To, and that nothing else changed the tenant's
// incidents between the two: whoever holds what it derived from the
// tenant's incidents at From may add the batch's stored incidents of the
// tenant to it and hold the result at To, instead of reading them again.
type VersionStep struct {
	Workspace, Project string
	From, To           int64
}

// maxBatch caps the incidents of one AddIncidents call.
const maxBatch = 1000

// PrepareIncident validates inc and puts it in the form a store keeps it:
// its text cleaned, its Time set (now when zero) and normalized, its ID
// assigned when empty. The Add methods do the same; a caller that shows an
// incident before the store has it (a proxy's pending failures) prepares
// it first, so that what it shows is what will be read back. It returns
// ErrInvalid as AddIncident does.
func PrepareIncident(inc *Incident, now time.Time) error {
	if err := validIncident(inc); err != nil {
		return err
	}
	cleanIncident(inc)
	if inc.Time.IsZero() {
		inc.Time = now
	}
	inc.Time = normTime(inc.Time)
	if inc.ID == "" {
		inc.ID = newID(inc.Time)
	}
	return nil
}

// prepareBatch validates and prepares every incident of batch.
func prepareBatch(batch []IncidentWrite, now func() time.Time) error {
	if len(batch) > maxBatch {
		return fmt.Errorf("%w: %d incidents in one batch, at most %d", ErrInvalid, len(batch), maxBatch)
	}
	for i := range batch {
		if batch[i].Incident == nil {
			return fmt.Errorf("%w: batch entry %d has no incident", ErrInvalid, i)
		}
		batch[i].Stored = false
		if err := PrepareIncident(batch[i].Incident, now()); err != nil {
			return fmt.Errorf("batch entry %d: %w", i, err)
		}
	}
	return nil
}

// batchTenants returns the tenants of batch, in one order (the lock order
// of concurrent writers).
func batchTenants(batch []IncidentWrite) [][2]string {
	var ts [][2]string
	for _, w := range batch {
		ts = append(ts, [2]string{w.Incident.Workspace, w.Incident.Project})
	}
	slices.SortFunc(ts, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	return slices.Compact(ts)
}

// AddIncidents stores a batch of incidents in one transaction (one fsync);
// see [Store]. Incidents of the same microsecond are stored in batch order.
func (b *Bolt) AddIncidents(ctx context.Context, batch []IncidentWrite) ([]VersionStep, error) {
	if err := prepareBatch(batch, b.now); err != nil {
		return nil, fmt.Errorf("store: add incidents: %w", err)
	}
	if len(batch) == 0 {
		return nil, nil
	}
	err := b.update(ctx, "add incidents", func(tx *bolt.Tx) error {
		for i := range batch {
			w := &batch[i]
			w.Stored = false // a retried transaction starts again
			rec := w.Incident
			t, err := createTenant(tx, rec.Workspace, rec.Project)
			if err != nil {
				return err
			}
			if w.DedupeKey != "" {
				dk := []byte(dedupeKey(cleanText(w.DedupeKey)))
				if t.d.Get(dk) != nil {
					continue
				}
				tk := timeKey(rec.Time)
				if err := t.d.Put(dk, tk); err != nil {
					return err
				}
				if err := t.dt.Put(append(tk, dk...), nil); err != nil {
					return err
				}
			}
			if err := t.put(rec); err != nil {
				return err
			}
			w.Stored = true
		}
		return nil
	})
	if err != nil {
		for i := range batch {
			batch[i].Stored = false
		}
		return nil, err
	}
	var steps []VersionStep
	for _, tn := range batchTenants(batch) {
		if !storedIn(batch, tn) {
			continue
		}
		from, to := b.step(string(tenantKey(tn[0], tn[1])))
		steps = append(steps, VersionStep{Workspace: tn[0], Project: tn[1], From: from, To: to})
	}
	return steps, nil
}

// storedIn reports whether batch stored an incident of tenant tn.
func storedIn(batch []IncidentWrite, tn [2]string) bool {
	for _, w := range batch {
		if w.Stored && w.Incident.Workspace == tn[0] && w.Incident.Project == tn[1] {
			return true
		}
	}
	return false
}

// step bumps the tenant's version, as bump does, and returns the version
// before and after. Writes bump after their commit: a version read before
// a write's bump was read before that write's step, so the step From the
// version a reader read covers only this write.
func (b *Bolt) step(tenant string) (from, to int64) {
	b.verMu.Lock()
	defer b.verMu.Unlock()
	from = b.epoch + b.versions[tenant]
	b.verSeq++
	b.versions[tenant] = b.verSeq
	return from, b.epoch + b.verSeq
}

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
func incidentColumns(ws []IncidentWrite) []any {
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
// round trip; see [Store]. Each tenant's version row is locked from the
// start of the transaction, so the steps it returns cover this batch
// alone. Incidents of the same microsecond are stored in batch order.
func (p *Postgres) AddIncidents(ctx context.Context, batch []IncidentWrite) ([]VersionStep, error) {
	if err := prepareBatch(batch, p.now); err != nil {
		return nil, fmt.Errorf("store: add incidents: %w", err)
	}
	if len(batch) == 0 {
		return nil, nil
	}
	if err := p.use(ctx, "add incidents"); err != nil {
		return nil, err
	}
	tenants := batchTenants(batch)
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
				args := append(incidentArgs(w.Incident), dedupeKey(cleanText(w.DedupeKey)))
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
	var steps []VersionStep
	for i, tn := range tenants {
		p.versions.saw(versionKey(tn[0], tn[1]), to[i], began)
		if from[i] != to[i] {
			steps = append(steps, VersionStep{Workspace: tn[0], Project: tn[1], From: from[i], To: to[i]})
		}
	}
	return steps, nil
}
