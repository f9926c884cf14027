package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.etcd.io/bbolt"
)

// The session index (a tenant's bucket "s": a session, then the key of one
// of its incidents in the time index) is written behind the incidents of
// a batch (AddIncidents). A batch appends its incidents to the time index,
// a page or two per commit, but each session's entries sit together, so
// its session entries touched a page per session: in a storm of failures
// across 32 conversations, 80 pages per commit of 40 incidents, against
// 17 when they share one conversation. A batch now stores its incidents
// and keeps their session entries in memory; one commit in many writes all
// that waits, when sessionBehindMax entries wait or the oldest has waited
// sessionBehindAge, and Close writes the rest.
//
// Readers by session (ListIncidents, SearchIncidents) merge what waits with
// what the index holds. A crash loses what waits, not the incidents: each
// tenant whose entries wait keeps keyBehind, the smallest time-index key
// whose entry may not be written, in the same commit as the incidents, and
// Open writes the entries of every incident from there on.

const (
	sessionBehindMax = 1024
	sessionBehindAge = time.Second
)

// keyBehind, in a tenant's bucket: see above.
var keyBehind = []byte("behind")

// behind holds the session entries written behind. Entries are added
// inside the transaction that stores their incidents (so a later
// transaction's snapshot holds every entry of the commits before it), in
// the order added, each with an id: a flush drops what its snapshot held.
// A batch whose commit fails leaves its entries: each is checked against
// the time index when written and when read (its incident there, of its
// session), and bbolt may have made a commit it reports failed visible.
type behind struct {
	mu    sync.Mutex
	seq   uint64
	lists map[string]*behindList // by the tenant's bucket name, then the length-prefixed session
	n     int
	first time.Time // when the oldest waiting entry was added
}

type behindList struct {
	tenant  []byte // the tenant's bucket name
	session string
	keys    []behindKey // in the order added
}

type behindKey struct {
	id  uint64
	key []byte
}

func behindName(tenant []byte, session string) string {
	return string(lenPrefixed(bytes.Clone(tenant), session))
}

// add keeps the session entry of the incident stored at key.
func (w *behind) add(tenant []byte, session string, key []byte, now time.Time) {
	name := behindName(tenant, session)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lists == nil {
		w.lists = make(map[string]*behindList)
	}
	l := w.lists[name]
	if l == nil {
		l = &behindList{tenant: bytes.Clone(tenant), session: session}
		w.lists[name] = l
	}
	w.seq++
	l.keys = append(l.keys, behindKey{id: w.seq, key: bytes.Clone(key)})
	if w.n == 0 {
		w.first = now
	}
	w.n++
}

// due reports whether the next batch should write what waits.
func (w *behind) due(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n >= sessionBehindMax || w.n > 0 && now.Sub(w.first) >= sessionBehindAge
}

// snapshot returns a copy of what waits and the id of the last entry in it.
func (w *behind) snapshot() (upto uint64, lists []behindList) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lists = make([]behindList, 0, len(w.lists))
	for _, l := range w.lists {
		lists = append(lists, behindList{tenant: l.tenant, session: l.session, keys: slices.Clone(l.keys)})
	}
	return w.seq, lists
}

// drop forgets the entries up to upto, written by a commit at now. What
// is left (added by commits after the flush began) is dated now.
func (w *behind) drop(upto uint64, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, l := range w.lists {
		i := 0
		for i < len(l.keys) && l.keys[i].id <= upto {
			i++
		}
		w.n -= i
		if i == len(l.keys) {
			delete(w.lists, name)
			continue
		}
		l.keys = slices.Delete(l.keys, 0, i)
	}
	w.first = time.Time{}
	if w.n > 0 {
		w.first = now
	}
}

// keys returns the keys waiting for the session of the tenant, newest
// first, each once (a key can wait twice: a tenant deleted and created
// again restarts its sequence).
func (w *behind) keys(tenant []byte, session string) [][]byte {
	w.mu.Lock()
	if w.n == 0 {
		w.mu.Unlock()
		return nil
	}
	l := w.lists[behindName(tenant, session)]
	var out [][]byte
	if l != nil {
		out = make([][]byte, len(l.keys))
		for i, k := range l.keys {
			out[i] = k.key
		}
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b []byte) int { return bytes.Compare(b, a) })
	return slices.CompactFunc(out, bytes.Equal)
}

// writeBehind writes, in tx, every session entry that waits, and clears
// the tenants' keyBehind. It returns the id to drop up to once tx commits.
// An entry whose incident is gone (retention removed it, or its tenant)
// is skipped.
func (b *Store) writeBehind(tx *bbolt.Tx) (uint64, error) {
	upto, lists := b.behind.snapshot()
	root := tx.Bucket(bktIncidents)
	for _, l := range lists {
		tb := root.Bucket(l.tenant)
		if tb == nil {
			continue
		}
		t := tenantOf(tb)
		prefix := lenPrefixed(nil, l.session)
		for _, k := range l.keys {
			if v := t.i.Get(k.key); v == nil || !sessionIs(v, l.session) {
				continue
			}
			if err := t.s.Put(append(prefix[:len(prefix):len(prefix)], k.key...), nil); err != nil {
				return 0, err
			}
		}
		if err := tb.Delete(keyBehind); err != nil {
			return 0, err
		}
	}
	return upto, nil
}

// noteBehind keeps in the tenant the smallest key whose session entry
// waits.
func (t *tenant) noteBehind(k []byte) error {
	if cur := t.b.Get(keyBehind); cur != nil && bytes.Compare(cur, k) <= 0 {
		return nil
	}
	return t.b.Put(keyBehind, k)
}

// recoverBehind writes, after a crash, the session entries of every
// incident from each tenant's keyBehind on.
func recoverBehind(tx *bbolt.Tx) error {
	root := tx.Bucket(bktIncidents)
	return root.ForEachBucket(func(name []byte) error {
		tb := root.Bucket(name)
		from := tb.Get(keyBehind)
		if from == nil {
			return nil
		}
		t := tenantOf(tb)
		c := t.i.Cursor()
		for k, v := c.Seek(bytes.Clone(from)); k != nil; k, v = c.Next() {
			// A malformed record gets no entry: reading it says it is
			// corrupt, where refusing to open would lose the whole file.
			s, ok := recordSession(v)
			if !ok || len(s) == 0 || !sessionKeyFits(string(s)) {
				continue
			}
			if err := t.s.Put(append(lenPrefixed(nil, string(s)), k...), nil); err != nil {
				return err
			}
		}
		return tb.Delete(keyBehind)
	})
}

// recordSession returns the Session of an incident record (appendIncident)
// without decoding the rest; false when the record is malformed.
func recordSession(v []byte) ([]byte, bool) {
	if len(v) == 0 || v[0] != incidentCodecV1 && v[0] != incidentCodecV2 {
		return nil, false
	}
	off := 1
	for i := 0; i < 4; i++ { // ID, Workspace, Project, Session
		n, k := binary.Uvarint(v[off:])
		if k <= 0 || n > uint64(len(v)-off-k) {
			return nil, false
		}
		if i == 3 {
			return v[off+k : off+k+int(n)], true
		}
		off += k + int(n)
	}
	return nil, false
}

// sessionIs reports whether the record v is an incident of session.
func sessionIs(v []byte, session string) bool {
	s, ok := recordSession(v)
	return ok && string(s) == session
}

// sessionKeyFits reports whether the session index can hold an entry of
// session: bbolt refuses a key over MaxKeySize.
func sessionKeyFits(session string) bool {
	var n [binary.MaxVarintLen64]byte
	return binary.PutUvarint(n[:], uint64(len(session)))+len(session)+16 <= bbolt.MaxKeySize
}

// sessionWalk walks the session's incidents in the time index, newest
// first, strictly before from when it is set: the session index's entries
// merged with those that wait (newest first, see behind.keys). A waiting
// entry whose incident is not in this transaction's view (its commit came
// later, or retention removed it) is skipped; an index entry without its
// incident is corrupt.
func sessionWalk(t *tenant, session string, from []byte, waiting [][]byte) func() (k, v []byte, err error) {
	prefix := lenPrefixed(nil, session)
	c := t.s.Cursor()
	var disk []byte // the index's current entry's incident key, nil when done
	started := false
	advance := func() {
		var k []byte
		if !started {
			started = true
			end := from
			if end == nil {
				end = bytes.Repeat([]byte{0xff}, 17)
			}
			if k, _ = c.Seek(append(bytes.Clone(prefix), end...)); k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev()
			}
		} else {
			k, _ = c.Prev()
		}
		disk = nil
		if k != nil && bytes.HasPrefix(k, prefix) {
			disk = k[len(prefix):]
		}
	}
	for len(waiting) > 0 && from != nil && bytes.Compare(waiting[0], from) >= 0 {
		waiting = waiting[1:]
	}
	advance()
	return func() ([]byte, []byte, error) {
		for {
			var w []byte
			if len(waiting) > 0 {
				w = waiting[0]
			}
			switch {
			case disk == nil && w == nil:
				return nil, nil, nil
			case w == nil || disk != nil && bytes.Compare(disk, w) >= 0:
				k := disk
				if w != nil && bytes.Equal(disk, w) {
					waiting = waiting[1:]
				}
				advance()
				v := t.i.Get(k)
				if v == nil {
					return nil, nil, errCorruptEntry(prefix, k)
				}
				return k, v, nil
			default:
				waiting = waiting[1:]
				v := t.i.Get(w)
				if v == nil {
					continue
				}
				if s, ok := recordSession(v); !ok {
					return nil, nil, fmt.Errorf("incident %x: %w", w, errCorrupt)
				} else if string(s) == session {
					return w, v, nil
				}
			}
		}
	}
}

func errCorruptEntry(prefix, k []byte) error {
	return fmt.Errorf("session index entry %x: %w", append(bytes.Clone(prefix), k...), errCorrupt)
}
