package proxy

import (
	"context"
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

// guardWindow is a tenant's incidents inside the guard's window, newest
// first, at most GuardReadLimit of them.
type guardWindow struct {
	workspace, project string
	version            int64
	validUntil         time.Time // when the oldest incident read leaves the window
	incidents          []store.Incident
	full               bool // the read hit its limit: older incidents of a conversation may be missing

	mu    sync.Mutex
	convs map[string]guardResult // per conversation, derived lazily
}

type guardResult struct {
	entries []guard.Entry
	block   wire.Block
}

// guardCache keeps the windows of the tenants in use, bounded by the
// incidents they hold in all.
type guardCache struct {
	mu       sync.Mutex
	max      int // incidents held in all
	held     int
	m        map[tenantKey]*guardWindow
	maxConvs int // conversations remembered per window
}

type tenantKey struct{ workspace, project string }

func newGuardCache(maxIncidents int) *guardCache {
	return &guardCache{max: maxIncidents, maxConvs: 1 << 12, m: make(map[tenantKey]*guardWindow)}
}

func (c *guardCache) get(k tenantKey) *guardWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *guardCache) put(k tenantKey, w *guardWindow) {
	c.mu.Lock()
	defer c.mu.Unlock()
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

// guardWindow returns the tenant's incidents inside the window at now,
// from the cache when the store's version has not moved.
func (s *Server) guardWindow(ctx context.Context, workspace, project string, now time.Time) (*guardWindow, error) {
	version, err := s.store.IncidentVersion(ctx, workspace, project)
	if err != nil {
		return nil, err
	}
	k := tenantKey{workspace, project}
	if w := s.guardCache.get(k); w != nil && w.version == version && now.Before(w.validUntil) {
		return w, nil
	}
	window := s.guard.Config().Window
	incs, err := s.store.ListIncidents(ctx, store.IncidentQuery{
		Workspace: workspace, Project: project, Since: now.Add(-window), Limit: s.opts.GuardReadLimit,
	})
	if err != nil {
		return nil, err
	}
	w := &guardWindow{workspace: workspace, project: project, version: version, incidents: incs,
		full: len(incs) >= s.opts.GuardReadLimit, validUntil: validUntil(incs, now, window)}
	s.guardCache.put(k, w)
	return w, nil
}

// validUntil is when the oldest of incs leaves the window; newer ones
// only arrive with a new version. An incident dated in the future
// (another replica's clock) would enter later: then now, not cached.
func validUntil(incs []store.Incident, now time.Time, window time.Duration) time.Time {
	until := now.Add(window)
	for _, in := range incs {
		if in.Time.After(now) {
			return now
		}
		if u := in.Time.Add(window); u.Before(until) {
			until = u
		}
	}
	return until
}

// guardFor returns the guard of a conversation ("" for requests that
// belong to none) in the tenant's window: its repeated failures and
// their block. When the window's read hit its limit, the conversation's
// own incidents are read too, so a busy tenant does not crowd them out.
// That read is made within budget, which starts only then.
func (s *Server) guardFor(budget *storeBudget, w *guardWindow, conversation string, now time.Time) ([]guard.Entry, wire.Block, error) {
	w.mu.Lock()
	r, ok := w.convs[conversation]
	w.mu.Unlock()
	if ok {
		return r.entries, r.block, nil
	}
	incs := make([]store.Incident, 0, len(w.incidents))
	seen := make(map[string]bool)
	for _, in := range w.incidents {
		if guard.ProviderFailure(in.Type) || in.Session == conversation {
			incs = append(incs, in)
			seen[in.ID] = true
		}
	}
	if w.full && conversation != "" {
		own, err := s.store.ListIncidents(budget.context(), store.IncidentQuery{
			Workspace: w.workspace, Project: w.project, Session: conversation,
			Since: now.Add(-s.guard.Config().Window), Limit: s.opts.GuardReadLimit,
		})
		if err != nil {
			return nil, wire.Block{}, err
		}
		for _, in := range own {
			if !seen[in.ID] && !guard.ProviderFailure(in.Type) {
				incs = append(incs, in)
			}
		}
	}
	entries := s.guard.Detect(incs, now)
	r = guardResult{entries: entries, block: wire.NewBlock(guard.Block(entries))}
	w.mu.Lock()
	if w.convs == nil || len(w.convs) >= s.guardCache.maxConvs {
		w.convs = make(map[string]guardResult)
	}
	w.convs[conversation] = r
	w.mu.Unlock()
	return r.entries, r.block, nil
}

// guardEntries returns the guard of a conversation of a tenant at now.
func (s *Server) guardEntries(ctx context.Context, workspace, project, conversation string, now time.Time) ([]guard.Entry, wire.Block, error) {
	w, err := s.guardWindow(ctx, workspace, project, now)
	if err != nil {
		return nil, wire.Block{}, err
	}
	budget := storeBudget{ctx: ctx}
	return s.guardFor(&budget, w, conversation, now)
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
