package memory

import (
	"maps"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// The guard of a request is computed from its tenant's incidents inside
// the guard's window: tool failures of its own conversation, and provider
// failures of every conversation (they hit all of them alike, and count
// per provider). Both come from one read of the tenant's window, which
// does not depend on the request's body: it is made while the body
// arrives, and kept, with the store's incident version it was read at,
// until the version moves or its oldest incident leaves the window. Every
// request asks the store for the version (a map or primary-key lookup);
// each conversation's entries are derived from the window once per
// version. Windows and entries are shared: never modify them.
//
// The window follows this replica's own writes without reading again:
// the incident writer (writer.go) reports the version step each batch
// took (store.VersionStep), and a window held at the step's From gets the
// batch's incidents and the step's To. A step from another version (a
// write of another replica, a deletion, a prune) leaves the window behind
// the store's version: the next request reads it again, so replicas
// converge through the store.
//
// A provider failure this replica recorded is in the window from the
// moment it was observed (the pending set), before its write commits:
// the window holds it beside the store's incidents, and its commit only
// moves the version. A write that fails takes it out again.
//
// Deriving a guard does not run guard.Detect over the window: the
// window's provider failures, which every conversation shares, are
// counted by a guard.Tally that follows the window from version to
// version (a new failure in, the oldest out). A conversation's own
// failures are found once per window lineage and then follow it the same
// way (convFailures: a new failure of the conversation in, classified
// once), with the counts of the last turns, which a turn that only adds
// failures extends. The two count no group in common: a conversation's
// guard merges their entries. In a storm, where every failure changes
// every conversation's counts, a request pays for the failures that are
// new, not for the whole window; in a long conversation, for its own
// failures that are new.

// guardWindow is a tenant's incidents inside the guard's window, oldest
// first, at most GuardReadLimit of them, and the tenant's pending
// failures.
type guardWindow struct {
	workspace, project string
	version            int64
	validUntil         time.Time // when the oldest incident read leaves the window
	// incidents may share its array with the windows that followed this
	// one (see with): never append to it elsewhere.
	incidents     []store.Incident
	extended      bool        // a window followed this one by appending to its array; guarded by guardCache.mu
	convIncidents int         // incidents of conversations, not provider failures (at most this many, in a private window)
	full          bool        // the read hit its limit: older incidents of a conversation may be missing
	fixes         []store.Fix // the tenant's learned fixes, newest first, at most maxWindowFixes
	bytes         int64       // of the incidents and fixes (incidentBytes, fixBytes)

	newest time.Time // of the incidents
	// pending are held in incidents, not yet in the store at version. The
	// array may be shared, as incidents' is (see pendingWith).
	pending         []*pendingWrite
	pendingExtended bool          // a window followed this one by appending to its pending array; guarded by guardCache.mu
	g               *guard.Guard  // the guard the window was read under, that derives its guards
	span            time.Duration // g's window
	limit           int           // the incidents a read returns at most (GuardReadLimit)
	own             *ownCache     // shared by the windows that followed one read

	mu           sync.Mutex
	convs        map[string]*guardResult // per conversation (and retirement), derived lazily; never changed once kept
	derivedBytes int64                   // of convs (resultBytes)
	owns         *ownSet                 // the conversations' own failures (convFailures)
	prov         *providerTally          // the provider failures counted, derived lazily
	base         *guardWindow            // of a private window: the window it is a part of

	lastFailOnce sync.Once
	lastFail     map[string]time.Time // provider -> its newest failure in the window
}

// lastFailure returns when the provider last failed in the window.
func (w *guardWindow) lastFailure(provider string) (time.Time, bool) {
	w.lastFailOnce.Do(func() {
		for _, in := range w.incidents {
			if guard.ProviderFailure(in.Type) && in.Time.After(w.lastFail[in.Provider]) {
				if w.lastFail == nil {
					w.lastFail = make(map[string]time.Time)
				}
				w.lastFail[in.Provider] = in.Time
			}
		}
	})
	t, ok := w.lastFail[provider]
	return t, ok
}

type guardResult struct {
	conversation string // whose guard it is
	entries      []guard.Entry
	block        wire.Block
	size         int64 // resultBytes, set when kept
}

// with returns a new window: w's incidents and add, oldest first (add
// after w's incidents of the same time, as the store lists a later
// write), at most limit of them (the newest), at version, holding
// pending. With same, w's incidents did not change: the guards derived
// from them are kept. New incidents usually are the newest: they are
// appended to w's array when w is the first window to follow it, so a
// window follows a storm of failures without copying its incidents for
// each; its provider failures' tally (see guardFor) follows them too.
// with takes add (it sorts it). The cache's lock must be held.
func (w *guardWindow) with(add []store.Incident, version int64, pending []*pendingWrite, same bool) *guardWindow {
	n := &guardWindow{workspace: w.workspace, project: w.project, version: version,
		validUntil: w.validUntil, incidents: w.incidents, full: w.full, newest: w.newest, pending: pending,
		g: w.g, span: w.span, limit: w.limit, fixes: w.fixes, own: w.own, convIncidents: w.convIncidents, bytes: w.bytes}
	w.mu.Lock()
	prov, owns := w.prov, w.owns
	if same {
		n.convs, n.derivedBytes = maps.Clone(w.convs), w.derivedBytes
		n.owns = w.owns
	}
	w.mu.Unlock()
	if same || len(add) == 0 {
		n.prov = prov
		return n
	}
	// Later in the batch is newer at the same time.
	slices.SortStableFunc(add, func(a, b store.Incident) int { return a.Time.Compare(b.Time) })
	incs := w.joined(add)
	var trimmed []store.Incident
	if drop := len(incs) - w.limit; drop > 0 {
		trimmed, incs = incs[:drop], incs[drop:]
		n.full = true
	}
	w.own.add(add)
	n.incidents = incs
	n.convIncidents += countConvIncidents(add) - countConvIncidents(trimmed)
	n.bytes += incidentsBytes(add) - incidentsBytes(trimmed)
	for _, in := range add {
		if u := in.Time.Add(w.span); u.Before(n.validUntil) {
			n.validUntil = u
		}
		if in.Time.After(n.newest) {
			n.newest = in.Time
		}
	}
	if prov != nil {
		n.prov = prov.followed(add, trimmed, incs)
	}
	n.convs, n.derivedBytes = w.carried(add, trimmed, n.full)
	if n.full == w.full {
		n.owns = owns.followed(add, trimmed)
	}
	return n
}

// carried returns the guards derived from w that a window following it
// with add, and without trimmed, keeps. A conversation's guard is its own
// failures and the window's provider failures: the guards of the
// conversations add and trimmed do not touch stay, unless a provider
// failure came or went, or the window became full (convFailures then
// reads a conversation's own incidents from the store).
func (w *guardWindow) carried(add, trimmed []store.Incident, full bool) (map[string]*guardResult, int64) {
	if full != w.full {
		return nil, 0
	}
	touched := make(map[string]bool)
	for _, incs := range [2][]store.Incident{add, trimmed} {
		for i := range incs {
			if guard.ProviderFailure(incs[i].Type) {
				return nil, 0
			}
			touched[incs[i].Session] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.convs) == 0 {
		return nil, 0
	}
	convs := make(map[string]*guardResult, len(w.convs))
	var n int64
	for ck, r := range w.convs {
		if !touched[r.conversation] {
			convs[ck] = r
			n += r.size
		}
	}
	return convs, n
}

// joined returns w's incidents and add (sorted), oldest first: add
// appended to w's array when w is the first window to extend it and it
// has room, merged in when add holds incidents older than w's newest,
// copied to a new array otherwise.
func (w *guardWindow) joined(add []store.Incident) []store.Incident {
	old := w.incidents
	switch {
	case len(old) > 0 && add[0].Time.Before(old[len(old)-1].Time):
		incs := make([]store.Incident, 0, len(old)+len(add))
		i, j := 0, 0
		for i < len(add) || j < len(old) {
			if i == len(add) || (j < len(old) && !add[i].Time.Before(old[j].Time)) {
				incs = append(incs, old[j])
				j++
			} else {
				incs = append(incs, add[i])
				i++
			}
		}
		return incs
	case !w.extended && cap(old)-len(old) >= len(add):
		w.extended = true
		return append(old, add...)
	default:
		incs := make([]store.Incident, len(old)+len(add), max(2*(len(old)+len(add)), 64))
		copy(incs, old)
		copy(incs[len(old):], add)
		return incs
	}
}

// pendingWith returns w's pending writes and p: appended to w's array
// when w is the first window to follow it so and the array has room (a
// storm's windows follow one another without copying the list for each
// failure), else in an array of their own. The cache's lock must be held.
func (w *guardWindow) pendingWith(p *pendingWrite) []*pendingWrite {
	old := w.pending
	if !w.pendingExtended && cap(old) > len(old) {
		w.pendingExtended = true
		return append(old, p)
	}
	ps := make([]*pendingWrite, len(old)+1, max(2*(len(old)+1), 16))
	copy(ps, old)
	ps[len(old)] = p
	return ps
}

// without returns a new window: w without p's incident.
func (w *guardWindow) without(p *pendingWrite) *guardWindow {
	n := &guardWindow{workspace: w.workspace, project: w.project, version: w.version,
		validUntil: w.validUntil, full: w.full, newest: w.newest, g: w.g, span: w.span, limit: w.limit, fixes: w.fixes, own: w.own,
		pending: slices.DeleteFunc(slices.Clone(w.pending), func(q *pendingWrite) bool { return q == p })}
	n.incidents = make([]store.Incident, 0, len(w.incidents))
	for _, in := range w.incidents {
		if in.ID != p.inc.ID {
			n.incidents = append(n.incidents, in)
		}
	}
	n.convIncidents = countConvIncidents(n.incidents)
	n.bytes = incidentsBytes(n.incidents) + fixesBytes(n.fixes)
	return n
}

// The bytes a guard window's parts hold: their strings, and a share for
// their structures and the maps that find them.
const (
	incidentOverhead = int64(unsafe.Sizeof(store.Incident{})) + 32
	fixOverhead      = int64(unsafe.Sizeof(store.Fix{})) + 32
	resultOverhead   = 256
)

func incidentsBytes(incs []store.Incident) int64 {
	var n int64
	for i := range incs {
		in := &incs[i]
		n += incidentOverhead + int64(len(in.ID)+len(in.Workspace)+len(in.Project)+len(in.Session)+len(in.Agent)+
			len(in.Provider)+len(in.Model)+len(in.Type)+len(in.Code)+len(in.Message)+len(in.Fingerprint))
	}
	return n
}

func fixesBytes(fixes []store.Fix) int64 {
	var n int64
	for i := range fixes {
		f := &fixes[i]
		n += fixOverhead + int64(len(f.ID)+len(f.Workspace)+len(f.Project)+len(f.Key)+len(f.Pattern)+len(f.Fingerprint)+
			len(f.Tool)+len(f.Failure)+len(f.Call)+len(f.Explanation)+len(f.Session))
		if f.Wrong != nil {
			n += int64(len(f.Wrong.Note)) + 32
		}
	}
	return n
}

// resultBytes is what a derived guard holds: its block and entries.
func resultBytes(ck string, r guardResult) int64 {
	n := resultOverhead + int64(len(ck)+len(r.block.Text)+len(r.block.JSON))
	for _, e := range r.entries {
		n += int64(unsafe.Sizeof(e)) + int64(len(e.Pattern)+len(e.Hint)+len(e.Example)+len(e.Provider)+len(e.Fingerprint)+len(e.Call))
		for _, t := range e.Tools {
			n += 16 + int64(len(t))
		}
		if e.Fixed != nil {
			n += int64(unsafe.Sizeof(*e.Fixed)) + int64(len(e.Fixed.Tool)+len(e.Fixed.Call)+len(e.Fixed.Note))
		}
	}
	return n
}

// countConvIncidents counts the incidents of incs that are not provider failures.
func countConvIncidents(incs []store.Incident) int {
	n := 0
	for i := range incs {
		if !guard.ProviderFailure(incs[i].Type) {
			n++
		}
	}
	return n
}

// validUntil is when the oldest of incs leaves the window; newer ones
// only arrive with a new version. An incident newer than now (recorded
// while the read went on, or dated by another replica's clock) is kept:
// a request older than the window's newest incident derives its guard on
// its own (see guardWindow), so it never enters a guard too early.
func validUntil(incs []store.Incident, now time.Time, window time.Duration) time.Time {
	until := now.Add(window)
	for _, in := range incs {
		if u := in.Time.Add(window); u.Before(until) {
			until = u
		}
	}
	return until
}

// private returns a window for a request older than w's newest incident
// (recorded while its body arrived, or dated by another replica's clock):
// w's incidents up to now, whose derived guards are its own.
func (w *guardWindow) private(now time.Time) *guardWindow {
	// The incidents are in time order: those up to now are a prefix.
	k, _ := slices.BinarySearchFunc(w.incidents, now, func(in store.Incident, now time.Time) int {
		if in.Time.After(now) {
			return 1
		}
		return -1
	})
	n := &guardWindow{workspace: w.workspace, project: w.project, version: w.version,
		validUntil: w.validUntil, incidents: w.incidents[:k:k], full: w.full, pending: w.pending,
		g: w.g, span: w.span, limit: w.limit, fixes: w.fixes, own: w.own, base: w, convIncidents: w.convIncidents}
	if k > 0 {
		n.newest = w.incidents[k-1].Time
	}
	return n
}
