package proxy

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
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
// version (a new failure in, the oldest out), and a conversation's guard
// is that tally with the conversation's own failures added. In a storm,
// where every failure changes every conversation's counts, a request pays
// for the failures that are new, not for the whole window.

// guardWindow is a tenant's incidents inside the guard's window, oldest
// first, at most GuardReadLimit of them, and the tenant's pending
// failures.
type guardWindow struct {
	workspace, project string
	version            int64
	validUntil         time.Time // when the oldest incident read leaves the window
	// incidents may share its array with the windows that followed this
	// one (see with): never append to it elsewhere.
	incidents []store.Incident
	extended  bool        // a window followed this one by appending to its array; guarded by guardCache.mu
	others    int         // incidents that are not provider failures (at most this many, in a private window)
	full      bool        // the read hit its limit: older incidents of a conversation may be missing
	fixes     []store.Fix // the tenant's learned fixes, newest first, at most maxWindowFixes

	newest  time.Time       // of the incidents
	pending []*pendingWrite // held in incidents, not yet in the store at version
	span    time.Duration   // the guard's window
	limit   int             // the incidents a read returns at most (GuardReadLimit)
	own     *ownCache       // shared by the windows that followed one read

	mu    sync.Mutex
	convs map[string]guardResult // per conversation (and retirement), derived lazily
	prov  *providerTally         // the provider failures counted, derived lazily
	base  *guardWindow           // of a private window: the window it is a part of

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
	entries []guard.Entry
	block   wire.Block
}

// guardCache keeps the windows of the tenants in use, bounded by the
// incidents they hold in all, and the failures each tenant has pending.
type guardCache struct {
	mu       sync.Mutex
	max      int // incidents held in all
	held     int
	m        map[tenantKey]*guardWindow
	maxConvs int // conversations remembered per window

	// pending holds the provider failures of each tenant whose write has
	// not ended yet; never evicted (the writer's queue bounds it).
	pending map[tenantKey][]*pendingWrite
	// steps holds the last version steps of each tenant's writes and what
	// they stored, so that a window read while they committed catches up.
	steps map[tenantKey][]loggedStep
	// writing counts, per tenant, the batches of this replica being
	// committed: the store's version may have moved before their steps
	// reach the window.
	writing map[tenantKey]int
}

// loggedStep is one version step of this replica's writes and the
// incidents it stored in its tenant.
type loggedStep struct {
	from, to int64
	stored   []store.Incident
}

// maxLoggedSteps is how many steps of a tenant the cache remembers.
const maxLoggedSteps = 64

type tenantKey struct{ workspace, project string }

func newGuardCache(maxIncidents int) *guardCache {
	return &guardCache{max: maxIncidents, maxConvs: 1 << 12,
		m: make(map[tenantKey]*guardWindow), pending: make(map[tenantKey][]*pendingWrite),
		steps: make(map[tenantKey][]loggedStep), writing: make(map[tenantKey]int)}
}

func (c *guardCache) get(k tenantKey) *guardWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// current returns the tenant's window if it is the one at version or a
// later one (versions only grow: the version was read before the window
// followed a step), or if a batch of this replica is being committed for
// the tenant (its step brings the window to the store's version as soon
// as the commit returns; reading the store meanwhile would only race it).
func (c *guardCache) current(k tenantKey, version int64) *guardWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.m[k]
	if w == nil || (w.version < version && c.writing[k] == 0) {
		return nil
	}
	return w
}

// writingBatch notes that batch is being committed.
func (c *guardCache) writingBatch(batch []*pendingWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range batchTenants(batch) {
		c.writing[k]++
	}
}

func batchTenants(batch []*pendingWrite) []tenantKey {
	var ks []tenantKey
	for _, p := range batch {
		k := tenantKey{p.inc.Workspace, p.inc.Project}
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	return ks
}

func (c *guardCache) put(k tenantKey, w *guardWindow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, w)
}

func (c *guardCache) putLocked(k tenantKey, w *guardWindow) {
	if old := c.m[k]; old != nil {
		c.held -= len(old.incidents)
	}
	if c.held+len(w.incidents) > c.max {
		clear(c.m) // bounded; the next requests refill what is in use
		c.held = 0
	}
	c.m[k] = w
	c.held += len(w.incidents)
}

// maxWindowFixes bounds the learned fixes a guard window holds: the most
// recently updated ones.
const maxWindowFixes = 500

// addPending prepares inc for the store (store.PrepareIncident) as p's
// incident and shows it in its tenant's window until its write ends. It
// is dated now, under the cache's lock, unless it is dated later: this
// replica's failures reach the window in the order of their dates, and
// the window appends them instead of merging them in.
func (c *guardCache) addPending(p *pendingWrite, inc *store.Incident, now func() time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := now(); t.After(inc.Time) {
		inc.Time = t
	}
	if err := store.PrepareIncident(inc, inc.Time); err != nil {
		return err
	}
	p.inc = *inc
	k := tenantKey{p.inc.Workspace, p.inc.Project}
	c.pending[k] = append(c.pending[k], p)
	if w := c.m[k]; w != nil {
		c.putLocked(k, w.with([]store.Incident{p.inc}, w.version, append(slices.Clip(w.pending), p), false))
	}
	return nil
}

// dropPending takes p out of the pending set and of its tenant's window
// (its write failed, or never started).
func (c *guardCache) dropPending(p *pendingWrite) {
	k := tenantKey{p.inc.Workspace, p.inc.Project}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unpendLocked(k, p)
	if w := c.m[k]; w != nil && slices.Contains(w.pending, p) {
		c.putLocked(k, w.without(p))
	}
}

func (c *guardCache) unpendLocked(k tenantKey, p *pendingWrite) {
	ps := slices.DeleteFunc(c.pending[k], func(q *pendingWrite) bool { return q == p })
	if len(ps) == 0 {
		delete(c.pending, k)
	} else {
		c.pending[k] = ps
	}
}

// committed applies one batch of the writer to the windows: writes holds
// the batch's outcome (the records stored), steps the version steps it
// took. A window at a step's From moves to its To with the batch's stored
// incidents of its tenant (those it shows already stay); a failed write
// leaves the pending set and the windows that showed it.
func (c *guardCache) committed(batch []*pendingWrite, writes []store.IncidentWrite, steps []store.VersionStep) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range batchTenants(batch) {
		if c.writing[k]--; c.writing[k] <= 0 {
			delete(c.writing, k)
		}
	}
	for _, st := range steps {
		k := tenantKey{st.Workspace, st.Project}
		var stored []store.Incident
		for i := range batch {
			if in := writes[i].Incident; writes[i].Stored && in.Workspace == k.workspace && in.Project == k.project {
				stored = append(stored, *in)
			}
		}
		log := append(c.steps[k], loggedStep{from: st.From, to: st.To, stored: stored})
		if len(log) > maxLoggedSteps {
			log = slices.Delete(log, 0, len(log)-maxLoggedSteps)
		}
		c.steps[k] = log
		w := c.m[k]
		if w == nil || w.version != st.From {
			continue
		}
		var add []store.Incident
		pending := w.pending
		for i, p := range batch {
			if !writes[i].Stored || p.inc.Workspace != k.workspace || p.inc.Project != k.project {
				continue
			}
			if slices.Contains(pending, p) {
				pending = slices.DeleteFunc(slices.Clone(pending), func(q *pendingWrite) bool { return q == p })
				continue
			}
			add = append(add, *writes[i].Incident)
		}
		c.putLocked(k, w.with(add, st.To, pending, len(add) == 0))
	}
	for i, p := range batch {
		if !p.shown {
			continue
		}
		k := tenantKey{p.inc.Workspace, p.inc.Project}
		c.unpendLocked(k, p)
		if w := c.m[k]; w != nil && slices.Contains(w.pending, p) {
			if writes[i].Stored {
				// Stored, but its step could not be applied: the window
				// is behind the store and will be read again; until then
				// it keeps showing the incident.
				continue
			}
			c.putLocked(k, w.without(p))
		}
	}
}

// with returns a new window: w's incidents and add, oldest first (add
// after w's incidents of the same time, as the store lists a later
// write), at most limit of them (the newest), at version, holding
// pending. With same, w's incidents did not change: the guards derived
// from them are kept. New incidents usually are the newest: they are
// appended to w's array when w is the first window to follow it, so a
// window follows a storm of failures without copying its incidents for
// each; its provider failures' tally (see guardFor) follows them too.
// The cache's lock must be held.
func (w *guardWindow) with(add []store.Incident, version int64, pending []*pendingWrite, same bool) *guardWindow {
	n := &guardWindow{workspace: w.workspace, project: w.project, version: version,
		validUntil: w.validUntil, incidents: w.incidents, full: w.full, newest: w.newest, pending: pending,
		span: w.span, limit: w.limit, fixes: w.fixes, own: w.own, others: w.others}
	w.mu.Lock()
	prov := w.prov
	if same {
		n.convs = maps.Clone(w.convs)
	}
	w.mu.Unlock()
	if same || len(add) == 0 {
		n.prov = prov
		return n
	}
	// Later in the batch is newer at the same time.
	add = slices.Clone(add)
	slices.SortStableFunc(add, func(a, b store.Incident) int { return a.Time.Compare(b.Time) })
	old := w.incidents
	var incs []store.Incident
	switch {
	case len(old) > 0 && add[0].Time.Before(old[len(old)-1].Time):
		incs = make([]store.Incident, 0, len(old)+len(add))
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
	case !w.extended && cap(old)-len(old) >= len(add):
		incs = append(old, add...)
		w.extended = true
	default:
		incs = make([]store.Incident, len(old)+len(add), max(2*(len(old)+len(add)), 64))
		copy(incs, old)
		copy(incs[len(old):], add)
	}
	var trimmed []store.Incident
	if drop := len(incs) - w.limit; drop > 0 {
		trimmed, incs = incs[:drop], incs[drop:]
		n.full = true
	}
	w.own.add(add)
	n.incidents = incs
	n.others += others(add) - others(trimmed)
	for _, in := range add {
		if u := in.Time.Add(w.span); u.Before(n.validUntil) {
			n.validUntil = u
		}
		if in.Time.After(n.newest) {
			n.newest = in.Time
		}
	}
	if prov != nil {
		t := prov.t.Clone()
		for i := range add {
			if prov.counts(&add[i]) {
				t.Add(&add[i])
			}
		}
		for i := range trimmed {
			if prov.counts(&trimmed[i]) {
				t.Remove(&trimmed[i])
			}
		}
		n.prov = &providerTally{gen: prov.gen, recovered: prov.recovered, t: t}
		n.prov.renew(incs)
	}
	return n
}

// without returns a new window: w without p's incident.
func (w *guardWindow) without(p *pendingWrite) *guardWindow {
	n := &guardWindow{workspace: w.workspace, project: w.project, version: w.version,
		validUntil: w.validUntil, full: w.full, newest: w.newest, span: w.span, limit: w.limit, fixes: w.fixes, own: w.own,
		pending: slices.DeleteFunc(slices.Clone(w.pending), func(q *pendingWrite) bool { return q == p })}
	n.incidents = make([]store.Incident, 0, len(w.incidents))
	for _, in := range w.incidents {
		if in.ID != p.inc.ID {
			n.incidents = append(n.incidents, in)
		}
	}
	n.others = others(n.incidents)
	return n
}

// others counts the incidents of incs that are not provider failures.
func others(incs []store.Incident) int {
	n := 0
	for i := range incs {
		if !guard.ProviderFailure(incs[i].Type) {
			n++
		}
	}
	return n
}

// guardWindow returns the tenant's incidents inside the window at now,
// from the cache when the store's version has not moved.
func (s *Server) guardWindow(ctx context.Context, workspace, project string, now time.Time) (*guardWindow, error) {
	w, _, err := s.window(ctx, workspace, project, now, nil)
	return w, err
}

// requestWindow returns the window of a request that arrived at arrived,
// and the time its guard is derived at: arrived, or, when the window
// holds incidents dated later (failures this replica recorded while the
// request's body and its version read were under way: in a storm, most of
// them), the time the window was taken. The guard a request gets is the
// tenant's when it is derived, so it shows those failures too.
func (s *Server) requestWindow(ctx context.Context, workspace, project string, arrived time.Time) (*guardWindow, time.Time, error) {
	return s.window(ctx, workspace, project, arrived, s.opts.Now)
}

// window returns the tenant's incidents inside the window at now (see
// guardWindow), and now. With a clock, a window holding incidents newer
// than now reads it again: the window is the one at the later time, if
// the clock is later (see requestWindow).
func (s *Server) window(ctx context.Context, workspace, project string, now time.Time, clock func() time.Time) (*guardWindow, time.Time, error) {
	version, err := s.store.IncidentVersion(ctx, workspace, project)
	if err != nil {
		return nil, now, err
	}
	// at returns w as a request at now sees it. An incident newer than
	// now (recorded while the request's body arrived, or dated by another
	// replica's clock) is not in its guard: what it derives from the
	// window's incidents up to now is its own, not the window's.
	at := func(w *guardWindow) (*guardWindow, time.Time, error) {
		if now.Before(w.newest) && clock != nil {
			if t := clock(); t.After(now) {
				now, clock = t, nil
			}
		}
		if now.Before(w.newest) {
			return w.private(now), now, nil
		}
		return w, now, nil
	}
	k := tenantKey{workspace, project}
	if w := s.guardCache.current(k, version); w != nil && now.Before(w.validUntil) {
		if w, t, err := at(w); t.Before(w.validUntil) {
			return w, t, err
		}
	}
	window := s.guard.Window()
	incs, err := s.store.ListIncidents(ctx, store.IncidentQuery{
		Workspace: workspace, Project: project, Since: now.Add(-window), Limit: s.opts.GuardReadLimit,
	})
	if err != nil {
		return nil, now, err
	}
	slices.Reverse(incs) // oldest first
	fixes, err := s.store.ListFixes(ctx, store.FixQuery{Workspace: workspace, Project: project, Limit: maxWindowFixes})
	if err != nil {
		return nil, now, err
	}
	w := &guardWindow{workspace: workspace, project: project, version: version, incidents: incs, fixes: fixes, others: others(incs),
		full: len(incs) >= s.opts.GuardReadLimit, validUntil: validUntil(incs, now, window),
		span: window, limit: s.opts.GuardReadLimit, own: &ownCache{}}
	for _, in := range incs {
		if in.Time.After(w.newest) {
			w.newest = in.Time
		}
	}
	c := s.guardCache
	c.mu.Lock()
	defer c.mu.Unlock()
	// Steps of this replica's writes that committed from the version read
	// on (while the read went on): the window catches up with them.
	for caught := true; caught; {
		caught = false
		for _, st := range c.steps[k] {
			if st.from != w.version {
				continue
			}
			have := make(map[string]bool, len(w.incidents))
			for _, in := range w.incidents {
				have[in.ID] = true
			}
			add := slices.DeleteFunc(slices.Clone(st.stored), func(in store.Incident) bool { return have[in.ID] })
			w = w.with(add, st.to, nil, len(add) == 0)
			caught = true
			break
		}
	}
	if old := c.m[k]; old != nil && old.version > w.version {
		// A window that followed newer writes stays (versions only grow).
		return at(w)
	}
	if ps := c.pending[k]; len(ps) > 0 {
		// The tenant's pending failures not in the read (their commit
		// may have come first).
		have := make(map[string]bool, len(incs))
		for _, in := range incs {
			have[in.ID] = true
		}
		var add []store.Incident
		var shown []*pendingWrite
		for _, p := range ps {
			if !have[p.inc.ID] {
				add = append(add, p.inc)
				shown = append(shown, p)
			}
		}
		w = w.with(add, w.version, shown, false)
	}
	c.putLocked(k, w)
	return at(w)
}

// ownCache keeps, per conversation, its own incidents that are not
// provider failures, read when its tenant's window is full (see
// guardFor), for the windows that followed one read of the store. A step
// adds the new tool failures of the conversations it holds; a new read of
// the window starts a new cache. Provider failures, which guardFor takes
// from the window, are not kept: a storm of them changes nothing here.
type ownCache struct {
	mu   sync.Mutex
	m    map[string][]store.Incident // newest first
	held int
	adds int64 // moves with every add: a read that began before one is not kept
}

// maxOwnHeld bounds the incidents an ownCache holds in all.
const maxOwnHeld = 1 << 16

func (o *ownCache) get(conversation string) ([]store.Incident, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	incs, ok := o.m[conversation]
	return incs, ok
}

func (o *ownCache) gen() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.adds
}

// put keeps what a read that began at gen returned, unless an add came
// since.
func (o *ownCache) put(conversation string, incs []store.Incident, gen int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.adds != gen {
		return
	}
	if o.m == nil || o.held+len(incs) > maxOwnHeld {
		o.m, o.held = make(map[string][]store.Incident), 0
	}
	o.m[conversation] = incs
	o.held += len(incs)
}

// add puts the incidents of add that are not provider failures in front of
// their conversation's (newest first, in add's order: add is sorted).
func (o *ownCache) add(add []store.Incident) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := len(add) - 1; i >= 0; i-- {
		in := add[i]
		if in.Session == "" || guard.ProviderFailure(in.Type) {
			continue
		}
		o.adds++
		if old, ok := o.m[in.Session]; ok {
			k := 0
			for k < len(old) && old[k].Time.After(in.Time) {
				k++
			}
			o.m[in.Session] = slices.Insert(slices.Clip(old), k, in)
			o.held++
		}
	}
}

// ownIncidents returns a conversation's incidents that are not provider
// failures, from the window's cache or read within budget: what guardFor
// adds to a full window.
func (s *Server) ownIncidents(budget *storeBudget, w *guardWindow, conversation string, now time.Time) ([]store.Incident, error) {
	var gen int64
	if w.own != nil {
		if incs, ok := w.own.get(conversation); ok {
			return incs, nil
		}
		gen = w.own.gen()
	}
	read, err := s.store.ListIncidents(budget.context(), store.IncidentQuery{
		Workspace: w.workspace, Project: w.project, Session: conversation,
		Since: now.Add(-s.guard.Window()), Limit: s.opts.GuardReadLimit,
	})
	if err != nil {
		return nil, err
	}
	own := slices.DeleteFunc(read, func(in store.Incident) bool { return guard.ProviderFailure(in.Type) })
	if w.own != nil {
		w.own.put(conversation, own, gen)
	}
	return own, nil
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
		span: w.span, limit: w.limit, fixes: w.fixes, own: w.own, base: w, others: w.others}
	if k > 0 {
		n.newest = w.incidents[k-1].Time
	}
	return n
}

// providerTally counts the provider failures of a window that are not
// retired by the tenant's recoveries of generation gen.
type providerTally struct {
	gen       int64
	recovered map[string]time.Time
	t         *guard.Tally
}

// counts reports whether in is a provider failure the tally counts: one
// newer than its provider's latest recovery.
func (p *providerTally) counts(in *store.Incident) bool {
	if !guard.ProviderFailure(in.Type) {
		return false
	}
	at, ok := p.recovered[in.Provider]
	return !ok || in.Time.After(at)
}

// renew finds the newest member of the groups a removal left without one,
// among incs (those the tally counts).
func (p *providerTally) renew(incs []store.Incident) {
	if !p.t.Stale() {
		return
	}
	p.t.Renew(func(yield func(*store.Incident) bool) {
		for i := range incs {
			if p.counts(&incs[i]) && !yield(&incs[i]) {
				return
			}
		}
	})
}

// providerTally returns the tally of w's provider failures that the
// tenant's recoveries (of generation gen) leave in the guard: counted once
// per window and generation, and carried from window to window by with.
// A private window takes its base's and takes out what it does not hold.
func (w *guardWindow) providerTally(g *guard.Guard, gen int64, recovered map[string]time.Time) *guard.Tally {
	var base *guard.Tally
	if w.base != nil {
		base = w.base.providerTally(g, gen, recovered)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.prov != nil && w.prov.gen == gen {
		return w.prov.t
	}
	p := &providerTally{gen: gen, recovered: recovered}
	if base != nil {
		p.t = base.Clone()
		later := w.base.incidents[len(w.incidents):]
		for i := range later {
			if p.counts(&later[i]) {
				p.t.Remove(&later[i])
			}
		}
		p.renew(w.incidents)
	} else {
		p.t = g.NewTally()
		for i := range w.incidents {
			if p.counts(&w.incidents[i]) {
				p.t.Add(&w.incidents[i])
			}
		}
	}
	w.prov = p
	return p.t
}

// guardFor returns the guard of a conversation ("" for requests that
// belong to none) in the tenant's window: its repeated failures and
// their block, minus those the agent has since overcome (retired):
//   - the failures of a tool whose latest result in the conversation
//     (tallies, wire.Info.Tallies) succeeded;
//   - a provider's failures older than its latest good answer on this
//     replica (see providerAnswered).
//
// The incidents stay stored; only the guard forgets them. When the
// window's read hit its limit, the conversation's own incidents are read
// too, so a busy tenant does not crowd them out. That read is made within
// budget, which starts only then.
func (s *Server) guardFor(budget *storeBudget, w *guardWindow, conversation string, tallies []wire.ToolTally, now time.Time) ([]guard.Entry, wire.Block, error) {
	var overcome []string // tools whose latest result succeeded
	for _, t := range tallies {
		if !t.LastFailed && t.Name != "" {
			overcome = append(overcome, t.Name)
		}
	}
	slices.Sort(overcome)
	gen, recovered := s.recovered.of(tenantKey{w.workspace, w.project})
	ck := conversation + "\x00" + strings.Join(overcome, "\x00") + "\x00" + strconv.FormatInt(gen, 10)
	w.mu.Lock()
	r, ok := w.convs[ck]
	w.mu.Unlock()
	if ok {
		return r.entries, r.block, nil
	}
	// The provider failures come counted with the window; the
	// conversation's own failures are counted on top of them.
	t := w.providerTally(s.guard, gen, recovered)
	lo := now.Add(-s.guard.Window())
	mine := func(in *store.Incident) bool {
		if in.Type == store.TypeLoop || guard.ProviderFailure(in.Type) || in.Session != conversation ||
			in.Time.Before(lo) || in.Time.After(now) {
			return false
		}
		_, retired := slices.BinarySearch(overcome, guard.ToolOf(in))
		return !retired
	}
	var own []*store.Incident
	for i := 0; i < len(w.incidents) && w.others > 0; i++ {
		if in := &w.incidents[i]; mine(in) {
			own = append(own, in)
		}
	}
	if w.full && conversation != "" {
		read, err := s.ownIncidents(budget, w, conversation, now)
		if err != nil {
			return nil, wire.Block{}, err
		}
		seen := make(map[string]bool, len(own))
		for _, in := range own {
			seen[in.ID] = true
		}
		for i := range read {
			if in := &read[i]; !seen[in.ID] && mine(in) {
				own = append(own, in)
			}
		}
	}
	if len(own) > 0 {
		t = t.Clone()
		for _, in := range own {
			t.Add(in)
		}
	}
	entries := s.withFixes(t.Entries(1), w.fixes)
	r = guardResult{entries: entries, block: wire.NewBlock(guard.Block(entries))}
	w.mu.Lock()
	if w.convs == nil || len(w.convs) >= s.guardCache.maxConvs {
		w.convs = make(map[string]guardResult)
	}
	w.convs[ck] = r
	w.mu.Unlock()
	return r.entries, r.block, nil
}

// recoveries says, per tenant, when each provider last answered well
// after failing; gen changes with every mark, so guards derived before
// it are not reused. Generations are never reused, not even after the
// map is cleared.
type recoveries struct {
	mu   sync.Mutex
	m    map[tenantKey]recovery
	last int64 // the last generation given
}

type recovery struct {
	gen int64
	at  map[string]time.Time // provider -> time; never modified once shared (copy on write)
}

func newRecoveries() *recoveries { return &recoveries{m: make(map[tenantKey]recovery)} }

// of returns the tenant's generation and recoveries (read only).
func (r *recoveries) of(k tenantKey) (int64, map[string]time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc := r.m[k]
	return rc.gen, rc.at
}

// mark notes that provider answered well at now.
func (r *recoveries) mark(k tenantKey, provider string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) >= 1<<14 {
		clear(r.m) // bounded; a forgotten recovery only leaves an entry in the guard
	}
	rc := r.m[k]
	at := make(map[string]time.Time, len(rc.at)+1)
	maps.Copy(at, rc.at)
	at[provider] = now
	r.last++
	r.m[k] = recovery{gen: r.last, at: at}
}

// providerAnswered notes a good answer of a provider: its failures in the
// tenant's window that came before it leave the guard (they are retired
// on this replica; other replicas retire them on their own good answers).
// It costs a map lookup unless the provider has failed since it last
// answered well.
func (s *Server) providerAnswered(x *exchange, provider string) {
	if x.win == nil {
		return
	}
	failed, ok := x.win.lastFailure(provider)
	if !ok {
		return
	}
	k := tenantKey{x.tenant.Workspace, x.tenant.Project}
	if _, at := s.recovered.of(k); !at[provider].Before(failed) {
		return
	}
	s.recovered.mark(k, provider, s.opts.Now())
}

// guardEntries returns the guard of a conversation of a tenant at now, as
// its next request would get it: the entries and the text of the blocks
// (the STOP block, when the conversation's loop reached that level on
// this replica, then the guard block), and the loop.
func (s *Server) guardEntries(ctx context.Context, workspace, project, conversation string, now time.Time) ([]guard.Entry, string, guard.Loop, error) {
	w, err := s.guardWindow(ctx, workspace, project, now)
	if err != nil {
		return nil, "", guard.Loop{}, err
	}
	budget := storeBudget{ctx: ctx}
	entries, block, err := s.guardFor(&budget, w, conversation, nil, now)
	if err != nil {
		return nil, "", guard.Loop{}, err
	}
	var loop guard.Loop
	if conversation != "" {
		loop = s.loops.peek(convRef{workspace, project, conversation})
	}
	if loop.Level == guard.LevelNone {
		return entries, block.Text, loop, nil
	}
	entries, block, stop := s.loops.render(convRef{workspace, project, conversation}, loop, entries, block)
	return entries, stop.Text + block.Text, loop, nil
}

// recallCache keeps the recall of each (tenant, goal, conversation) with
// the recall index version it was computed from: the query of a
// conversation is its first user message, the same on every turn.
type recallCache struct {
	mu  sync.Mutex
	max int
	m   map[recallKey]recallResult
}

// recallKey names a conversation by its key, a hash of its first messages
// (goal included): a goal of kilobytes is not kept as a map key.
type recallKey struct{ workspace, project, conversation string }

type recallResult struct {
	version int64
	matches []recall.Match
	block   wire.Block
}

func newRecallCache(max int) *recallCache {
	return &recallCache{max: max, m: make(map[recallKey]recallResult)}
}

// recallFor returns the matches of a conversation's goal and their block;
// conversation is its key (recall.ConversationKey), never recalled itself.
func (s *Server) recallFor(workspace, project, goal, conversation string) ([]recall.Match, wire.Block) {
	version := s.indexVersion.Load()
	k := recallKey{workspace, project, conversation}
	c := s.recallCache
	c.mu.Lock()
	r, ok := c.m[k]
	c.mu.Unlock()
	if ok && r.version == version {
		return r.matches, r.block
	}
	matches := s.index.Search(recall.Query{
		Workspace: workspace, Project: project, Goal: goal,
		K: s.recall.MaxResults, MinSimilarity: s.recall.MinSimilarity, ExcludeKey: conversation,
	})
	r = recallResult{version: version, matches: matches, block: wire.NewBlock(recall.Block(matches))}
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = r
	c.mu.Unlock()
	return r.matches, r.block
}
