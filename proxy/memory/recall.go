package memory

import (
	"sync"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
)

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
func (m *Memory) recallFor(workspace, project, goal, conversation string) ([]recall.Match, wire.Block) {
	version := m.indexVersion.Load()
	k := recallKey{workspace, project, conversation}
	c := m.recallCache
	c.mu.Lock()
	r, ok := c.m[k]
	c.mu.Unlock()
	if ok && r.version == version {
		return r.matches, r.block
	}
	matches := m.index.Search(recall.Query{
		Workspace: workspace, Project: project, Goal: goal,
		K: m.recall.MaxResults, MinSimilarity: m.recall.MinSimilarity, ExcludeKey: conversation,
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
