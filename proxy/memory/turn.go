package memory

import (
	"context"
	"slices"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
)

// Turn is what the memory decided for one request: the blocks to place
// and what they hold. Its zero value places nothing.
type Turn struct {
	Entries []guard.Entry  // the guard's entries (X-Scar-Guard counts them)
	Loop    guard.Loop     // the conversation's loop, if any
	Matches []recall.Match // the recalled solutions

	Stop, Guard, Recall wire.Block

	// Degraded says the store failed or was too slow: the request goes
	// out unchanged, and nothing it leads to is captured.
	Degraded bool

	window *guardWindow // the guard's window, for ProviderAnswered
	// commits are the writes of the request's tool failures shown before
	// their commit: the answer waits for them (see Memory.Committed).
	commits []*pendingWrite
}

// Early is a tenant's guard window looked up before the request's body is
// read: it does not depend on the body, so a store round trip then costs
// the client nothing. Pass it to [Memory.Decide].
type Early struct {
	window *guardWindow
	at     time.Time
	err    error
}

// Early looks up the guard window of a request of a tenant that arrived
// at arrived, within StoreTimeout.
func (m *Memory) Early(ctx context.Context, workspace, project string, arrived time.Time) Early {
	budget := storeBudget{parent: ctx, d: m.opts.StoreTimeout}
	defer budget.end()
	w, at, err := m.requestWindow(&budget, workspace, project, arrived)
	return Early{window: w, at: at, err: err}
}

// decision is one request's way through Decide.
type decision struct {
	m        *Memory
	ctx      context.Context
	budget   *storeBudget
	t        tenant.Tenant
	req      wire.Request
	info     *wire.Info // req's
	provider string     // the first provider of the request's route
	now      time.Time  // when the request arrived

	window *guardWindow
	at     time.Time // when the guard is derived (see requestWindow)

	stored  bool             // the request stored an incident
	tallies []wire.ToolTally // of the conversation's tool results
	fresh   []int            // indexes of info.ToolResults new to the conversation
	turn    Turn
}

// Decide decides a request's blocks, in this order: record its new tool
// failures, follow its conversation's loop (recording what changed), learn
// the fixes its fresh successes show, derive the guard (with the loop's
// entry and STOP block), then recall. The store calls made once the body
// is read share one StoreTimeout; a store that fails or takes longer
// leaves the turn Degraded and empty (fail open). provider is the first
// provider of the request's route, which its tool failures and loops are
// recorded under: the provider the conversation's requests go to, unless
// it fails over (which one answers is known only once the request is
// sent). req is the request as its format read it.
func (m *Memory) Decide(ctx context.Context, early Early, t tenant.Tenant, req wire.Request, provider string, arrived time.Time) Turn {
	budget := storeBudget{parent: ctx, d: m.opts.StoreTimeout}
	defer budget.end()
	d := &decision{m: m, ctx: ctx, budget: &budget, t: t, req: req, info: req.Info(), provider: provider, now: arrived, window: early.window, at: early.at}
	if early.err != nil {
		return d.failOpen(early.err)
	}
	if !d.recordFailures() || !d.followLoop() {
		return Turn{Degraded: true} // counted where the write failed
	}
	if err := d.catchUp(); err != nil {
		return d.failOpen(err)
	}
	if err := d.learnFixes(); err != nil {
		return d.failOpen(err)
	}
	if err := d.deriveGuard(); err != nil {
		return d.failOpen(err)
	}
	d.recall()
	return d.turn
}

// recordFailures stores the request's new failed tool results. It reports
// false when the store failed.
func (d *decision) recordFailures() bool {
	failed, ok := d.m.recordToolErrors(d.budget, d.t, d.req, d.provider, d.now, &d.turn.commits)
	d.stored = failed > 0
	return ok
}

// followLoop adds the request's new tool results to its conversation's
// tail and records the loop's changes. It reports false when the store
// failed.
func (d *decision) followLoop() bool {
	loop, events, fresh := d.m.trackLoop(d.t, d.info)
	d.turn.Loop, d.fresh = loop, fresh
	d.stored = d.stored || slices.ContainsFunc(events, func(e loopEvent) bool { return e.store })
	return d.m.recordLoops(d.budget, d.t, d.info.Model, d.provider, events, d.now)
}

// catchUp reads the window again when the request stored an incident: a
// new failure may make a pattern repeat, whether this request stored it
// or another one (a retry, another replica) just did.
func (d *decision) catchUp() error {
	if !d.stored {
		return nil
	}
	return d.refresh()
}

// learnFixes stores the fixes the request's fresh successes show; the
// window is read again when it stored any, so the guard shows them.
func (d *decision) learnFixes() error {
	d.tallies = d.info.Tallies()
	if d.m.learnFixes(d.budget, d.t, d.window, d.info, d.tallies, d.fresh, d.now) {
		return d.refresh()
	}
	return nil
}

// deriveGuard derives the conversation's guard from the window, and meets
// it with the conversation's loop.
func (d *decision) deriveGuard() error {
	entries, block, err := d.m.guardFor(d.budget, d.window, d.t.Session, d.tallies, d.at)
	if err != nil {
		return err
	}
	d.turn.window, d.turn.Entries, d.turn.Guard = d.window, entries, block
	if d.turn.Loop.Level > guard.LevelNone {
		d.turn.Entries, d.turn.Guard, d.turn.Stop = d.m.loops.render(convRef{d.t.Workspace, d.t.Project, d.t.Session}, d.turn.Loop, entries, block)
	}
	return nil
}

// recall finds the solutions of tasks like the conversation's, once per
// conversation (see recallCache).
func (d *decision) recall() {
	if d.info.Goal != "" {
		d.turn.Matches, d.turn.Recall = d.m.recallFor(d.ctx, d.t.Workspace, d.t.Project, d.info.Goal, d.info.ConversationKey(), d.info.Key, d.info.Later)
	}
}

// refresh reads the tenant's window again, within the budget, as a
// request that arrived when the last one was taken.
func (d *decision) refresh() error {
	w, at, err := d.m.requestWindow(d.budget, d.t.Workspace, d.t.Project, d.at)
	if err != nil {
		return err
	}
	d.window, d.at = w, at
	return nil
}

// failOpen counts a failed read of the guard window and leaves the turn
// degraded: nothing placed, no escalation either.
func (d *decision) failOpen(err error) Turn {
	d.m.StoreFailed(d.ctx, "list_incidents", err)
	return Turn{Degraded: true}
}
