// Package bolt is the embedded [store.Store]: both memories in one bbolt
// file in the data directory, opened by one process at a time ([Open]).
// The layout of the file is described at the top of bolt.go, the encoding
// of incidents in codec.go, that of usage records in usage.go.
//
// # Imports
//
// Only this package imports bbolt. It imports store and store/internal,
// and must not import pgx, Echo nor any other scarproxy package.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Layout of the bbolt file. Every name below is a bucket unless noted.
//
//	incidents/
//	  <tenant>/                 tenant = uvarint-length-prefixed workspace, then project
//	    n                       (key) number of incidents of the tenant, uint64
//	    i/   <time><seq>     -> incident (codec.go)
//	    s/   <session><time><seq> -> empty: per-session index into i
//	    d/   <dedupe key>    -> <time>
//	    dt/  <time><dedupe key> -> empty: d in time order, for pruning
//	solutions/
//	  <workspace>/
//	    n                       (key) number of solutions of the workspace, uint64
//	    id/  <id>  -> <feed seq> + JSON solution (its embedding, if any, inside: solutionRecord)
//	    key/ <key> -> <id>
//	    u/   <verified><time><id> -> empty: retention order (see PruneSolutions)
//	feed/  <seq> -> change entry (deleted flag, workspace, id)
//	fixes/
//	  <tenant>/                 as in incidents
//	    n                       (key) number of fixes of the tenant, uint64
//	    id/  <id>  -> JSON fix
//	    key/ <dedupe key> -> <id>
//	    u/   <time><id> -> empty: listing and retention order
//	usage/
//	  <tenant>/                 as in incidents
//	    h/   <hour><conversation><provider><model> -> counts (usage.go)
//	    c/   <conversation><hour><provider><model> -> empty: per-conversation index into h
//	conversations/              (made by the first label stored)
//	  <tenant>/                 as in incidents
//	    <conversation id> -> JSON label: task, agent, started (conversations.go)
//
// <time> is 8 bytes: Unix microseconds, sign bit flipped, big-endian, so keys
// sort by time; <seq> is the tenant bucket's 8-byte big-endian sequence, so
// incidents of the same microsecond sort in insertion order. A tenant's reads
// open its bucket only; newest-first reads walk i (or one session's range of
// s) backwards from the end and stop at the first key older than Since.
//
// In u, <verified> is one byte, 0 for an unverified solution and 1 for a
// verified one, and <time> is the solution's Updated: a walk from the first
// key meets the solutions in the order retention removes them. Files made
// before u and n existed get them when opened (see migrateSolutions).
//
// In a tenant's fixes, <dedupe key> is the fix's Key as stored.DedupeKey
// stores it, and <time> in u is the fix's Updated: a walk from the last key
// lists them most recently updated first, a walk from the first meets
// them in the order retention removes them.
//
// In a tenant's usage, <hour> is the record's Hour as a <time>, and
// <conversation> and <provider> are length-prefixed (uvarint) as the parts
// of a tenant's name are, the <model> taking the rest of the key: no two
// records share a key, and a walk of h meets them hour by hour, so reads
// walk back from Until and prunes forward from the first key. c holds the
// records of a conversation (none for those of no conversation), so that
// a read of one conversation walks its range alone.
var (
	bktIncidents = []byte("incidents")
	bktSolutions = []byte("solutions")
	bktFeed      = []byte("feed")
	bktFixes     = []byte("fixes")
	bktUsage     = []byte("usage")

	keyCount  = []byte("n")
	bktInc    = []byte("i")
	bktSess   = []byte("s")
	bktDedupe = []byte("d")
	bktDedupT = []byte("dt")

	bktSolByID  = []byte("id")
	bktSolByKey = []byte("key")
	bktSolByUpd = []byte("u")
)

// boltLockTimeout bounds how long Open waits for the file lock held by
// another process.
const boltLockTimeout = time.Second

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Now is the clock used for incident times and solution timestamps.
	// Nil means time.Now.
	Now func() time.Time
}

// Store is the embedded [store.Store]: one bbolt file, opened by one
// process at a time. It is safe for concurrent use.
type Store struct {
	db     *bbolt.DB
	now    func() time.Time
	closed atomic.Bool

	// Incident versions (which fixes move too) live in memory: bbolt
	// locks the file, so every write goes through this value. epoch keeps
	// versions of two opens of the same file apart.
	verMu    sync.Mutex
	versions map[string]int64
	verSeq   int64
	epoch    int64

	// behind holds the session entries not written yet (behind.go).
	behind behind
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.MemoryVersions = (*Store)(nil)
)

// Open opens (or creates) the bbolt file at path, creating its parent
// directory when missing. bbolt locks the file: when another process holds
// it, Open fails after about a second with an error saying so, instead
// of waiting forever.
func Open(path string, opts Options) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: open bolt: %w", err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: boltLockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("store: open bolt %s: file is locked by another process (waited %s): %w", path, boltLockTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open bolt %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bktIncidents, bktSolutions, bktFeed, bktFixes, bktUsage} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if err := migrateSolutions(tx); err != nil {
			return err
		}
		return recoverBehind(tx)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open bolt %s: init buckets: %w", path, err)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now, versions: make(map[string]int64), epoch: time.Now().UnixNano()}, nil
}

// bump records that the tenant's incidents or fixes changed.
func (b *Store) bump(tenant string) {
	b.verMu.Lock()
	b.verSeq++
	b.versions[tenant] = b.verSeq
	b.verMu.Unlock()
}

// IncidentVersion returns the tenant's incident version; see [store.Store].
func (b *Store) IncidentVersion(ctx context.Context, workspace, project string) (int64, error) {
	if b.closed.Load() {
		return 0, fmt.Errorf("store: incident version: %w", store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("store: incident version: %w", err)
	}
	b.verMu.Lock()
	v := b.versions[string(tenantKey(stored.Text(workspace), stored.Text(project)))]
	b.verMu.Unlock()
	return b.epoch + v, nil
}

// VersionsInMemory reports that IncidentVersion reads a map and never
// waits; see [store.MemoryVersions].
func (b *Store) VersionsInMemory() bool { return true }

// Close closes the file. Later calls of any method, Close included, return
// ErrClosed.
func (b *Store) Close() error {
	if b.closed.Swap(true) {
		return fmt.Errorf("store: close: %w", store.ErrClosed)
	}
	// What waits of the session index is written now; should this fail,
	// the next Open writes it (recoverBehind).
	var upto uint64
	ferr := b.db.Update(func(tx *bbolt.Tx) error {
		var err error
		upto, err = b.writeBehind(tx)
		return err
	})
	if ferr == nil {
		b.behind.drop(upto, b.now())
	}
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	if ferr != nil {
		return fmt.Errorf("store: close: write the session index: %w", ferr)
	}
	return nil
}

// Ping reports ErrClosed after Close, and nil otherwise.
func (b *Store) Ping(ctx context.Context) error {
	return b.view(ctx, "ping", func(*bbolt.Tx) error { return nil })
}

// view runs fn in a read transaction, after checking Close and ctx.
func (b *Store) view(ctx context.Context, op string, fn func(tx *bbolt.Tx) error) error {
	if err := b.check(ctx); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if err := b.db.View(fn); err != nil {
		return fmt.Errorf("store: %s: %w", op, boltErr(err))
	}
	return nil
}

// update runs fn in a write transaction, after checking Close and ctx.
func (b *Store) update(ctx context.Context, op string, fn func(tx *bbolt.Tx) error) error {
	if err := b.check(ctx); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if err := b.db.Update(fn); err != nil {
		return fmt.Errorf("store: %s: %w", op, boltErr(err))
	}
	return nil
}

func (b *Store) check(ctx context.Context) error {
	if b.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// boltErr maps bbolt's "not open" (a Close racing a call) to ErrClosed.
func boltErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return store.ErrClosed
	}
	return err
}

// AddIncident stores inc; see [store.Store].
func (b *Store) AddIncident(ctx context.Context, inc *store.Incident) error {
	_, err := b.addIncident(ctx, "add incident", inc, "")
	return err
}

// AddIncidentOnce stores inc unless dedupeKey was already recorded for the
// tenant; see [store.Store]. The check and the insert are one transaction. An
// empty dedupeKey stores inc unconditionally.
func (b *Store) AddIncidentOnce(ctx context.Context, inc *store.Incident, dedupeKey string) (bool, error) {
	return b.addIncident(ctx, "add incident once", inc, dedupeKey)
}

func (b *Store) addIncident(ctx context.Context, op string, inc *store.Incident, dkey string) (bool, error) {
	rec, err := backend.PrepareIncident(inc, b.now)
	if err != nil {
		return false, fmt.Errorf("store: %s: %w", op, err)
	}
	added := false
	err = b.update(ctx, op, func(tx *bbolt.Tx) error {
		t, err := createTenant(tx, rec.Workspace, rec.Project)
		if err != nil {
			return err
		}
		if dkey != "" {
			dk := []byte(stored.DedupeKey(stored.Text(dkey)))
			if t.d.Get(dk) != nil {
				return nil
			}
			tk := timeKey(rec.Time)
			if err := t.d.Put(dk, tk); err != nil {
				return err
			}
			if err := t.dt.Put(append(tk, dk...), nil); err != nil {
				return err
			}
		}
		added = true
		k, err := t.put(&rec)
		if err != nil {
			return err
		}
		return t.index(rec.Session, k)
	})
	if err != nil {
		return false, err
	}
	if added {
		*inc = rec
		b.bump(string(tenantKey(rec.Workspace, rec.Project)))
	}
	return added, nil
}

// ListIncidents returns the tenant's incidents, newest first (incidents of
// the same microsecond: last stored first). With a Session it walks that
// session's index; it stops at Limit or at the first incident older than
// Since, so its cost follows what it returns, not the tenant's size.
func (b *Store) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	if q.Workspace == "" || q.Project == "" {
		return nil, fmt.Errorf("store: list incidents: %w: workspace and project are required", store.ErrInvalid)
	}
	q.Workspace, q.Project, q.Session = stored.Text(q.Workspace), stored.Text(q.Project), stored.Text(q.Session)
	limit := backend.IncidentLimit(q.Limit)
	var out []store.Incident
	// What waits of the session index is taken before the view begins:
	// each of its incidents is then in the view, unless removed since.
	var waiting [][]byte
	if q.Session != "" {
		waiting = b.behind.keys(tenantKey(q.Workspace, q.Project), q.Session)
	}
	err := b.view(ctx, "list incidents", func(tx *bbolt.Tx) error {
		t := openTenant(tx, q.Workspace, q.Project)
		if t == nil {
			return nil
		}
		// Collect the matching values first (they stay valid until the
		// transaction ends), then decode into a slice of the exact size.
		var since []byte
		if !q.Since.IsZero() {
			since = timeKey(stored.CeilMicro(q.Since))
		}
		var vals [][]byte
		if q.Session == "" {
			c := t.i.Cursor()
			for k, v := c.Last(); k != nil && len(vals) < limit; k, v = c.Prev() {
				if since != nil && bytes.Compare(k[:8], since) < 0 {
					break
				}
				vals = append(vals, v)
			}
		} else {
			next := sessionWalk(t, q.Session, nil, waiting)
			for len(vals) < limit {
				k, v, err := next()
				if err != nil {
					return err
				}
				if k == nil || since != nil && bytes.Compare(k[:8], since) < 0 {
					break
				}
				vals = append(vals, v)
			}
		}
		out = make([]store.Incident, len(vals))
		for n, v := range vals {
			if err := decodeIncident(v, &out[n]); err != nil {
				return fmt.Errorf("incident %d of %s/%s: %w", n, q.Workspace, q.Project, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []store.Incident{}
	}
	return out, nil
}

// DeleteIncidents removes the tenant's incidents and dedupe keys; see
// [store.Store].
func (b *Store) DeleteIncidents(ctx context.Context, workspace, project string) (int, error) {
	if workspace == "" || project == "" {
		return 0, fmt.Errorf("store: delete incidents: %w: workspace and project are required", store.ErrInvalid)
	}
	workspace, project = stored.Text(workspace), stored.Text(project)
	n := 0
	err := b.update(ctx, "delete incidents", func(tx *bbolt.Tx) error {
		t := openTenant(tx, workspace, project)
		if t == nil {
			return nil
		}
		n = int(t.count())
		return tx.Bucket(bktIncidents).DeleteBucket(tenantKey(workspace, project))
	})
	if err == nil && n > 0 {
		b.bump(string(tenantKey(workspace, project)))
	}
	return n, err
}

// PruneIncidents removes incidents (and dedupe keys) older than before, then
// the oldest incidents of each tenant beyond maxPerTenant; see [store.Store]. A
// zero before applies no age rule. Each tenant is pruned in its own
// transaction, so a cancelled ctx leaves the tenants done so far pruned.
func (b *Store) PruneIncidents(ctx context.Context, before time.Time, maxPerTenant int) (int, error) {
	cut := retentionCut(before)
	return b.pruneBuckets(ctx, "prune incidents", bktIncidents, true, nil, func(tx *bbolt.Tx, name []byte) (int, error) {
		return pruneTenant(tx.Bucket(bktIncidents), name, cut, maxPerTenant)
	})
}

// retentionCut is the time key before which retention removes what is
// keyed by time; nil (no age rule) for a zero before.
func retentionCut(before time.Time) []byte {
	if before.IsZero() {
		return nil
	}
	return timeKey(stored.CeilMicro(before))
}

// pruneBuckets runs retention over the sub-buckets (tenants, workspaces)
// of the root bucket named root. due, in one read transaction, picks the
// sub-buckets retention would remove something from (nil: all of them);
// prune then removes it from each picked one in a transaction of its own
// (so a cancelled ctx leaves those done so far pruned) and says how many
// it removed. With bump, a sub-bucket that lost something moves its
// version (an incident tenant's). It returns how many were removed.
func (b *Store) pruneBuckets(ctx context.Context, op string, root []byte, bump bool,
	due func(root *bbolt.Bucket, name []byte) bool, prune func(tx *bbolt.Tx, name []byte) (int, error)) (int, error) {
	var picked [][]byte
	err := b.view(ctx, op, func(tx *bbolt.Tx) error {
		r := tx.Bucket(root)
		return r.ForEachBucket(func(name []byte) error {
			if due == nil || due(r, name) {
				picked = append(picked, bytes.Clone(name))
			}
			return nil
		})
	})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, name := range picked {
		pruned := 0
		err := b.update(ctx, op, func(tx *bbolt.Tx) error {
			n, err := prune(tx, name)
			pruned = n
			return err
		})
		if err != nil {
			return total, err
		}
		total += pruned
		if bump && pruned > 0 {
			b.bump(string(name))
		}
	}
	return total, nil
}

// pruneTenant prunes one tenant bucket of root and deletes the bucket when
// nothing is left in it.
func pruneTenant(root *bbolt.Bucket, name, cut []byte, maxPerTenant int) (int, error) {
	tb := root.Bucket(name)
	if tb == nil {
		return 0, nil
	}
	t := tenantOf(tb)
	count := int(t.count())
	var doomed [][]byte
	c := t.i.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		old := cut != nil && bytes.Compare(k[:8], cut) < 0
		over := maxPerTenant > 0 && count-len(doomed) > maxPerTenant
		if !old && !over {
			break
		}
		doomed = append(doomed, bytes.Clone(k))
	}
	var inc store.Incident
	for _, k := range doomed {
		if err := decodeIncident(t.i.Get(k), &inc); err != nil {
			return 0, fmt.Errorf("incident %x: %w", k, err)
		}
		if inc.Session != "" {
			if err := t.s.Delete(append(lenPrefixed(nil, inc.Session), k...)); err != nil {
				return 0, err
			}
		}
		if err := t.i.Delete(k); err != nil {
			return 0, err
		}
	}
	if err := t.setCount(uint64(count - len(doomed))); err != nil {
		return 0, err
	}
	if cut != nil {
		var keys [][]byte
		c := t.dt.Cursor()
		for k, _ := c.First(); k != nil && bytes.Compare(k[:8], cut) < 0; k, _ = c.Next() {
			keys = append(keys, bytes.Clone(k))
		}
		for _, k := range keys {
			if err := t.d.Delete(k[8:]); err != nil {
				return 0, err
			}
			if err := t.dt.Delete(k); err != nil {
				return 0, err
			}
		}
	}
	if k, _ := t.i.Cursor().First(); k == nil {
		if k, _ := t.d.Cursor().First(); k == nil {
			if err := root.DeleteBucket(name); err != nil {
				return 0, err
			}
		}
	}
	return len(doomed), nil
}

// PutSolution inserts or updates s by (Workspace, Key); see [store.Store]. A
// new solution gets a new ID and Created time (any ID or Created in s is
// ignored); Updated is always set to now.
func (b *Store) PutSolution(ctx context.Context, s *store.Solution) error {
	_, err := b.PutSolutions(ctx, []*store.Solution{s}, 0)
	return err
}

// PutSolutions stores each of sols as PutSolution does, then brings each
// workspace it added a solution to back within maxPerWorkspace, in one
// transaction; see [store.Store].
func (b *Store) PutSolutions(ctx context.Context, sols []*store.Solution, maxPerWorkspace int) (int, error) {
	recs, err := backend.PrepareSolutions(sols)
	if err != nil {
		return 0, fmt.Errorf("store: put solution: %w", err)
	}
	now := stored.Time(b.now())
	removed := 0
	err = b.update(ctx, "put solution", func(tx *bbolt.Tx) error {
		removed = 0
		var grown []string // workspaces that gained a solution, in order
		for i := range recs {
			recs[i].Updated = now
			added, err := putSolution(tx, &recs[i], now)
			if err != nil {
				return err
			}
			if added && !slices.Contains(grown, recs[i].Workspace) {
				grown = append(grown, recs[i].Workspace)
			}
		}
		if maxPerWorkspace <= 0 {
			return nil
		}
		for _, name := range grown {
			n, err := pruneSolutionWorkspace(tx, name, nil, maxPerWorkspace)
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
	for i, s := range sols {
		*s = recs[i]
	}
	return removed, nil
}

// putSolution inserts rec, or updates the solution with its (Workspace,
// Key), in tx; it sets rec's ID and Created, and reports whether rec is
// new to its workspace.
func putSolution(tx *bbolt.Tx, rec *store.Solution, now time.Time) (added bool, err error) {
	ws, err := createSolutionWorkspace(tx.Bucket(bktSolutions), rec.Workspace)
	if err != nil {
		return false, err
	}
	feed := tx.Bucket(bktFeed)
	if id := ws.keys.Get([]byte(rec.Key)); id != nil {
		old, oldSeq, err := decodeSolution(ws.ids.Get(id))
		if err != nil {
			return false, fmt.Errorf("solution %s: %w", id, err)
		}
		rec.ID, rec.Created = old.ID, old.Created
		backend.KeepSolutionMark(rec, &old)
		if old.Goal == rec.Goal {
			rec.Embedding = old.Embedding // the vector of the same goal
		}
		if err := feed.Delete(seqKey(oldSeq)); err != nil {
			return false, err
		}
		if err := ws.upd.Delete(retentionKey(&old)); err != nil {
			return false, err
		}
	} else {
		added = true
		rec.ID, rec.Created = stored.NewID(now), now
		if err := ws.setCount(ws.count() + 1); err != nil {
			return false, err
		}
	}
	seq, err := feed.NextSequence()
	if err != nil {
		return false, err
	}
	if err := feed.Put(seqKey(seq), feedEntry(false, rec.Workspace, rec.ID)); err != nil {
		return false, err
	}
	v, err := encodeSolution(rec, seq)
	if err != nil {
		return false, err
	}
	if err := ws.ids.Put([]byte(rec.ID), v); err != nil {
		return false, err
	}
	if err := ws.upd.Put(retentionKey(rec), nil); err != nil {
		return false, err
	}
	return added, ws.keys.Put([]byte(rec.Key), []byte(rec.ID))
}

// MarkSolution sets or clears the Wrong mark of one solution, as a new
// entry of the change feed; see [store.Store].
func (b *Store) MarkSolution(ctx context.Context, workspace, id string, wrong *store.Wrong) (store.Solution, error) {
	workspace, id = stored.Text(workspace), stored.Text(id)
	wrong = backend.PrepareWrong(wrong)
	var s store.Solution
	err := b.update(ctx, "mark solution", func(tx *bbolt.Tx) error {
		ws := openSolutionWorkspace(tx.Bucket(bktSolutions), workspace)
		var v []byte
		if ws != nil && id != "" {
			v = ws.ids.Get([]byte(id))
		}
		if v == nil {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		old, oldSeq, err := decodeSolution(v)
		if err != nil {
			return fmt.Errorf("solution %s: %w", id, err)
		}
		feed := tx.Bucket(bktFeed)
		if err := feed.Delete(seqKey(oldSeq)); err != nil {
			return err
		}
		seq, err := feed.NextSequence()
		if err != nil {
			return err
		}
		if err := feed.Put(seqKey(seq), feedEntry(false, old.Workspace, old.ID)); err != nil {
			return err
		}
		old.Wrong = wrong
		if v, err = encodeSolution(&old, seq); err != nil {
			return err
		}
		s = old
		return ws.ids.Put([]byte(old.ID), v)
	})
	return s, err
}

// GetSolution returns one solution of the workspace; see [store.Store].
func (b *Store) GetSolution(ctx context.Context, workspace, id string) (store.Solution, error) {
	workspace, id = stored.Text(workspace), stored.Text(id)
	var s store.Solution
	err := b.view(ctx, "get solution", func(tx *bbolt.Tx) error {
		ids := solutionIDs(tx, workspace)
		if ids == nil || id == "" {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		v := ids.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		var err error
		s, _, err = decodeSolution(v)
		return err
	})
	return s, err
}

// ListSolutions returns the workspace's solutions, most recently updated
// first (then by ID, descending); see [store.Store].
func (b *Store) ListSolutions(ctx context.Context, workspace string) ([]store.Solution, error) {
	workspace = stored.Text(workspace)
	out := []store.Solution{}
	err := b.view(ctx, "list solutions", func(tx *bbolt.Tx) error {
		ids := solutionIDs(tx, workspace)
		if ids == nil {
			return nil
		}
		return ids.ForEach(func(k, v []byte) error {
			s, _, err := decodeSolution(v)
			if err != nil {
				return fmt.Errorf("solution %s: %w", k, err)
			}
			out = append(out, s)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sortSolutions(out)
	return out, nil
}

// sortSolutions orders solutions most recently updated first, then by ID
// descending, the order both backends return.
func sortSolutions(s []store.Solution) {
	sort.Slice(s, func(i, j int) bool {
		if !s[i].Updated.Equal(s[j].Updated) {
			return s[i].Updated.After(s[j].Updated)
		}
		return s[i].ID > s[j].ID
	})
}

// DeleteSolution removes one solution of the workspace and records the
// deletion in the change feed; see [store.Store].
func (b *Store) DeleteSolution(ctx context.Context, workspace, id string) error {
	workspace, id = stored.Text(workspace), stored.Text(id)
	return b.update(ctx, "delete solution", func(tx *bbolt.Tx) error {
		ws := openSolutionWorkspace(tx.Bucket(bktSolutions), workspace)
		if ws == nil || id == "" {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		v := ws.ids.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		old, oldSeq, err := decodeSolution(v)
		if err != nil {
			return fmt.Errorf("solution %s: %w", id, err)
		}
		return ws.remove(tx.Bucket(bktFeed), workspace, &old, oldSeq)
	})
}

// PruneSolutions removes unverified solutions last updated before before,
// then the solutions of each workspace beyond maxPerWorkspace, in
// retention order; see [store.Store]. A workspace is pruned in its own
// transaction, and only when something in it is due: a prune that finds
// nothing writes nothing.
func (b *Store) PruneSolutions(ctx context.Context, before time.Time, maxPerWorkspace int) (int, error) {
	cut := retentionCut(before)
	due := func(root *bbolt.Bucket, name []byte) bool {
		ws := openSolutionWorkspace(root, string(name))
		return ws != nil && len(ws.doomed(cut, maxPerWorkspace, 1)) > 0
	}
	return b.pruneBuckets(ctx, "prune solutions", bktSolutions, false, due, func(tx *bbolt.Tx, name []byte) (int, error) {
		return pruneSolutionWorkspace(tx, string(name), cut, maxPerWorkspace)
	})
}

// pruneSolutionWorkspace removes from one workspace, in tx, the solutions
// retention removes (see solutionWorkspace.doomed), each a deletion in
// the change feed, and returns how many.
func pruneSolutionWorkspace(tx *bbolt.Tx, workspace string, cut []byte, maxPerWorkspace int) (int, error) {
	ws := openSolutionWorkspace(tx.Bucket(bktSolutions), workspace)
	if ws == nil {
		return 0, nil
	}
	feed := tx.Bucket(bktFeed)
	pruned := 0
	for _, k := range ws.doomed(cut, maxPerWorkspace, -1) {
		id := k[1+8:]
		v := ws.ids.Get(id)
		if v == nil {
			return 0, fmt.Errorf("retention entry %x: solution %s: %w", k, id, errCorrupt)
		}
		old, oldSeq, err := decodeSolution(v)
		if err != nil {
			return 0, fmt.Errorf("solution %s: %w", id, err)
		}
		if err := ws.remove(feed, workspace, &old, oldSeq); err != nil {
			return 0, err
		}
		pruned++
	}
	return pruned, nil
}

// SolutionChanges returns feed entries with Seq > after; see [store.Store]. A
// limit <= 0 means 1000; it is capped at 10000. The feed holds one entry
// per live solution (its latest change) and one per deletion; deletion
// entries are kept.
func (b *Store) SolutionChanges(ctx context.Context, after int64, limit int) ([]store.SolutionChange, int64, error) {
	limit = backend.ChangeLimit(limit)
	out := []store.SolutionChange{}
	last := after
	err := b.view(ctx, "solution changes", func(tx *bbolt.Tx) error {
		start := uint64(0)
		if after > 0 {
			start = uint64(after)
		}
		c := tx.Bucket(bktFeed).Cursor()
		for k, v := c.Seek(seqKey(start + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			seq := int64(binary.BigEndian.Uint64(k))
			deleted, workspace, id, err := parseFeedEntry(v)
			if err != nil {
				return fmt.Errorf("feed entry %d: %w", seq, err)
			}
			ch := store.SolutionChange{Seq: seq, Deleted: deleted}
			if deleted {
				ch.Solution = store.Solution{ID: id, Workspace: workspace}
			} else {
				ids := solutionIDs(tx, workspace)
				var sv []byte
				if ids != nil {
					sv = ids.Get([]byte(id))
				}
				if sv == nil {
					return fmt.Errorf("feed entry %d: solution %s: %w", seq, id, errCorrupt)
				}
				if ch.Solution, _, err = decodeSolution(sv); err != nil {
					return fmt.Errorf("solution %s: %w", id, err)
				}
			}
			out = append(out, ch)
			last = seq
		}
		return nil
	})
	if err != nil {
		return nil, after, err
	}
	return out, last, nil
}

// DeleteSolutions removes the workspace's solutions, each recorded as a
// deletion in the change feed, and then the workspace's buckets, in one
// transaction; see [store.Store].
func (b *Store) DeleteSolutions(ctx context.Context, workspace string) (int, error) {
	workspace = stored.Text(workspace)
	n := 0
	err := b.update(ctx, "delete solutions", func(tx *bbolt.Tx) error {
		n = 0
		ids := solutionIDs(tx, workspace)
		if ids == nil {
			return nil
		}
		feed := tx.Bucket(bktFeed)
		err := ids.ForEach(func(id, v []byte) error {
			_, oldSeq, err := decodeSolution(v)
			if err != nil {
				return fmt.Errorf("solution %s: %w", id, err)
			}
			if err := feed.Delete(seqKey(oldSeq)); err != nil {
				return err
			}
			seq, err := feed.NextSequence()
			if err != nil {
				return err
			}
			n++
			return feed.Put(seqKey(seq), feedEntry(true, workspace, string(id)))
		})
		if err != nil {
			return err
		}
		return tx.Bucket(bktSolutions).DeleteBucket([]byte(workspace))
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// tenant holds the buckets of one (workspace, project).
type tenant struct {
	b, i, s, d, dt *bbolt.Bucket
}

func tenantOf(b *bbolt.Bucket) *tenant {
	return &tenant{b: b, i: b.Bucket(bktInc), s: b.Bucket(bktSess), d: b.Bucket(bktDedupe), dt: b.Bucket(bktDedupT)}
}

// openTenant returns the tenant's buckets, or nil when it has none.
func openTenant(tx *bbolt.Tx, workspace, project string) *tenant {
	b := tx.Bucket(bktIncidents).Bucket(tenantKey(workspace, project))
	if b == nil {
		return nil
	}
	return tenantOf(b)
}

// createTenant returns the tenant's buckets, creating them when missing.
func createTenant(tx *bbolt.Tx, workspace, project string) (*tenant, error) {
	b, err := tx.Bucket(bktIncidents).CreateBucketIfNotExists(tenantKey(workspace, project))
	if err != nil {
		return nil, err
	}
	for _, name := range [][]byte{bktInc, bktSess, bktDedupe, bktDedupT} {
		if _, err := b.CreateBucketIfNotExists(name); err != nil {
			return nil, err
		}
	}
	t := tenantOf(b)
	// Keys are time-ordered: most inserts append, so fuller pages waste less.
	t.i.FillPercent = 0.9
	return t, nil
}

func (t *tenant) count() uint64 {
	v := t.b.Get(keyCount)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func (t *tenant) setCount(n uint64) error {
	return t.b.Put(keyCount, binary.BigEndian.AppendUint64(nil, n))
}

// put stores rec (ID and Time already set) in the tenant's time index and
// returns its key there; its session's entry is the caller's (index, or
// behind.go).
func (t *tenant) put(rec *store.Incident) ([]byte, error) {
	seq, err := t.b.NextSequence()
	if err != nil {
		return nil, err
	}
	k := binary.BigEndian.AppendUint64(timeKey(rec.Time), seq)
	if err := t.i.Put(k, appendIncident(nil, rec)); err != nil {
		return nil, err
	}
	return k, t.setCount(t.count() + 1)
}

// index writes the session index's entry of the incident at key k.
func (t *tenant) index(session string, k []byte) error {
	if session == "" {
		return nil
	}
	return t.s.Put(append(lenPrefixed(nil, session), k...), nil)
}

// tenantKey names a tenant's bucket: both parts length-prefixed, so no two
// tenants share a name.
func tenantKey(workspace, project string) []byte {
	return lenPrefixed(lenPrefixed(nil, workspace), project)
}

func lenPrefixed(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// timeKey is t's Unix microseconds with the sign bit flipped, big-endian:
// byte order is time order, before 1970 included.
func timeKey(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(t.UnixMicro())^(1<<63))
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}

// solutionIDs returns the workspace's solution bucket, or nil.
func solutionIDs(tx *bbolt.Tx, workspace string) *bbolt.Bucket {
	if workspace == "" {
		return nil
	}
	ws := tx.Bucket(bktSolutions).Bucket([]byte(workspace))
	if ws == nil {
		return nil
	}
	return ws.Bucket(bktSolByID)
}

// solutionWorkspace holds the buckets of one workspace's solutions.
type solutionWorkspace struct {
	b, ids, keys, upd *bbolt.Bucket
}

// openSolutionWorkspace returns the workspace's buckets, or nil when it has
// none.
func openSolutionWorkspace(root *bbolt.Bucket, workspace string) *solutionWorkspace {
	if workspace == "" {
		return nil
	}
	b := root.Bucket([]byte(workspace))
	if b == nil {
		return nil
	}
	return &solutionWorkspace{b: b, ids: b.Bucket(bktSolByID), keys: b.Bucket(bktSolByKey), upd: b.Bucket(bktSolByUpd)}
}

// createSolutionWorkspace returns the workspace's buckets, creating them
// when missing.
func createSolutionWorkspace(root *bbolt.Bucket, workspace string) (*solutionWorkspace, error) {
	b, err := root.CreateBucketIfNotExists([]byte(workspace))
	if err != nil {
		return nil, err
	}
	for _, name := range [][]byte{bktSolByID, bktSolByKey, bktSolByUpd} {
		if _, err := b.CreateBucketIfNotExists(name); err != nil {
			return nil, err
		}
	}
	return openSolutionWorkspace(root, workspace), nil
}

func (ws *solutionWorkspace) count() uint64 {
	v := ws.b.Get(keyCount)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func (ws *solutionWorkspace) setCount(n uint64) error {
	return ws.b.Put(keyCount, binary.BigEndian.AppendUint64(nil, n))
}

// remove deletes old (stored with feed sequence oldSeq) from the workspace
// and records the deletion in feed.
func (ws *solutionWorkspace) remove(feed *bbolt.Bucket, workspace string, old *store.Solution, oldSeq uint64) error {
	if err := feed.Delete(seqKey(oldSeq)); err != nil {
		return err
	}
	seq, err := feed.NextSequence()
	if err != nil {
		return err
	}
	if err := feed.Put(seqKey(seq), feedEntry(true, workspace, old.ID)); err != nil {
		return err
	}
	if err := ws.keys.Delete([]byte(old.Key)); err != nil {
		return err
	}
	if err := ws.upd.Delete(retentionKey(old)); err != nil {
		return err
	}
	if n := ws.count(); n > 0 {
		if err := ws.setCount(n - 1); err != nil {
			return err
		}
	}
	return ws.ids.Delete([]byte(old.ID))
}

// doomed returns the retention keys of the solutions that retention
// removes from the workspace, in removal order: the unverified ones keyed
// before cut (nil: no age rule), then as many more as keep the workspace
// within maxPerWorkspace (0 or less: no cap). It stops after limit keys
// (negative: no limit). Keys are copies, valid after the transaction.
func (ws *solutionWorkspace) doomed(cut []byte, maxPerWorkspace, limit int) [][]byte {
	count := int(ws.count())
	var out [][]byte
	c := ws.upd.Cursor()
	for k, _ := c.First(); k != nil && len(out) != limit; k, _ = c.Next() {
		old := cut != nil && k[0] == 0 && bytes.Compare(k[1:1+8], cut) < 0
		over := maxPerWorkspace > 0 && count-len(out) > maxPerWorkspace
		if !old && !over {
			break
		}
		out = append(out, bytes.Clone(k))
	}
	return out
}

// retentionKey is s's key in the workspace's u bucket.
func retentionKey(s *store.Solution) []byte {
	k := make([]byte, 1, 1+8+len(s.ID))
	if s.Verified {
		k[0] = 1
	}
	k = append(k, timeKey(s.Updated)...)
	return append(k, s.ID...)
}

// migrateSolutions gives every workspace that lacks them (files written
// before retention) its retention index and its count, built from its
// solutions.
func migrateSolutions(tx *bbolt.Tx) error {
	root := tx.Bucket(bktSolutions)
	var stale [][]byte
	err := root.ForEachBucket(func(name []byte) error {
		if root.Bucket(name).Bucket(bktSolByUpd) == nil {
			stale = append(stale, bytes.Clone(name))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range stale {
		ws, err := createSolutionWorkspace(root, string(name))
		if err != nil {
			return err
		}
		n := uint64(0)
		err = ws.ids.ForEach(func(k, v []byte) error {
			s, _, err := decodeSolution(v)
			if err != nil {
				return fmt.Errorf("solution %s: %w", k, err)
			}
			n++
			return ws.upd.Put(retentionKey(&s), nil)
		})
		if err != nil {
			return fmt.Errorf("workspace %q: %w", name, err)
		}
		if err := ws.setCount(n); err != nil {
			return err
		}
	}
	return nil
}

// encodeSolution stores a solution as its feed sequence (8 bytes) + JSON.
// solutionRecord is a solution as stored: its JSON, with the embedding's
// model and values (stored.Vector, base64 in JSON) when it has one.
type solutionRecord struct {
	store.Solution
	EmbeddingModel string `json:"embedding_model,omitempty"`
	Embedding      []byte `json:"embedding,omitempty"`
}

func encodeSolution(s *store.Solution, seq uint64) ([]byte, error) {
	rec := solutionRecord{Solution: *s}
	if e := s.Embedding; e != nil {
		rec.EmbeddingModel, rec.Embedding = e.Model, stored.Vector(e.Vector)
	}
	j, err := json.Marshal(&rec)
	if err != nil {
		return nil, err
	}
	return append(seqKey(seq), j...), nil
}

func decodeSolution(v []byte) (store.Solution, uint64, error) {
	var rec solutionRecord
	if len(v) < 8 {
		return rec.Solution, 0, errCorrupt
	}
	if err := json.Unmarshal(v[8:], &rec); err != nil {
		return rec.Solution, 0, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	s := rec.Solution
	if rec.EmbeddingModel != "" {
		vec, ok := stored.ParseVector(rec.Embedding)
		if !ok || len(vec) == 0 {
			return s, 0, errCorrupt
		}
		s.Embedding = &store.Embedding{Model: rec.EmbeddingModel, Vector: vec}
	}
	return s, binary.BigEndian.Uint64(v), nil
}

// feedEntry encodes a change: a flag byte (1: deleted), the length-prefixed
// workspace, the ID.
func feedEntry(deleted bool, workspace, id string) []byte {
	flag := byte(0)
	if deleted {
		flag = 1
	}
	return append(lenPrefixed([]byte{flag}, workspace), id...)
}

func parseFeedEntry(v []byte) (deleted bool, workspace, id string, err error) {
	if len(v) < 1 || v[0] > 1 {
		return false, "", "", errCorrupt
	}
	n, k := binary.Uvarint(v[1:])
	if k <= 0 || n > uint64(len(v)-1-k) {
		return false, "", "", errCorrupt
	}
	rest := v[1+k:]
	return v[0] == 1, string(rest[:n]), string(rest[n:]), nil
}
