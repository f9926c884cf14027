package bolt

import (
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"go.etcd.io/bbolt"
)

// ListTenants returns the tenants that hold records; see [store.Store]. It
// reads the last key of each tenant's time-ordered index (incidents, fixes,
// usage, and each workspace's solutions): a few cursor moves per tenant.
func (b *Store) ListTenants(ctx context.Context, limit int) ([]store.TenantRef, error) {
	latest := make(map[[2]string]time.Time)
	note := func(ws, proj string, k []byte) {
		if len(k) < 8 {
			return
		}
		t := timeOfKey(k)
		key := [2]string{ws, proj}
		if cur, ok := latest[key]; !ok || t.After(cur) {
			latest[key] = t
		}
	}
	err := b.view(ctx, "list tenants", func(tx *bbolt.Tx) error {
		for _, idx := range []struct{ root, sub []byte }{{bktIncidents, bktInc}, {bktFixes, bktFixByUpd}, {bktUsage, bktUsageByHour}} {
			err := tx.Bucket(idx.root).ForEachBucket(func(name []byte) error {
				ws, proj, ok := parseTenantKey(name)
				if sub := tx.Bucket(idx.root).Bucket(name).Bucket(idx.sub); ok && sub != nil {
					k, _ := sub.Cursor().Last()
					note(ws, proj, k)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return tx.Bucket(bktSolutions).ForEachBucket(func(name []byte) error {
			ws := openSolutionWorkspace(tx.Bucket(bktSolutions), string(name))
			if ws == nil || ws.upd == nil {
				return nil
			}
			// u's keys start with the verified byte: the newest of each
			// kind ends its half.
			c := ws.upd.Cursor()
			if k, _ := c.Last(); len(k) > 1 {
				note(string(name), "", k[1:])
			}
			c.Seek([]byte{1})
			if k, _ := c.Prev(); len(k) > 1 && k[0] == 0 {
				note(string(name), "", k[1:])
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return newestTenants(latest, limit), nil
}

// newestTenants orders the tenants of latest the most recently changed
// first (then by name) and keeps the first limit (store.TenantLimit).
func newestTenants(latest map[[2]string]time.Time, limit int) []store.TenantRef {
	out := make([]store.TenantRef, 0, len(latest))
	for k, t := range latest {
		out = append(out, store.TenantRef{Workspace: k[0], Project: k[1], Latest: t})
	}
	slices.SortFunc(out, func(a, b store.TenantRef) int {
		return cmp.Or(b.Latest.Compare(a.Latest), cmp.Compare(a.Workspace, b.Workspace), cmp.Compare(a.Project, b.Project))
	})
	return out[:min(len(out), store.TenantLimit(limit))]
}

// timeOfKey reads the <time> a key starts with (see timeKey).
func timeOfKey(k []byte) time.Time {
	return time.UnixMicro(int64(binary.BigEndian.Uint64(k) ^ (1 << 63))).UTC()
}

// parseTenantKey splits a tenant bucket's name (see tenantKey).
func parseTenantKey(k []byte) (workspace, project string, ok bool) {
	n, w := binary.Uvarint(k)
	if w <= 0 || uint64(len(k)-w) < n {
		return "", "", false
	}
	workspace, k = string(k[w:w+int(n)]), k[w+int(n):]
	n, w = binary.Uvarint(k)
	if w <= 0 || uint64(len(k)-w) != n {
		return "", "", false
	}
	return workspace, string(k[w:]), true
}
