package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"go.etcd.io/bbolt"
)

// Buckets of a tenant's usage (see the layout at the top of bolt.go).
var (
	bktUsageByHour = []byte("h")
	bktUsageByConv = []byte("c")
)

// A usage record's value is its counts, in a versioned encoding as
// incidents' (codec.go):
//
//	byte    version (1)
//	varint  Requests, Input, Output, CacheRead, CacheWrite
//
// Its names and Hour are in its key.
const usageCodecV1 = 1

// appendUsageCounts appends the encoding of u's counts to b.
func appendUsageCounts(b []byte, u *store.Usage) []byte {
	b = append(b, usageCodecV1)
	for _, n := range [...]int64{u.Requests, u.Input, u.Output, u.CacheRead, u.CacheWrite} {
		b = binary.AppendVarint(b, n)
	}
	return b
}

// decodeUsageCounts decodes a value made by appendUsageCounts into u's
// counts. It returns errCorrupt, never panics, on malformed input.
func decodeUsageCounts(v []byte, u *store.Usage) error {
	if len(v) == 0 || v[0] != usageCodecV1 {
		return errCorrupt
	}
	d := decoder{b: v, off: 1}
	for _, p := range [...]*int64{&u.Requests, &u.Input, &u.Output, &u.CacheRead, &u.CacheWrite} {
		if *p = d.varint(); *p < 0 {
			d.bad = true
		}
	}
	if d.bad || d.off != len(v) {
		return errCorrupt
	}
	return nil
}

// usageKey is u's key in its tenant's h bucket: the hour, then the
// length-prefixed conversation and provider, then the model.
func usageKey(u *store.Usage) []byte {
	k := lenPrefixed(timeKey(u.Hour), u.Conversation)
	k = lenPrefixed(k, u.Provider)
	return append(k, u.Model...)
}

// parseUsageKey decodes a key made by usageKey into u's Hour,
// Conversation, Provider and Model.
func parseUsageKey(k []byte, u *store.Usage) error {
	if len(k) < 8 {
		return errCorrupt
	}
	d := decoder{b: k, s: string(k), off: 8}
	u.Conversation, u.Provider = d.string(), d.string()
	if d.bad {
		return errCorrupt
	}
	u.Model = d.s[d.off:]
	u.Hour = time.UnixMicro(int64(binary.BigEndian.Uint64(k) ^ (1 << 63))).UTC()
	return nil
}

// convIndexKey returns the key of the h key k in its tenant's c bucket
// (the length-prefixed conversation, the hour, the rest of k), or nil for
// a record of no conversation, which c does not index.
func convIndexKey(k []byte) ([]byte, error) {
	if len(k) < 8 {
		return nil, errCorrupt
	}
	n, w := binary.Uvarint(k[8:])
	if w <= 0 || n > uint64(len(k)-8-w) {
		return nil, errCorrupt
	}
	if n == 0 {
		return nil, nil
	}
	end := 8 + w + int(n)
	ck := make([]byte, 0, len(k))
	ck = append(ck, k[8:end]...)
	ck = append(ck, k[:8]...)
	return append(ck, k[end:]...), nil
}

// usageKeyOf returns the h key of the c key ck, whose length-prefixed
// conversation is prefix.
func usageKeyOf(ck, prefix []byte) []byte {
	k := make([]byte, 0, len(ck))
	k = append(k, ck[len(prefix):len(prefix)+8]...)
	k = append(k, prefix...)
	return append(k, ck[len(prefix)+8:]...)
}

// usageTenant holds the buckets of one tenant's usage.
type usageTenant struct {
	hours, convs *bbolt.Bucket
}

func usageTenantOf(b *bbolt.Bucket) *usageTenant {
	return &usageTenant{hours: b.Bucket(bktUsageByHour), convs: b.Bucket(bktUsageByConv)}
}

// openUsageTenant returns the tenant's usage buckets, or nil when it has
// none.
func openUsageTenant(tx *bbolt.Tx, workspace, project string) *usageTenant {
	b := tx.Bucket(bktUsage).Bucket(tenantKey(workspace, project))
	if b == nil {
		return nil
	}
	return usageTenantOf(b)
}

// createUsageTenant returns the tenant's usage buckets, creating them
// when missing.
func createUsageTenant(tx *bbolt.Tx, workspace, project string) (*usageTenant, error) {
	b, err := tx.Bucket(bktUsage).CreateBucketIfNotExists(tenantKey(workspace, project))
	if err != nil {
		return nil, err
	}
	for _, name := range [][]byte{bktUsageByHour, bktUsageByConv} {
		if _, err := b.CreateBucketIfNotExists(name); err != nil {
			return nil, err
		}
	}
	return usageTenantOf(b), nil
}

// add adds u's counts to the tenant's record of u's key, creating it.
func (ut *usageTenant) add(u *store.Usage) error {
	k := usageKey(u)
	sum := *u
	if v := ut.hours.Get(k); v != nil {
		var old store.Usage
		if err := decodeUsageCounts(v, &old); err != nil {
			return fmt.Errorf("usage %x: %w", k, err)
		}
		if err := backend.AddUsageCounts(&old, *u); err != nil {
			return err
		}
		sum = old
	} else if u.Conversation != "" {
		ck, err := convIndexKey(k)
		if err != nil {
			return err
		}
		if err := ut.convs.Put(ck, nil); err != nil {
			return err
		}
	}
	return ut.hours.Put(k, appendUsageCounts(nil, &sum))
}

// get decodes the record of the h key k (its names, Hour and counts).
func (ut *usageTenant) get(k []byte) (store.Usage, error) {
	var u store.Usage
	v := ut.hours.Get(k)
	if v == nil {
		return u, fmt.Errorf("usage %x: %w", k, errCorrupt)
	}
	if err := parseUsageKey(k, &u); err != nil {
		return u, fmt.Errorf("usage key %x: %w", k, err)
	}
	if err := decodeUsageCounts(v, &u); err != nil {
		return u, fmt.Errorf("usage %x: %w", k, err)
	}
	return u, nil
}

// read returns the tenant's records that q selects (its Conversation,
// Since and Until; q as backend.PrepareUsageQuery leaves it), newest hour
// first. It walks h, or the conversation's range of c, back from Until,
// and stops at Since, or at the start of an hour once what it read fills
// q.Limit: records when q.By is "", hours with UsageByHour (the other
// groupings need every record in the range).
func (ut *usageTenant) read(q store.UsageQuery) ([]store.Usage, error) {
	c := ut.hours.Cursor()
	var prefix []byte
	if q.Conversation != "" {
		c = ut.convs.Cursor()
		prefix = lenPrefixed(nil, q.Conversation)
	}
	var until, since []byte
	if !q.Until.IsZero() {
		until = timeKey(q.Until)
	}
	if !q.Since.IsZero() {
		since = timeKey(q.Since)
	}
	var out []store.Usage
	var hour []byte
	hours := 0
	for k := seekBefore(c, prefix, until); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Prev() {
		if len(k) < len(prefix)+8 {
			return nil, fmt.Errorf("usage index entry %x: %w", k, errCorrupt)
		}
		h := k[len(prefix) : len(prefix)+8]
		if since != nil && bytes.Compare(h, since) < 0 {
			break
		}
		if !bytes.Equal(h, hour) {
			if q.By == "" && len(out) >= q.Limit || q.By == store.UsageByHour && hours >= q.Limit {
				break
			}
			hour = h
			hours++
		}
		hk := k
		if prefix != nil {
			hk = usageKeyOf(k, prefix)
		}
		u, err := ut.get(hk)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// seekBefore moves c to the last key that starts with prefix and sorts
// before prefix+bound (nil bound: the last key that starts with prefix),
// and returns it, or nil when there is none.
func seekBefore(c *bbolt.Cursor, prefix, bound []byte) []byte {
	var k []byte
	if bound != nil {
		k, _ = c.Seek(append(bytes.Clone(prefix), bound...))
	} else if end := prefixEnd(prefix); end != nil {
		k, _ = c.Seek(end)
	}
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil
	}
	return k
}

// prefixEnd returns the least key greater than every key that starts
// with prefix, or nil when there is none (an empty prefix, or one of
// 0xff bytes alone).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// prune removes the tenant's records keyed before cut and returns how
// many it removed.
func (ut *usageTenant) prune(cut []byte) (int, error) {
	var doomed [][]byte
	c := ut.hours.Cursor()
	for k, _ := c.First(); k != nil && bytes.Compare(k, cut) < 0; k, _ = c.Next() {
		doomed = append(doomed, bytes.Clone(k))
	}
	for _, k := range doomed {
		ck, err := convIndexKey(k)
		if err != nil {
			return 0, fmt.Errorf("usage key %x: %w", k, err)
		}
		if ck != nil {
			if err := ut.convs.Delete(ck); err != nil {
				return 0, err
			}
		}
		if err := ut.hours.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
}

// AddUsage adds each record's counts to the stored record of its key, in
// one transaction; see [store.Store]. bbolt runs one write transaction at
// a time, so each read of a stored record and its write are one step.
func (b *Store) AddUsage(ctx context.Context, batch []store.Usage) error {
	recs, err := backend.PrepareUsage(batch)
	if err != nil {
		return fmt.Errorf("store: add usage: %w", err)
	}
	if len(recs) == 0 {
		return b.view(ctx, "add usage", func(*bbolt.Tx) error { return nil })
	}
	return b.update(ctx, "add usage", func(tx *bbolt.Tx) error {
		var ut *usageTenant
		for i := range recs {
			u := &recs[i]
			// recs are sorted by tenant first: open each tenant once.
			if i == 0 || u.Workspace != recs[i-1].Workspace || u.Project != recs[i-1].Project {
				var err error
				if ut, err = createUsageTenant(tx, u.Workspace, u.Project); err != nil {
					return err
				}
			}
			if err := ut.add(u); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListUsage returns the tenant's usage records that q selects, grouped
// as q.By says; see [store.Store]. Without a Conversation it walks the
// tenant's records by hour, with one the conversation's index; without a
// grouping, or by hour, it stops once it read the hours it returns.
func (b *Store) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.Usage, error) {
	q, err := backend.PrepareUsageQuery(q)
	if err != nil {
		return nil, fmt.Errorf("store: list usage: %w", err)
	}
	var recs []store.Usage
	err = b.view(ctx, "list usage", func(tx *bbolt.Tx) error {
		ut := openUsageTenant(tx, q.Workspace, q.Project)
		if ut == nil {
			return nil
		}
		var err error
		recs, err = ut.read(q)
		return err
	})
	if err != nil {
		return nil, err
	}
	out, err := groupUsage(recs, q.By)
	if err != nil {
		return nil, fmt.Errorf("store: list usage: %w", err)
	}
	if out == nil {
		out = []store.Usage{}
	}
	slices.SortFunc(out, backend.CompareUsage)
	out = out[:min(len(out), q.Limit)]
	for i := range out {
		out[i].Workspace, out[i].Project = q.Workspace, q.Project
	}
	return out, nil
}

// usageGroup is the key of a group of usage records.
type usageGroup struct {
	hour                  int64
	conv, provider, model string
}

// groupUsage sums recs in the groups by names (see store.UsageQuery.By),
// each group's Hour the latest of its records'; "" returns recs. It
// returns an error when a sum overflows.
func groupUsage(recs []store.Usage, by string) ([]store.Usage, error) {
	if by == "" {
		return recs, nil
	}
	at := make(map[usageGroup]int)
	var out []store.Usage
	for _, u := range recs {
		switch by {
		case store.UsageByHour:
			u.Conversation, u.Provider, u.Model = "", "", ""
		case store.UsageByConversation:
			u.Provider, u.Model = "", ""
		case store.UsageByModel:
			u.Conversation = ""
		}
		g := usageGroup{conv: u.Conversation, provider: u.Provider, model: u.Model}
		if by == store.UsageByHour {
			g.hour = u.Hour.Unix()
		}
		i, ok := at[g]
		if !ok {
			at[g] = len(out)
			out = append(out, u)
			continue
		}
		if err := backend.AddUsageCounts(&out[i], u); err != nil {
			return nil, err
		}
		if u.Hour.After(out[i].Hour) {
			out[i].Hour = u.Hour
		}
	}
	return out, nil
}

// PruneUsage removes the usage records of hours before before; see
// [store.Store]. A tenant is pruned in its own transaction, and only when
// it holds such a record: a prune that finds nothing writes nothing. A
// zero before removes nothing.
func (b *Store) PruneUsage(ctx context.Context, before time.Time) (int, error) {
	cut := retentionCut(before)
	due := func(root *bbolt.Bucket, name []byte) bool {
		k, _ := usageTenantOf(root.Bucket(name)).hours.Cursor().First()
		return cut != nil && k != nil && bytes.Compare(k, cut) < 0
	}
	return b.pruneBuckets(ctx, "prune usage", bktUsage, false, due, func(tx *bbolt.Tx, name []byte) (int, error) {
		root := tx.Bucket(bktUsage)
		tb := root.Bucket(name)
		if tb == nil {
			return 0, nil
		}
		ut := usageTenantOf(tb)
		n, err := ut.prune(cut)
		if err != nil {
			return 0, err
		}
		if k, _ := ut.hours.Cursor().First(); k == nil {
			if err := root.DeleteBucket(name); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
}
