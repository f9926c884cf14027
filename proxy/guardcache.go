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

// guardCache keeps the guard entries of each (tenant, session) with the
// store's incident version they were computed from. Every request asks the
// store for the version (a map or primary-key lookup); only when it moved,
// or when an incident counted has since left the window, are the tenant's
// incidents read and detected again. Entries are shared: never modify them.
type guardCache struct {
	mu  sync.Mutex
	max int
	m   map[guardKey]guardResult
}

type guardKey struct{ workspace, project, session string }

type guardResult struct {
	version    int64
	validUntil time.Time // when the oldest incident counted leaves the window
	entries    []guard.Entry
	block      wire.Block
}

func newGuardCache(max int) *guardCache {
	return &guardCache{max: max, m: make(map[guardKey]guardResult)}
}

func (c *guardCache) get(k guardKey) (guardResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[k]
	return r, ok
}

func (c *guardCache) put(k guardKey, r guardResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m) // bounded; the next requests refill what is in use
	}
	c.m[k] = r
}

// guardEntries returns the repeated failures of a tenant (narrowed to
// session when set) at now, and their guard block.
func (s *Server) guardEntries(ctx context.Context, workspace, project, session string, now time.Time) ([]guard.Entry, wire.Block, error) {
	version, err := s.store.IncidentVersion(ctx, workspace, project)
	if err != nil {
		return nil, wire.Block{}, err
	}
	k := guardKey{workspace, project, session}
	if r, ok := s.guardCache.get(k); ok && r.version == version && now.Before(r.validUntil) {
		return r.entries, r.block, nil
	}
	window := s.guard.Config().Window
	incs, err := s.store.ListIncidents(ctx, store.IncidentQuery{
		Workspace: workspace, Project: project, Session: session,
		Since: now.Add(-window), Limit: s.opts.GuardReadLimit,
	})
	if err != nil {
		return nil, wire.Block{}, err
	}
	entries := s.guard.Detect(incs, now)
	blk := wire.NewBlock(guard.Block(entries))
	// Valid until the oldest incident read leaves the window; newer ones
	// only arrive with a new version. An incident dated in the future
	// (another replica's clock) would enter later: do not cache then.
	until := now.Add(window)
	for _, in := range incs {
		if in.Time.After(now) {
			until = now
			break
		}
		if u := in.Time.Add(window); u.Before(until) {
			until = u
		}
	}
	s.guardCache.put(k, guardResult{version: version, validUntil: until, entries: entries, block: blk})
	return entries, blk, nil
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
