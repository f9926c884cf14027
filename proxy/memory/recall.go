package memory

import (
	"context"
	"slices"
	"sync"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
)

// recallCache keeps the recall of each conversation, decided once, on
// its first request: the block is in the conversation's first user turn
// (or its system text), which the provider caches, so it is re-sent byte
// for byte on every later turn. Solutions stored meanwhile do not change a
// running conversation; a solution deleted meanwhile (wrong, or pruned)
// leaves it. The cache is bounded: a conversation it forgot, like one
// whose first request another replica or process saw, recalls nothing
// from then on.
type recallCache struct {
	mu sync.Mutex
	m  *generations[recallKey, recallResult]
}

// recallKey names a conversation by its key, a hash of its first messages
// (goal included): a goal of kilobytes is not kept as a map key.
type recallKey struct{ workspace, project, conversation string }

type recallResult struct {
	version int64 // of the recall index, when the matches were last checked
	matches []recall.Match
	block   wire.Block
}

func newRecallCache(maxEntries int, maxBytes int64) *recallCache {
	return &recallCache{m: newGenerations(maxEntries, maxBytes, recallBytes)}
}

// recallBytes is what a conversation's recall holds: its block, and the
// solutions it names (the index may drop them meanwhile).
func recallBytes(k recallKey, r recallResult) int64 {
	n := int64(len(k.workspace)+len(k.project)+len(k.conversation)+len(r.block.Text)+len(r.block.JSON)) + 128
	for _, m := range r.matches {
		s := &m.Solution
		n += int64(len(s.ID)+len(s.Key)+len(s.Goal)+len(s.Approach)+len(s.Outcome)+len(m.Why.Action)+len(m.Why.Object)) + 256
		if s.Embedding != nil {
			n += 4 * int64(len(s.Embedding.Vector))
		}
	}
	return n
}

// bytes returns the bytes the cache holds.
func (c *recallCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m.bytes()
}

// recallFor returns the matches of a conversation's goal and their block,
// found by [Memory.Search] within ctx.
// conversation is its key (wire.Info.ConversationKey); later says the
// request is not the conversation's first (wire.Info.Later). A first
// request is a new run of its task: recall is decided for it afresh, so
// that a task run again recalls what its earlier runs stored. A later
// request gets the block decided on its conversation's first request.
// task is the key of the conversation's task alone (wire.Info.Key): a run
// named only by its history (wire.Info.Origin) had its first request
// under it, and takes on the recall decided there.
func (m *Memory) recallFor(ctx context.Context, workspace, project, goal, conversation, task string, later bool) ([]recall.Match, wire.Block) {
	version := m.indexVersion.Load()
	k := recallKey{workspace, project, conversation}
	c := m.recallCache
	var r recallResult
	own, ok := false, false
	if later {
		c.mu.Lock()
		r, ok = c.m.get(k)
		own = ok
		if !ok && task != conversation {
			r, ok = c.m.get(recallKey{workspace, project, task})
		}
		c.mu.Unlock()
	}
	switch {
	case own && r.version == version:
		return r.matches, r.block
	case ok && r.version == version:
	case ok:
		r = m.withoutDeleted(r, version)
	case later:
		r = recallResult{version: version} // decided on a request this replica did not see
	default:
		// Nothing of this run is stored yet: what an earlier run of the
		// task stored (under the task's key) is what it should recall.
		rc := m.recall.Load()
		matches := m.Search(ctx, recall.Query{
			Workspace: workspace, Project: project, Goal: goal,
			K: rc.MaxResults, MinSimilarity: rc.MinSimilarity,
		})
		r = recallResult{version: version, matches: matches, block: wire.NewBlock(recall.Block(matches))}
	}
	c.mu.Lock()
	c.m.put(k, r)
	c.mu.Unlock()
	return r.matches, r.block
}

// withoutDeleted returns r checked against the index at version: the
// matches whose solution is no longer there leave, and the block changes
// only then.
func (m *Memory) withoutDeleted(r recallResult, version int64) recallResult {
	kept := slices.DeleteFunc(slices.Clone(r.matches), func(mt recall.Match) bool {
		return !m.index.Has(mt.Solution.Workspace, mt.Solution.ID)
	})
	if len(kept) < len(r.matches) {
		r.matches, r.block = kept, wire.NewBlock(recall.Block(kept))
	}
	r.version = version
	return r
}
