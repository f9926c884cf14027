package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
	"go.etcd.io/bbolt"
)

// Buckets of a tenant's fixes (see the layout at the top of bolt.go).
var (
	bktFixByID  = []byte("id")
	bktFixByKey = []byte("key")
	bktFixByUpd = []byte("u")
)

// fixTenant holds the buckets of one tenant's fixes.
type fixTenant struct {
	b, ids, keys, upd *bbolt.Bucket
}

// openFixTenant returns the tenant's fix buckets, or nil when it has none.
func openFixTenant(tx *bbolt.Tx, workspace, project string) *fixTenant {
	b := tx.Bucket(bktFixes).Bucket(tenantKey(workspace, project))
	if b == nil {
		return nil
	}
	return fixTenantOf(b)
}

func fixTenantOf(b *bbolt.Bucket) *fixTenant {
	return &fixTenant{b: b, ids: b.Bucket(bktFixByID), keys: b.Bucket(bktFixByKey), upd: b.Bucket(bktFixByUpd)}
}

// createFixTenant returns the tenant's fix buckets, creating them when
// missing.
func createFixTenant(tx *bbolt.Tx, workspace, project string) (*fixTenant, error) {
	b, err := tx.Bucket(bktFixes).CreateBucketIfNotExists(tenantKey(workspace, project))
	if err != nil {
		return nil, err
	}
	for _, name := range [][]byte{bktFixByID, bktFixByKey, bktFixByUpd} {
		if _, err := b.CreateBucketIfNotExists(name); err != nil {
			return nil, err
		}
	}
	return openFixTenant(tx, workspace, project), nil
}

func (ft *fixTenant) count() uint64 {
	v := ft.b.Get(keyCount)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func (ft *fixTenant) setCount(n uint64) error {
	return ft.b.Put(keyCount, binary.BigEndian.AppendUint64(nil, n))
}

// get decodes the fix stored under id, or returns nil when there is none.
func (ft *fixTenant) get(id []byte) (*store.Fix, error) {
	v := ft.ids.Get(id)
	if v == nil {
		return nil, nil
	}
	var f store.Fix
	if err := json.Unmarshal(v, &f); err != nil {
		return nil, fmt.Errorf("fix %s: %w: %w", id, errCorrupt, err)
	}
	return &f, nil
}

// remove deletes f from the tenant.
func (ft *fixTenant) remove(f *store.Fix) error {
	if err := ft.keys.Delete([]byte(stored.DedupeKey(f.Key))); err != nil {
		return err
	}
	if err := ft.upd.Delete(fixOrderKey(f)); err != nil {
		return err
	}
	if n := ft.count(); n > 0 {
		if err := ft.setCount(n - 1); err != nil {
			return err
		}
	}
	return ft.ids.Delete([]byte(f.ID))
}

// fixOrderKey is f's key in its tenant's u bucket.
func fixOrderKey(f *store.Fix) []byte {
	return append(timeKey(f.Updated), f.ID...)
}

// PutFix inserts or updates f by (Workspace, Project, Key); see [store.Store].
// A new fix gets a new ID and Created time (any ID or Created in f is ignored);
// Updated is always set to now.
func (b *Store) PutFix(ctx context.Context, f *store.Fix) error {
	_, err := b.PutFixes(ctx, []*store.Fix{f}, 0)
	return err
}

// PutFixes stores each of fixes as PutFix does, then brings each tenant it
// added a fix to back within maxPerTenant, in one transaction; see
// [store.Store].
func (b *Store) PutFixes(ctx context.Context, fixes []*store.Fix, maxPerTenant int) (int, error) {
	recs := make([]store.Fix, len(fixes))
	for i, f := range fixes {
		rec, err := backend.PrepareFix(f)
		if err != nil {
			return 0, fmt.Errorf("store: put fix: %w", err)
		}
		recs[i] = rec
	}
	now := stored.Time(b.now())
	removed := 0
	err := b.update(ctx, "put fix", func(tx *bbolt.Tx) error {
		removed = 0
		var grown []*store.Fix // one fix of each tenant that gained one
		for i := range recs {
			recs[i].Updated = now
			added, err := putFix(tx, &recs[i], now)
			if err != nil {
				return err
			}
			if added && !slices.ContainsFunc(grown, func(g *store.Fix) bool {
				return g.Workspace == recs[i].Workspace && g.Project == recs[i].Project
			}) {
				grown = append(grown, &recs[i])
			}
		}
		for _, g := range grown {
			n, err := openFixTenant(tx, g.Workspace, g.Project).prune(nil, maxPerTenant)
			if err != nil {
				return err
			}
			removed += n
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i, f := range fixes {
		*f = recs[i]
		b.bump(string(tenantKey(recs[i].Workspace, recs[i].Project)))
	}
	return removed, nil
}

// putFix inserts rec, or updates the fix with its (Workspace, Project,
// Key), in tx; it sets rec's ID and Created, and reports whether rec is
// new to its tenant.
func putFix(tx *bbolt.Tx, rec *store.Fix, now time.Time) (bool, error) {
	ft, err := createFixTenant(tx, rec.Workspace, rec.Project)
	if err != nil {
		return false, err
	}
	added := false
	dk := []byte(stored.DedupeKey(rec.Key))
	if id := ft.keys.Get(dk); id != nil {
		old, err := ft.get(id)
		if err != nil {
			return false, err
		}
		if old == nil {
			return false, fmt.Errorf("fix key entry %q: fix %s: %w", dk, id, errCorrupt)
		}
		rec.ID, rec.Created = old.ID, old.Created
		backend.KeepFixMark(rec, old)
		if err := ft.upd.Delete(fixOrderKey(old)); err != nil {
			return false, err
		}
	} else {
		added = true
		rec.ID, rec.Created = stored.NewID(now), now
		if err := ft.setCount(ft.count() + 1); err != nil {
			return false, err
		}
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return false, err
	}
	if err := ft.ids.Put([]byte(rec.ID), v); err != nil {
		return false, err
	}
	if err := ft.upd.Put(fixOrderKey(rec), nil); err != nil {
		return false, err
	}
	return added, ft.keys.Put(dk, []byte(rec.ID))
}

// ListFixes returns the tenant's fixes, most recently updated first; see
// [store.Store]. It walks the tenant's order index from its end and stops at
// the limit.
func (b *Store) ListFixes(ctx context.Context, q store.FixQuery) ([]store.Fix, error) {
	if q.Workspace == "" || q.Project == "" {
		return nil, fmt.Errorf("store: list fixes: %w: workspace and project are required", store.ErrInvalid)
	}
	q.Workspace, q.Project = stored.Text(q.Workspace), stored.Text(q.Project)
	limit := backend.FixLimit(q.Limit)
	out := []store.Fix{}
	err := b.view(ctx, "list fixes", func(tx *bbolt.Tx) error {
		ft := openFixTenant(tx, q.Workspace, q.Project)
		if ft == nil {
			return nil
		}
		c := ft.upd.Cursor()
		for k, _ := c.Last(); k != nil && len(out) < limit; k, _ = c.Prev() {
			if len(k) < 8 {
				return fmt.Errorf("fix order entry %x: %w", k, errCorrupt)
			}
			f, err := ft.get(k[8:])
			if err != nil {
				return err
			}
			if f == nil {
				return fmt.Errorf("fix order entry %x: %w", k, errCorrupt)
			}
			out = append(out, *f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteFix removes one fix of the tenant; see [store.Store].
func (b *Store) DeleteFix(ctx context.Context, workspace, project, id string) error {
	workspace, project, id = stored.Text(workspace), stored.Text(project), stored.Text(id)
	err := b.update(ctx, "delete fix", func(tx *bbolt.Tx) error {
		ft := openFixTenant(tx, workspace, project)
		if ft == nil || id == "" {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		f, err := ft.get([]byte(id))
		if err != nil {
			return err
		}
		if f == nil {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		return ft.remove(f)
	})
	if err != nil {
		return err
	}
	b.bump(string(tenantKey(workspace, project)))
	return nil
}

// MarkFix sets or clears the Wrong mark of one fix of the tenant; see
// [store.Store].
func (b *Store) MarkFix(ctx context.Context, workspace, project, id string, wrong *store.Wrong) (store.Fix, error) {
	workspace, project, id = stored.Text(workspace), stored.Text(project), stored.Text(id)
	wrong = backend.PrepareWrong(wrong)
	var out store.Fix
	err := b.update(ctx, "mark fix", func(tx *bbolt.Tx) error {
		ft := openFixTenant(tx, workspace, project)
		if ft == nil || id == "" {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		f, err := ft.get([]byte(id))
		if err != nil {
			return err
		}
		if f == nil {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		f.Wrong = wrong
		v, err := json.Marshal(f)
		if err != nil {
			return err
		}
		out = *f
		return ft.ids.Put([]byte(f.ID), v)
	})
	if err != nil {
		return store.Fix{}, err
	}
	b.bump(string(tenantKey(workspace, project)))
	return out, nil
}

// DeleteFixes removes the tenant's fixes, and its buckets; see [store.Store].
func (b *Store) DeleteFixes(ctx context.Context, workspace, project string) (int, error) {
	if workspace == "" || project == "" {
		return 0, fmt.Errorf("store: delete fixes: %w: workspace and project are required", store.ErrInvalid)
	}
	workspace, project = stored.Text(workspace), stored.Text(project)
	n := 0
	err := b.update(ctx, "delete fixes", func(tx *bbolt.Tx) error {
		n = 0
		ft := openFixTenant(tx, workspace, project)
		if ft == nil {
			return nil
		}
		n = int(ft.count())
		return tx.Bucket(bktFixes).DeleteBucket(tenantKey(workspace, project))
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		b.bump(string(tenantKey(workspace, project)))
	}
	return n, nil
}

// PruneFixes removes fixes last updated before before, then the least
// recently updated fixes of each tenant beyond maxPerTenant; see [store.Store].
// A tenant is pruned in its own transaction, and only when something in
// it is due: a prune that finds nothing writes nothing.
func (b *Store) PruneFixes(ctx context.Context, before time.Time, maxPerTenant int) (int, error) {
	cut := retentionCut(before)
	due := func(root *bbolt.Bucket, name []byte) bool {
		return len(fixTenantOf(root.Bucket(name)).doomed(cut, maxPerTenant, 1)) > 0
	}
	return b.pruneBuckets(ctx, "prune fixes", bktFixes, true, due, func(tx *bbolt.Tx, name []byte) (int, error) {
		tb := tx.Bucket(bktFixes).Bucket(name)
		if tb == nil {
			return 0, nil
		}
		return fixTenantOf(tb).prune(cut, maxPerTenant)
	})
}

// prune removes the fixes retention removes from the tenant (see doomed)
// and returns how many.
func (ft *fixTenant) prune(cut []byte, maxPerTenant int) (int, error) {
	pruned := 0
	for _, k := range ft.doomed(cut, maxPerTenant, -1) {
		f, err := ft.get(k[8:])
		if err != nil {
			return 0, err
		}
		if f == nil {
			return 0, fmt.Errorf("fix order entry %x: %w", k, errCorrupt)
		}
		if err := ft.remove(f); err != nil {
			return 0, err
		}
		pruned++
	}
	return pruned, nil
}

// doomed returns the order keys of the fixes retention removes from the
// tenant, in removal order: those keyed before cut (nil: no age rule),
// then as many more as keep the tenant within maxPerTenant (0 or less: no
// cap). It stops after limit keys (negative: no limit). Keys are copies,
// valid after the transaction.
func (ft *fixTenant) doomed(cut []byte, maxPerTenant, limit int) [][]byte {
	count := int(ft.count())
	var out [][]byte
	c := ft.upd.Cursor()
	for k, _ := c.First(); k != nil && len(out) != limit; k, _ = c.Next() {
		old := cut != nil && bytes.Compare(k[:8], cut) < 0
		over := maxPerTenant > 0 && count-len(out) > maxPerTenant
		if !old && !over {
			break
		}
		out = append(out, bytes.Clone(k))
	}
	return out
}
