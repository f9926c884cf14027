package bolt

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
	"go.etcd.io/bbolt"
)

// IncidentGroups counts the tenant's incidents in groups; see [store.Store]. It
// walks the tenant's time index between Since and Until once.
func (b *Store) IncidentGroups(ctx context.Context, q store.GroupQuery) ([]store.IncidentGroup, error) {
	if q.Workspace == "" || q.Project == "" {
		return nil, fmt.Errorf("store: incident groups: %w: workspace and project are required", store.ErrInvalid)
	}
	q.Workspace, q.Project = stored.Text(q.Workspace), stored.Text(q.Project)
	groups := make(map[groupKey]*store.IncidentGroup)
	err := b.view(ctx, "incident groups", func(tx *bbolt.Tx) error {
		t := openTenant(tx, q.Workspace, q.Project)
		if t == nil {
			return nil
		}
		c := t.i.Cursor()
		var k, v []byte
		if q.Since.IsZero() {
			k, v = c.First()
		} else {
			k, v = c.Seek(timeKey(stored.CeilMicro(q.Since)))
		}
		var until []byte
		if !q.Until.IsZero() {
			until = timeKey(stored.CeilMicro(q.Until))
		}
		var inc store.Incident
		for n := 0; k != nil; k, v = c.Next() {
			if until != nil && bytes.Compare(k[:8], until) >= 0 {
				break
			}
			if n++; n%4096 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			if err := decodeIncident(v, &inc); err != nil {
				return fmt.Errorf("incident %x of %s/%s: %w", k, q.Workspace, q.Project, err)
			}
			gk := groupKeyOf(&inc)
			g := groups[gk]
			if g == nil {
				g = &store.IncidentGroup{Hour: time.Unix(gk.hour, 0).UTC(), Type: inc.Type, StatusCode: inc.StatusCode,
					Code: inc.Code, Provider: inc.Provider, Fingerprint: inc.Fingerprint}
				groups[gk] = g
			}
			g.Count++
			if inc.ID > g.SampleID {
				g.SampleID, g.Sample = inc.ID, inc.Message
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.IncidentGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	backend.SortGroups(out)
	return out, nil
}

// SearchIncidents returns a page of the tenant's incidents chosen by f,
// newest first; see [store.Store]. It walks the tenant's time index (or the
// session's, with a Session) backwards from Until or the cursor, and
// stops at a full page or at Since. The cursor is the hex of the last
// incident's key in the time index.
func (b *Store) SearchIncidents(ctx context.Context, f store.IncidentFilter) (store.IncidentPage, error) {
	if f.Workspace == "" || f.Project == "" {
		return store.IncidentPage{}, fmt.Errorf("store: search incidents: %w: workspace and project are required", store.ErrInvalid)
	}
	backend.CleanFilter(&f)
	limit := backend.IncidentLimit(f.Limit)
	var from []byte // walk keys strictly before this one
	if f.Cursor != "" {
		c, err := hex.DecodeString(f.Cursor)
		if err != nil || len(c) != 16 {
			return store.IncidentPage{}, fmt.Errorf("store: search incidents: %w: bad cursor", store.ErrInvalid)
		}
		from = c
	}
	if !f.Until.IsZero() {
		u := append(timeKey(stored.CeilMicro(f.Until)), make([]byte, 8)...)
		if from == nil || bytes.Compare(u, from) < 0 {
			from = u
		}
	}
	var since []byte
	if !f.Since.IsZero() {
		since = timeKey(stored.CeilMicro(f.Since))
	}
	var page store.IncidentPage
	var waiting [][]byte // see ListIncidents
	if f.Session != "" {
		waiting = b.behind.keys(tenantKey(f.Workspace, f.Project), f.Session)
	}
	err := b.view(ctx, "search incidents", func(tx *bbolt.Tx) error {
		t := openTenant(tx, f.Workspace, f.Project)
		if t == nil {
			return nil
		}
		// next yields the time-index keys and values of the walk, newest first.
		var next func() ([]byte, []byte, error)
		if f.Session == "" {
			c := t.i.Cursor()
			var k, v []byte
			started := false
			next = func() ([]byte, []byte, error) {
				switch {
				case started:
					k, v = c.Prev()
				case from == nil:
					k, v = c.Last()
				default:
					if k, v = c.Seek(from); k == nil {
						k, v = c.Last()
					} else {
						k, v = c.Prev()
					}
				}
				started = true
				return k, v, nil
			}
		} else {
			next = sessionWalk(t, f.Session, from, waiting)
		}
		var inc store.Incident
		var lastKey []byte
		for n := 0; ; n++ {
			if n%4096 == 4095 && ctx.Err() != nil {
				return ctx.Err()
			}
			k, v, err := next()
			if err != nil {
				return err
			}
			if k == nil || since != nil && bytes.Compare(k[:8], since) < 0 {
				return nil
			}
			if err := decodeIncident(v, &inc); err != nil {
				return fmt.Errorf("incident %x of %s/%s: %w", k, f.Workspace, f.Project, err)
			}
			if !matches(&f, &inc) {
				continue
			}
			if len(page.Incidents) == limit {
				page.Next = hex.EncodeToString(lastKey)
				return nil
			}
			page.Incidents = append(page.Incidents, inc)
			lastKey = append(lastKey[:0], k...)
		}
	})
	if err != nil {
		return store.IncidentPage{}, err
	}
	if page.Incidents == nil {
		page.Incidents = []store.Incident{}
	}
	return page, nil
}

// groupKey is what the incidents of one IncidentGroup share.
type groupKey struct {
	hour                             int64 // Unix seconds of the hour
	typ, code, provider, fingerprint string
	status                           int
}

func groupKeyOf(inc *store.Incident) groupKey {
	return groupKey{hour: hourOf(inc.Time), typ: inc.Type, code: inc.Code, provider: inc.Provider,
		fingerprint: inc.Fingerprint, status: inc.StatusCode}
}

// hourOf returns the Unix seconds of the start of t's UTC hour.
func hourOf(t time.Time) int64 {
	s := t.Unix()
	h := s - s%3600
	if s%3600 < 0 {
		h -= 3600
	}
	return h
}

// matches reports whether inc passes f's field filters (the tenant and
// the time bounds are the caller's).
func matches(f *store.IncidentFilter, inc *store.Incident) bool {
	switch {
	case f.Session != "" && inc.Session != f.Session,
		f.Type != "" && inc.Type != f.Type,
		f.Provider != "" && inc.Provider != f.Provider,
		f.Model != "" && inc.Model != f.Model:
		return false
	}
	return len(f.Fingerprints) == 0 || slices.Contains(f.Fingerprints, inc.Fingerprint)
}
