package memory

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

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
func (m *Memory) guardFor(budget *storeBudget, w *guardWindow, conversation string, tallies []wire.ToolTally, now time.Time) ([]guard.Entry, wire.Block, error) {
	overcome := overcomeTools(tallies)
	gen, recovered := m.recovered.of(tenantKey{w.workspace, w.project})
	ck := conversation + "\x00" + strings.Join(overcome, "\x00") + "\x00" + strconv.FormatInt(gen, 10)
	if r, ok := w.derived(ck); ok {
		return r.entries, r.block, nil
	}
	own, err := m.ownFailures(budget, w, conversation, overcome, now)
	if err != nil {
		return nil, wire.Block{}, err
	}
	// The provider failures come counted with the window; the
	// conversation's own failures are counted on top of them.
	t := w.providerTally(w.g, gen, recovered)
	if len(own) > 0 {
		t = t.Clone()
		for _, in := range own {
			t.Add(in)
		}
	}
	entries := m.withFixes(t.Entries(1), w.fixes)
	r := guardResult{conversation: conversation, entries: entries, block: wire.NewBlock(guard.Block(entries))}
	w.keepDerived(ck, r, m.guardCache.maxConvs, m.guardCache.maxBytes/8)
	m.guardCache.recount(tenantKey{w.workspace, w.project}, w)
	return r.entries, r.block, nil
}

// overcomeTools returns, sorted, the tools whose latest result in the
// conversation succeeded.
func overcomeTools(tallies []wire.ToolTally) []string {
	var overcome []string
	for _, t := range tallies {
		if !t.LastFailed && t.Name != "" {
			overcome = append(overcome, t.Name)
		}
	}
	slices.Sort(overcome)
	return overcome
}

// ownFailures returns the failures of a conversation in w that count for
// its guard at now: its own (not provider failures, not loops), inside
// the guard's window, of tools not overcome (sorted). When the window's
// read hit its limit, the conversation's own incidents are read too
// (ownIncidents), so a busy tenant does not crowd them out.
func (m *Memory) ownFailures(budget *storeBudget, w *guardWindow, conversation string, overcome []string, now time.Time) ([]*store.Incident, error) {
	lo := now.Add(-w.span)
	mine := func(in *store.Incident) bool {
		if in.Type == store.TypeLoop || guard.ProviderFailure(in.Type) || in.Session != conversation ||
			in.Time.Before(lo) || in.Time.After(now) {
			return false
		}
		_, retired := slices.BinarySearch(overcome, guard.ToolOf(in))
		return !retired
	}
	var own []*store.Incident
	for i := 0; i < len(w.incidents) && w.convIncidents > 0; i++ {
		if in := &w.incidents[i]; mine(in) {
			own = append(own, in)
		}
	}
	if !w.full || conversation == "" {
		return own, nil
	}
	read, err := m.ownIncidents(budget, w, conversation, now)
	if err != nil {
		return nil, err
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
	return own, nil
}

// derived returns the guard derived from w under key ck, if it was.
func (w *guardWindow) derived(ck string) (guardResult, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.convs[ck]
	return r, ok
}

// keepDerived keeps the guard derived from w under key ck, with at most
// max of them and maxBytes of their bytes (resultBytes): past either it
// starts over.
func (w *guardWindow) keepDerived(ck string, r guardResult, max int, maxBytes int64) {
	r.size = resultBytes(ck, r)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.convs == nil || len(w.convs) >= max || w.derivedBytes+r.size > maxBytes {
		w.convs, w.derivedBytes = make(map[string]guardResult), 0
	}
	if old, ok := w.convs[ck]; ok {
		w.derivedBytes -= old.size
	}
	w.convs[ck] = r
	w.derivedBytes += r.size
}

// derivedSize returns the bytes of the guards derived from w.
func (w *guardWindow) derivedSize() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.derivedBytes
}

// ownCache keeps, per conversation, its own incidents that are not
// provider failures, read when its tenant's window is full (see
// guardFor), for the windows that followed one read of the store. A step
// adds the new tool failures of the conversations it holds; a new read of
// the window starts a new cache. Provider failures, which guardFor takes
// from the window, are not kept: a storm of them changes nothing here.
type ownCache struct {
	mu       sync.Mutex
	m        map[string][]store.Incident // newest first
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

// put keeps what a read that began at gen returned, unless an add came
// since.
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
			o.held += incidentsBytes(add[i : i+1])
		}
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
	t := p.t.Clone()
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
