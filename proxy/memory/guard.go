package memory

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// guardFor returns the guard of a conversation ("" for requests that
// belong to none) in the tenant's window: its repeated failures and
// their block, minus those the agent has since overcome (retired):
//   - the failures of a tool whose latest result in the conversation
//     (tallies, wire.Info.Tallies) succeeded;
//   - a provider's failures older than its latest good answer on this
//     replica (see ProviderAnswered).
//
// The incidents stay stored; only the guard forgets them. When the
// window's read hit its limit, the conversation's own incidents are read
// too, so a busy tenant does not crowd them out. That read is made within
// budget, which starts only then.
//
// The window's provider failures are counted once per window (see
// providerTally) and the conversation's own failures once per change of
// them (see convFailures): the two count no group in common, so their
// entries are merged, not counted again together.
func (m *Memory) guardFor(budget *storeBudget, w *guardWindow, conversation string, tallies []wire.ToolTally, now time.Time) ([]guard.Entry, wire.Block, error) {
	overcome := overcomeTools(tallies)
	gen, recovered := m.recovered.of(tenantKey{w.workspace, w.project})
	ck := conversation + "\x00" + strings.Join(overcome, "\x00") + "\x00" + strconv.FormatInt(gen, 10)
	if r, ok := w.derived(ck); ok {
		return r.entries, r.block, nil
	}
	cf, err := m.convFailures(budget, w, conversation, now)
	if err != nil {
		return nil, wire.Block{}, err
	}
	t := w.providerTally(w.g, gen, recovered)
	entries := t.Entries(1)
	from, to := cf.span(now.Add(-w.span), now)
	switch {
	case from == to:
	case slices.ContainsFunc(entries, func(e guard.Entry) bool { return e.Provider == "" }):
		// A provider failure that names no provider counts with the
		// conversation's own: count them together.
		t = t.Derive()
		cf.addTo(t, w.g, from, to, overcome)
		entries = t.Entries(1)
	default:
		entries = guard.MergeEntries(entries, cf.entries(w.g, from, to, overcome))
	}
	entries = m.withFixes(entries, w.fixes)
	r := guardResult{conversation: conversation, entries: entries, block: wire.NewBlock(guard.Block(entries))}
	w.keepDerived(ck, r, m.guardCache.maxConvs, m.guardCache.maxBytes/8)
	m.guardCache.recount(tenantKey{w.workspace, w.project}, w)
	return r.entries, r.block, nil
}

// overcomeTools returns, sorted, the tools whose latest result in the
// conversation succeeded.
func overcomeTools(tallies []wire.ToolTally) []string {
	n := 0
	for _, t := range tallies {
		if !t.LastFailed && t.Name != "" {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	overcome := make([]string, 0, n)
	for _, t := range tallies {
		if !t.LastFailed && t.Name != "" {
			overcome = append(overcome, t.Name)
		}
	}
	slices.Sort(overcome)
	return overcome
}

// retired reports whether tool is among overcome (sorted): its failures
// no longer count.
func retired(overcome []string, tool string) bool {
	_, found := slices.BinarySearch(overcome, tool)
	return found
}

// convFailures is a conversation's own failures in a window: its
// incidents that are neither provider failures nor loops, oldest first,
// each classified once. It is shared by the windows that follow one
// another while the conversation's failures stay the same, and a window
// that adds some makes a new one from it (followed): a turn pays for the
// failures that changed, not for the window nor for classifying the
// conversation's failures again. A window follows another under its
// cache's lock: the failures it adds are classified later, on the next
// request that needs them (classified).
type convFailures struct {
	incs []store.Incident // never modified
	size int64            // convFailuresBytes

	mu        sync.Mutex
	classes   []guard.Class  // of incs, in order; those of unclassed are set once, under mu
	unclassed []int          // incs not classified yet
	last      [4]*ownEntries // the entries last counted
	next      int            // the one of last to replace
	extended  bool           // a follower appended to incs' and classes' arrays
}

// ownEntries are the entries a conversation's failures incs[from:to]
// give, those of the tools overcome retired.
type ownEntries struct {
	from, to int
	overcome []string
	tally    *guard.Tally  // never modified: cloned to count more
	entries  []guard.Entry // shared: never modified (MergeEntries copies them)
}

// span returns the range of cf's failures at lo or later and at now or
// earlier: those inside the guard's window at now.
func (cf *convFailures) span(lo, now time.Time) (from, to int) {
	from, _ = slices.BinarySearchFunc(cf.incs, lo, func(in store.Incident, lo time.Time) int {
		if in.Time.Before(lo) {
			return -1
		}
		return 1
	})
	to, _ = slices.BinarySearchFunc(cf.incs, now, func(in store.Incident, now time.Time) int {
		if in.Time.After(now) {
			return 1
		}
		return -1
	})
	return from, max(from, to)
}

// classified returns the classes of cf's failures, classifying by g those
// that are not yet, outside the lock.
func (cf *convFailures) classified(g *guard.Guard) []guard.Class {
	cf.mu.Lock()
	todo := cf.unclassed
	cf.mu.Unlock()
	if len(todo) > 0 {
		classes := make([]guard.Class, len(todo))
		for k, i := range todo {
			classes[k] = g.ClassOf(&cf.incs[i])
		}
		cf.mu.Lock()
		if cf.unclassed != nil {
			for k, i := range todo {
				cf.classes[i] = classes[k]
			}
			cf.unclassed = nil
		}
		cf.mu.Unlock()
	}
	return cf.classes
}

// entries returns the entries of cf's failures incs[from:to], those of
// the tools overcome retired, counted by a tally of g. The last counts
// are kept: a turn whose range only grew counts the failures it added.
func (cf *convFailures) entries(g *guard.Guard, from, to int, overcome []string) []guard.Entry {
	var near *ownEntries
	cf.mu.Lock()
	for _, e := range cf.last {
		if e == nil || e.from != from || e.to > to || !slices.Equal(e.overcome, overcome) {
			continue
		}
		if e.to == to {
			cf.mu.Unlock()
			return e.entries
		}
		if near == nil || e.to > near.to {
			near = e
		}
	}
	cf.mu.Unlock()
	var t *guard.Tally
	start := from
	if near != nil {
		t, start = near.tally.Derive(), near.to
	} else {
		t = g.NewTally()
	}
	cf.addTo(t, g, start, to, overcome)
	e := &ownEntries{from: from, to: to, overcome: overcome, tally: t, entries: t.Entries(1)}
	cf.mu.Lock()
	cf.last[cf.next%len(cf.last)] = e
	cf.next++
	cf.mu.Unlock()
	return e.entries
}

// addTo counts cf's failures incs[from:to] into t (a tally of g), those
// of the tools overcome retired.
func (cf *convFailures) addTo(t *guard.Tally, g *guard.Guard, from, to int, overcome []string) {
	classes := cf.classified(g)
	var tool string
	var skip bool
	for i := from; i < to; i++ {
		if c := classes[i]; c.Tool() != tool || i == from {
			tool, skip = c.Tool(), retired(overcome, c.Tool())
		}
		if !skip {
			t.AddClassed(&cf.incs[i], classes[i])
		}
	}
}

// ownFailure reports whether in is one of its conversation's own
// failures: neither a provider failure nor a loop.
func ownFailure(in *store.Incident) bool {
	return in.Type != store.TypeLoop && !guard.ProviderFailure(in.Type)
}

// newConvFailures classifies incs (oldest first) by g.
func newConvFailures(g *guard.Guard, incs []store.Incident) *convFailures {
	cf := &convFailures{incs: incs, classes: make([]guard.Class, len(incs))}
	for i := range incs {
		cf.classes[i] = g.ClassOf(&incs[i])
	}
	cf.size = convFailuresBytes(cf)
	return cf
}

// followed returns the failures of the conversation in a window that
// followed cf's with add (sorted by time; the conversation's own
// failures only), or cf when add holds none cf does not. The failures
// kept keep their classes; those of add are classified later
// (classified). When add comes after them, the counts cf kept are kept
// too, and the first window to follow cf so puts add in cf's arrays past
// their end, as a window does with its incidents (joined). A window
// trims its oldest incidents only when its read hit its limit, and then
// the conversation's failures come from the store too (convFailures):
// those trimmed stay.
func (cf *convFailures) followed(add []store.Incident) *convFailures {
	add = cf.unseen(add)
	if len(add) == 0 {
		return cf
	}
	k := len(cf.incs)
	after := k == 0 || !add[0].Time.Before(cf.incs[k-1].Time)
	cf.mu.Lock()
	last, next := cf.last, cf.next
	if after && len(cf.unclassed) == 0 && !cf.extended && cap(cf.incs)-k >= len(add) && cap(cf.classes)-k >= len(add) {
		cf.extended = true
		cf.mu.Unlock()
		n := &convFailures{incs: append(cf.incs, add...), classes: append(cf.classes, make([]guard.Class, len(add))...),
			last: last, next: next}
		for j := range add {
			n.unclassed = append(n.unclassed, k+j)
		}
		n.size = convFailuresBytes(n)
		return n
	}
	classes, unclassed := slices.Clone(cf.classes), cf.unclassed
	cf.mu.Unlock()
	var pending []bool
	if len(unclassed) > 0 {
		pending = make([]bool, k)
		for _, i := range unclassed {
			pending[i] = true
		}
	}
	n := &convFailures{
		incs:    make([]store.Incident, 0, 2*(k+len(add))),
		classes: make([]guard.Class, 0, 2*(k+len(add))),
	}
	// As the window joins them: add after the failures of the same time.
	i, j := 0, 0
	for i < k || j < len(add) {
		if j == len(add) || i < k && !add[j].Time.Before(cf.incs[i].Time) {
			if pending != nil && pending[i] {
				n.unclassed = append(n.unclassed, len(n.incs))
			}
			n.incs, n.classes = append(n.incs, cf.incs[i]), append(n.classes, classes[i])
			i++
			continue
		}
		if i < k {
			last = [len(last)]*ownEntries{} // the failures counted moved
		}
		n.unclassed = append(n.unclassed, len(n.incs))
		n.incs, n.classes = append(n.incs, add[j]), append(n.classes, guard.Class{})
		j++
	}
	// add came after cf's failures: what cf counted is n's too.
	n.last, n.next = last, next
	n.size = convFailuresBytes(n)
	return n
}

// unseen returns add without the failures cf holds already: a read of
// the store (convFailures) may see a failure before the window follows
// its write.
func (cf *convFailures) unseen(add []store.Incident) []store.Incident {
	if len(cf.incs) == 0 {
		return add
	}
	newest := cf.incs[len(cf.incs)-1].Time
	holds := func(in *store.Incident) bool {
		i, _ := slices.BinarySearchFunc(cf.incs, in.Time, func(h store.Incident, t time.Time) int {
			if h.Time.Before(t) {
				return -1
			}
			return 1
		})
		for ; i < len(cf.incs) && cf.incs[i].Time.Equal(in.Time); i++ {
			if cf.incs[i].ID == in.ID {
				return true
			}
		}
		return false
	}
	var out []store.Incident
	for j := range add {
		if !add[j].Time.After(newest) && holds(&add[j]) {
			if out == nil {
				out = append(make([]store.Incident, 0, len(add)), add[:j]...)
			}
			continue
		}
		if out != nil {
			out = append(out, add[j])
		}
	}
	if out == nil {
		return add
	}
	return out
}

// convFailuresBytes is what cf holds besides the strings, which its
// window's incidents share.
func convFailuresBytes(cf *convFailures) int64 {
	return resultOverhead + int64(len(cf.incs))*(incidentOverhead+int64(unsafe.Sizeof(guard.Class{})))
}

// convFailures returns the conversation's own failures in w (see
// ownFailure), from those w keeps or found within budget: w's incidents
// of the conversation and, when the window's read hit its limit, the
// conversation's incidents read too (ownIncidents), so a busy tenant
// does not crowd them out.
func (m *Memory) convFailures(budget *storeBudget, w *guardWindow, conversation string, now time.Time) (*convFailures, error) {
	owns := w.ownSet()
	if cf := owns.get(conversation); cf != nil {
		return cf, nil
	}
	var own []store.Incident
	for i := 0; i < len(w.incidents) && w.convIncidents > 0; i++ {
		if in := &w.incidents[i]; in.Session == conversation && ownFailure(in) {
			own = append(own, *in)
		}
	}
	if w.full && conversation != "" {
		read, err := m.ownIncidents(budget, w, conversation, now)
		if err != nil {
			return nil, err
		}
		seen := make(map[string]bool, len(own))
		for i := range own {
			seen[own[i].ID] = true
		}
		for i := range read {
			if in := &read[i]; !seen[in.ID] && ownFailure(in) {
				seen[in.ID] = true
				own = append(own, *in)
			}
		}
		slices.SortStableFunc(own, func(a, b store.Incident) int { return a.Time.Compare(b.Time) })
	}
	cf := newConvFailures(w.g, own)
	owns.keep(conversation, cf, m.guardCache.maxConvs, m.guardCache.maxBytes/8)
	return cf, nil
}

// derived returns the guard derived from w under key ck, if it was.
func (w *guardWindow) derived(ck string) (guardResult, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.convs[ck]
	if !ok {
		return guardResult{}, false
	}
	return *r, true
}

// keepDerived keeps the guard derived from w under key ck, with at most
// max of them and maxBytes of their bytes (resultBytes): past either it
// starts over.
func (w *guardWindow) keepDerived(ck string, r guardResult, max int, maxBytes int64) {
	r.size = resultBytes(ck, r)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.convs == nil || len(w.convs) >= max || w.derivedBytes+r.size > maxBytes {
		w.convs, w.derivedBytes = make(map[string]*guardResult), 0
	}
	if old, ok := w.convs[ck]; ok {
		w.derivedBytes -= old.size
	}
	w.convs[ck] = &r
	w.derivedBytes += r.size
}

// ownSet is the conversations' own failures a window keeps
// (convFailures), found lazily. The windows that follow one share it
// while no conversation's failures change (a provider failure, a loop, a
// commit); a new failure of a conversation it keeps makes a new one
// (followed).
type ownSet struct {
	mu    sync.Mutex
	m     map[string]*convFailures
	bytes int64 // of m (convFailuresBytes)
}

// ownSet returns w's set of conversations' own failures, made on first use.
func (w *guardWindow) ownSet() *ownSet {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owns == nil {
		w.owns = &ownSet{}
	}
	return w.owns
}

func (s *ownSet) get(conversation string) *convFailures {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[conversation]
}

// size returns the bytes s holds; 0 for nil.
func (s *ownSet) size() int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// keep keeps a conversation's own failures, with at most max
// conversations and maxBytes of their bytes: past either it starts over.
func (s *ownSet) keep(conversation string, cf *convFailures, max int, maxBytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= max || s.bytes+cf.size > maxBytes {
		s.m, s.bytes = make(map[string]*convFailures), 0
	}
	if old, ok := s.m[conversation]; ok {
		s.bytes -= old.size
	}
	s.m[conversation] = cf
	s.bytes += cf.size
}

// followed returns the conversations' own failures a window keeps that
// followed s's with add and without trimmed (see convFailures.followed):
// s itself when neither changes any conversation's failures, a new set
// otherwise. The failures of no conversation ("") come from
// the window alone: trimming one of them finds them again.
func (s *ownSet) followed(add, trimmed []store.Incident) *ownSet {
	if s == nil {
		return nil
	}
	// Shared only while no conversation's failures change: a request
	// still on the older window may add a conversation to s, read from
	// that window's incidents.
	kept := !slices.ContainsFunc(trimmed, func(in store.Incident) bool { return in.Session == "" && ownFailure(&in) })
	if kept && !slices.ContainsFunc(add, func(in store.Incident) bool { return ownFailure(&in) }) {
		return s
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	added := make(map[string][]store.Incident)
	for i := range add {
		if in := &add[i]; ownFailure(in) {
			if _, held := s.m[in.Session]; held {
				added[in.Session] = append(added[in.Session], *in)
			}
		}
	}
	n := &ownSet{m: make(map[string]*convFailures, len(s.m))}
	for conv, cf := range s.m {
		if conv == "" && !kept {
			continue
		}
		cf = cf.followed(added[conv])
		n.m[conv] = cf
		n.bytes += cf.size
	}
	return n
}

// derivedSize returns the bytes of the guards derived from w and of the
// conversations' own failures it keeps.
func (w *guardWindow) derivedSize() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.derivedBytes + w.owns.size()
}

// ownCache keeps, per conversation, its own incidents that are not
// provider failures, read when its tenant's window is full (see
// guardFor), for the windows that followed one read of the store. A step
// adds the new tool failures of the conversations it holds; a new read of
// the window starts a new cache. Provider failures, which guardFor takes
// from the window, are not kept: a storm of them changes nothing here.
type ownCache struct {
	mu       sync.Mutex
	m        map[string][]store.Incident // oldest first
	held     int64                       // bytes (incidentsBytes)
	maxBytes int64                       // past which it starts over
	adds     int64                       // moves with every add: a read that began before one is not kept
}

// bytes returns the bytes the cache holds.
func (o *ownCache) bytes() int64 {
	if o == nil {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held
}

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

// put keeps what a read that began at gen returned (oldest first),
// unless an add came since.
func (o *ownCache) put(conversation string, incs []store.Incident, gen int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.adds != gen {
		return
	}
	n := incidentsBytes(incs)
	if o.m == nil || o.held+n > o.maxBytes {
		o.m, o.held = make(map[string][]store.Incident), 0
	}
	if old, ok := o.m[conversation]; ok {
		o.held -= incidentsBytes(old)
	}
	o.m[conversation] = incs
	o.held += n
}

// add puts the incidents of add that are not provider failures among
// their conversation's (oldest first, after those of the same time; add
// is sorted). One newer than them all is appended in place: a reader's
// slice ends before it.
func (o *ownCache) add(add []store.Incident) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range add {
		in := add[i]
		if in.Session == "" || guard.ProviderFailure(in.Type) {
			continue
		}
		o.adds++
		old, ok := o.m[in.Session]
		if !ok {
			continue
		}
		k := len(old)
		for k > 0 && old[k-1].Time.After(in.Time) {
			k--
		}
		if k == len(old) {
			o.m[in.Session] = append(old, in)
		} else {
			o.m[in.Session] = slices.Insert(slices.Clip(old), k, in)
		}
		o.held += incidentsBytes(add[i : i+1])
	}
}

// ownIncidents returns a conversation's incidents that are not provider
// failures, from the window's cache or read within budget: what guardFor
// adds to a full window.
func (m *Memory) ownIncidents(budget *storeBudget, w *guardWindow, conversation string, now time.Time) ([]store.Incident, error) {
	var gen int64
	if w.own != nil {
		if incs, ok := w.own.get(conversation); ok {
			return incs, nil
		}
		gen = w.own.gen()
	}
	read, err := m.store.ListIncidents(budget.context(), store.IncidentQuery{
		Workspace: w.workspace, Project: w.project, Session: conversation,
		Since: now.Add(-w.span), Limit: m.opts.GuardReadLimit,
	})
	if err != nil {
		return nil, err
	}
	own := slices.DeleteFunc(read, func(in store.Incident) bool { return guard.ProviderFailure(in.Type) })
	slices.Reverse(own) // oldest first
	if w.own != nil {
		w.own.put(conversation, own, gen)
		m.guardCache.recount(tenantKey{w.workspace, w.project}, w)
	}
	return own, nil
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

// followed returns the tally of a window that followed p's: added and
// trimmed are the incidents that came and left, incs the new window's.
func (p *providerTally) followed(added, trimmed, incs []store.Incident) *providerTally {
	t := p.t.Derive()
	for i := range added {
		if p.counts(&added[i]) {
			t.Add(&added[i])
		}
	}
	for i := range trimmed {
		if p.counts(&trimmed[i]) {
			t.Remove(&trimmed[i])
		}
	}
	n := &providerTally{gen: p.gen, recovered: p.recovered, t: t}
	n.renew(incs)
	return n
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
		p.t = base.Derive()
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

// Preview returns the guard of a conversation of a tenant at now, as
// its next request would get it: the entries and the text of the blocks
// (the STOP block, when the conversation's loop reached that level on
// this replica, then the guard block), and the loop.
func (m *Memory) Preview(ctx context.Context, workspace, project, conversation string, now time.Time) ([]guard.Entry, string, guard.Loop, error) {
	w, err := m.guardWindow(ctx, workspace, project, now)
	if err != nil {
		return nil, "", guard.Loop{}, err
	}
	budget := storeBudget{ctx: ctx}
	entries, block, err := m.guardFor(&budget, w, conversation, nil, now)
	if err != nil {
		return nil, "", guard.Loop{}, err
	}
	var loop guard.Loop
	if conversation != "" {
		loop = m.loops.peek(convRef{workspace, project, conversation})
	}
	if loop.Level == guard.LevelNone {
		return entries, block.Text, loop, nil
	}
	entries, block, stop := m.loops.render(convRef{workspace, project, conversation}, loop, entries, block)
	return entries, stop.Text + block.Text, loop, nil
}

// Replay returns, for each of a conversation's incidents (oldest first),
// the guard block its next request got once the incident was recorded:
// derived as a request's guard is (guardFor), from every group of the
// conversation's failures inside the guard's window at the incident's
// time, kept when it repeated or when a fix the tenant had learned by
// then applies (withFixes, which skips a fix marked wrong by then),
// quoted with that fix. It replays the
// conversation's own failures: the tenant's other provider failures, the
// tools a request's history shows overcome and the STOP block are not
// replayed.
func (m *Memory) Replay(ctx context.Context, workspace, project string, incs []store.Incident) ([]string, error) {
	fixes, err := m.store.ListFixes(ctx, store.FixQuery{Workspace: workspace, Project: project, Limit: maxWindowFixes})
	if err != nil {
		return nil, err
	}
	g := m.Guard()
	blocks := make([]string, len(incs))
	var failures []store.Incident
	for i, inc := range incs {
		if inc.Type != store.TypeLoop {
			failures = append(failures, inc)
		}
		learned := slices.DeleteFunc(slices.Clone(fixes), func(f store.Fix) bool { return f.Created.After(inc.Time) })
		for j := range learned {
			if w := learned[j].Wrong; w != nil && w.At.After(inc.Time) {
				learned[j].Wrong = nil // marked wrong later: it was shown then
			}
		}
		blocks[i] = guard.Block(m.withFixes(g.DetectAll(failures, inc.Time), learned))
	}
	return blocks, nil
}
