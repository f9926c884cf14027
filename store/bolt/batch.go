package bolt

import (
	"context"
	"fmt"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
	"go.etcd.io/bbolt"
)

// AddIncidents stores a batch of incidents in one transaction (one fsync); see
// [store.Store]. Incidents of the same microsecond are stored in batch order.
func (b *Store) AddIncidents(ctx context.Context, batch []store.IncidentWrite) ([]store.VersionStep, error) {
	if err := backend.PrepareBatch(batch, b.now); err != nil {
		return nil, fmt.Errorf("store: add incidents: %w", err)
	}
	if len(batch) == 0 {
		return nil, nil
	}
	for _, w := range batch {
		if !sessionKeyFits(w.Incident.Session) {
			return nil, fmt.Errorf("store: add incidents: %w: session of %d bytes", store.ErrInvalid, len(w.Incident.Session))
		}
	}
	// The batch's session entries wait in memory (behind.go), unless it
	// is the batch that writes what waits.
	now := b.now()
	flush := b.behind.due(now)
	var upto uint64
	err := b.update(ctx, "add incidents", func(tx *bbolt.Tx) error {
		if flush {
			var err error
			if upto, err = b.writeBehind(tx); err != nil {
				return err
			}
		}
		for i := range batch {
			w := &batch[i]
			w.Stored = false // a retried transaction starts again
			rec := w.Incident
			t, err := createTenant(tx, rec.Workspace, rec.Project)
			if err != nil {
				return err
			}
			if w.DedupeKey != "" {
				dk := []byte(stored.DedupeKey(stored.Text(w.DedupeKey)))
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
			k, err := t.put(rec)
			if err != nil {
				return err
			}
			switch {
			case rec.Session == "":
			case flush:
				if err := t.index(rec.Session, k); err != nil {
					return err
				}
			default:
				if err := t.noteBehind(k); err != nil {
					return err
				}
				b.behind.add(tenantKey(rec.Workspace, rec.Project), rec.Session, k, now)
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
	if flush {
		b.behind.drop(upto, b.now())
	}
	var steps []store.VersionStep
	for _, tn := range backend.BatchTenants(batch) {
		if !storedIn(batch, tn) {
			continue
		}
		from, to := b.step(string(tenantKey(tn[0], tn[1])))
		steps = append(steps, store.VersionStep{Workspace: tn[0], Project: tn[1], From: from, To: to})
	}
	return steps, nil
}

// storedIn reports whether batch stored an incident of tenant tn.
func storedIn(batch []store.IncidentWrite, tn [2]string) bool {
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
func (b *Store) step(tenant string) (from, to int64) {
	b.verMu.Lock()
	defer b.verMu.Unlock()
	from = b.epoch + b.versions[tenant]
	b.verSeq++
	b.versions[tenant] = b.verSeq
	return from, b.epoch + b.verSeq
}
