package memory

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/store"
)

// guardCache keeps the windows of the tenants in use, bounded by the
// bytes they hold in all (their incidents, fixes, derived guards and own
// caches: the least recently used tenants' go first), and the failures
// each tenant has pending.
type guardCache struct {
	mu       sync.Mutex
	maxBytes int64
	held     int64                // bytes, the sum of counted
	counted  map[tenantKey]int64  // each window's bytes (windowBytes), as last counted
	used     map[tenantKey]uint64 // when each window was last used, in ticks
	tick     uint64
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

func newGuardCache(maxBytes int64) *guardCache {
	return &guardCache{maxBytes: maxBytes, maxConvs: 1 << 12,
		counted: make(map[tenantKey]int64), used: make(map[tenantKey]uint64),
		m: make(map[tenantKey]*guardWindow), pending: make(map[tenantKey][]*pendingWrite),
		steps: make(map[tenantKey][]loggedStep), writing: make(map[tenantKey]int)}
}

// current returns the tenant's window if it was read under guard g (a
// window read under another guard counted by other rules) and is the one
// at version or a later one (versions only grow: the version was read before the window
// followed a step), or if a batch of this replica is being committed for
// the tenant (its step brings the window to the store's version as soon
// as the commit returns; reading the store meanwhile would only race it).
func (c *guardCache) current(k tenantKey, version int64, g *guard.Guard) *guardWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.m[k]
	if w == nil || w.g != g || (w.version < version && c.writing[k] == 0) {
		return nil
	}
	c.tick++
	c.used[k] = c.tick
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

func (c *guardCache) putLocked(k tenantKey, w *guardWindow) {
	c.m[k] = w
	c.tick++
	c.used[k] = c.tick
	c.countLocked(k, w)
}

// windowOverhead is what a window holds besides its parts.
const windowOverhead = 1 << 10

// windowBytes is what w holds: its incidents and fixes, the guards
// derived from it, and its conversations' own incidents.
func windowBytes(w *guardWindow) int64 {
	return windowOverhead + w.bytes + w.derivedSize() + w.own.bytes()
}

// recount counts again the bytes of k's window w, which grew (a guard
// derived, a conversation's incidents read), unless w is no longer k's.
func (c *guardCache) recount(k tenantKey, w *guardWindow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[k] == w {
		c.countLocked(k, w)
	}
}

// countLocked counts the bytes of k's window w, and when the cache holds
// more than its budget lets the least recently used windows go (never w)
// until it holds three quarters of it: the next requests of their
// tenants read them again. w stays: its parts are bounded on their own
// (GuardReadLimit incidents, maxWindowFixes fixes, an eighth of the
// budget each for the derived guards and the own incidents).
func (c *guardCache) countLocked(k tenantKey, w *guardWindow) {
	n := windowBytes(w)
	c.held += n - c.counted[k]
	c.counted[k] = n
	if c.held <= c.maxBytes {
		return
	}
	keys := make([]tenantKey, 0, len(c.m))
	for o := range c.m {
		if o != k {
			keys = append(keys, o)
		}
	}
	slices.SortFunc(keys, func(a, b tenantKey) int { return cmp.Compare(c.used[a], c.used[b]) })
	for _, o := range keys {
		if c.held <= c.maxBytes*3/4 {
			break
		}
		c.held -= c.counted[o]
		delete(c.m, o)
		delete(c.counted, o)
		delete(c.used, o)
	}
}

// bytes returns the bytes the cache's windows hold.
func (c *guardCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.held
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
		c.putLocked(k, w.with([]store.Incident{p.inc}, w.version, w.pendingWith(p), false))
	}
	return nil
}

// dropPending takes p out of the pending set and of its tenant's window
// (its write failed, or never started).
func (c *guardCache) dropPending(p *pendingWrite) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endPendingLocked(p, false)
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
		c.stepLocked(tenantKey{st.Workspace, st.Project}, st, batch, writes)
	}
	for i, p := range batch {
		if p.shown {
			c.endPendingLocked(p, writes[i].Stored)
		}
	}
}

// stepLocked logs one version step of a batch of this replica's writes,
// with what the batch stored in its tenant, and moves the tenant's window
// with it if the window is at the step's From.
func (c *guardCache) stepLocked(k tenantKey, st store.VersionStep, batch []*pendingWrite, writes []store.IncidentWrite) {
	ours := func(i int) bool {
		in := writes[i].Incident
		return writes[i].Stored && in.Workspace == k.workspace && in.Project == k.project
	}
	n := 0
	for i := range batch {
		if ours(i) {
			n++
		}
	}
	stored := make([]store.Incident, 0, n)
	for i := range batch {
		if ours(i) {
			stored = append(stored, *writes[i].Incident)
		}
	}
	log := append(c.steps[k], loggedStep{from: st.From, to: st.To, stored: stored})
	if len(log) > maxLoggedSteps {
		log = slices.Delete(log, 0, len(log)-maxLoggedSteps)
	}
	c.steps[k] = log
	w := c.m[k]
	if w == nil || w.version != st.From {
		return
	}
	// The window's incidents at To: those it shows already (pending)
	// stay, the others stored join. The batch's writes are flagged (under
	// c.mu) while it runs: one pass over the pending ones, however many
	// the batch holds.
	for i, p := range batch {
		p.stepping = ours(i)
	}
	pending := w.pending
	if slices.ContainsFunc(pending, func(q *pendingWrite) bool { return q.stepping }) {
		pending = make([]*pendingWrite, 0, len(w.pending))
		for _, q := range w.pending {
			if q.stepping {
				q.stepping = false // shown already: stays, not pending any more
				continue
			}
			pending = append(pending, q)
		}
	}
	var add []store.Incident
	for i, p := range batch {
		if p.stepping {
			add = append(add, *writes[i].Incident)
			p.stepping = false
		}
	}
	c.putLocked(k, w.with(add, st.To, pending, len(add) == 0))
}

// endPendingLocked takes a shown failure whose write ended out of the
// pending set, and out of its tenant's window if its write failed.
func (c *guardCache) endPendingLocked(p *pendingWrite, stored bool) {
	k := tenantKey{p.inc.Workspace, p.inc.Project}
	c.unpendLocked(k, p)
	if w := c.m[k]; w != nil && slices.Contains(w.pending, p) && !stored {
		c.putLocked(k, w.without(p))
	}
	// Stored, but its step could not be applied: the window is behind
	// the store and will be read again; until then it keeps showing the
	// incident.
}

// guardWindow returns the tenant's incidents inside the window at now,
// from the cache when the store's version has not moved.
func (m *Memory) guardWindow(ctx context.Context, workspace, project string, now time.Time) (*guardWindow, error) {
	w, _, err := m.window(ctx, workspace, project, now, nil)
	return w, err
}

// requestWindow returns the window of a request that arrived at arrived,
// and the time its guard is derived at: arrived, or, when the window
// holds incidents dated later (failures this replica recorded while the
// request's body and its version read were under way: in a storm, most of
// them), the time the window was taken. The guard a request gets is the
// tenant's when it is derived, so it shows those failures too.
func (m *Memory) requestWindow(budget *storeBudget, workspace, project string, arrived time.Time) (*guardWindow, time.Time, error) {
	return m.windowWithin(budget, workspace, project, arrived, m.opts.Now)
}

// window returns the tenant's incidents inside the window at now (see
// guardWindow), and now. With a clock, a window holding incidents newer
// than now reads it again: the window is the one at the later time, if
// the clock is later (see requestWindow).
func (m *Memory) window(ctx context.Context, workspace, project string, now time.Time, clock func() time.Time) (*guardWindow, time.Time, error) {
	return m.windowWithin(&storeBudget{ctx: ctx}, workspace, project, now, clock)
}

// windowWithin is window with its store calls within budget.
func (m *Memory) windowWithin(budget *storeBudget, workspace, project string, now time.Time, clock func() time.Time) (*guardWindow, time.Time, error) {
	version, err := m.store.IncidentVersion(m.versionContext(budget), workspace, project)
	if err != nil {
		return nil, now, err
	}
	v := viewer{now: now, clock: clock}
	k := tenantKey{workspace, project}
	if w := m.guardCache.current(k, version, m.Guard()); w != nil && v.now.Before(w.validUntil) {
		if seen := v.see(w); v.now.Before(seen.validUntil) {
			return seen, v.now, nil
		}
	}
	w, err := m.readWindow(budget.context(), k, version, v.now)
	if err != nil {
		return nil, v.now, err
	}
	w = m.guardCache.adopt(k, w)
	return v.see(w), v.now, nil
}

// versionContext is the context of an IncidentVersion call within budget:
// none of its own when the store's versions are in memory (the window the
// version names is then most often this replica's, and the request costs
// no timer), else the budget's.
func (m *Memory) versionContext(budget *storeBudget) context.Context {
	if m.quickVersions {
		return budget.started()
	}
	return budget.context()
}

// viewer is how a request at now sees windows. An incident newer than now
// (recorded while the request's body arrived, or dated by another
// replica's clock) is not in its guard: what it derives from the window's
// incidents up to now is its own, not the window's. With a clock, the
// first window holding such incidents moves now to the clock's reading,
// once.
type viewer struct {
	now   time.Time
	clock func() time.Time
}

func (v *viewer) see(w *guardWindow) *guardWindow {
	if v.now.Before(w.newest) && v.clock != nil {
		if t := v.clock(); t.After(v.now) {
			v.now, v.clock = t, nil
		}
	}
	if v.now.Before(w.newest) {
		return w.private(v.now)
	}
	return w
}

// readWindow reads a tenant's window at version from the store: its
// incidents inside the guard's window at now (the newest GuardReadLimit)
// and its learned fixes.
func (m *Memory) readWindow(ctx context.Context, k tenantKey, version int64, now time.Time) (*guardWindow, error) {
	g := m.Guard()
	span := g.Window()
	incs, err := m.store.ListIncidents(ctx, store.IncidentQuery{
		Workspace: k.workspace, Project: k.project, Since: now.Add(-span), Limit: m.opts.GuardReadLimit,
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(incs) // oldest first
	fixes, err := m.store.ListFixes(ctx, store.FixQuery{Workspace: k.workspace, Project: k.project, Limit: maxWindowFixes})
	if err != nil {
		return nil, err
	}
	w := &guardWindow{workspace: k.workspace, project: k.project, version: version, incidents: incs, fixes: fixes,
		convIncidents: countConvIncidents(incs), full: len(incs) >= m.opts.GuardReadLimit, validUntil: validUntil(incs, now, span),
		g: g, span: span, limit: m.opts.GuardReadLimit, own: &ownCache{maxBytes: m.guardCache.maxBytes / 8}}
	w.bytes = incidentsBytes(incs) + fixesBytes(fixes)
	for _, in := range incs {
		if in.Time.After(w.newest) {
			w.newest = in.Time
		}
	}
	return w, nil
}

// adopt makes w, just read from the store, the tenant's window: caught up
// with this replica's writes that committed while it was read, and
// showing the tenant's pending failures; unless the cache holds a window
// that followed newer writes (versions only grow), which stays. It
// returns the window a request should use.
func (c *guardCache) adopt(k tenantKey, w *guardWindow) *guardWindow {
	read := w.incidents
	c.mu.Lock()
	defer c.mu.Unlock()
	w = c.catchUpLocked(k, w)
	if old := c.m[k]; old != nil && old.version > w.version {
		return w
	}
	w = c.withPendingLocked(k, w, read)
	c.putLocked(k, w)
	return w
}

// catchUpLocked applies to w the logged steps of this replica's writes
// that committed from w's version on.
func (c *guardCache) catchUpLocked(k tenantKey, w *guardWindow) *guardWindow {
	for {
		i := slices.IndexFunc(c.steps[k], func(st loggedStep) bool { return st.from == w.version })
		if i < 0 {
			return w
		}
		st := c.steps[k][i]
		have := make(map[string]bool, len(w.incidents))
		for _, in := range w.incidents {
			have[in.ID] = true
		}
		add := slices.DeleteFunc(slices.Clone(st.stored), func(in store.Incident) bool { return have[in.ID] })
		w = w.with(add, st.to, nil, len(add) == 0)
	}
}

// withPendingLocked returns w holding the tenant's pending failures that
// are not among read, the incidents read from the store (their commit may
// have come first).
func (c *guardCache) withPendingLocked(k tenantKey, w *guardWindow, read []store.Incident) *guardWindow {
	ps := c.pending[k]
	if len(ps) == 0 {
		return w
	}
	have := make(map[string]bool, len(read))
	for _, in := range read {
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
	return w.with(add, w.version, shown, false)
}
