package responses

import (
	"sync"

	"github.com/scarproxy/scarproxy/proxy/wire"
)

// defaultChains is how many responses the chain memory keeps (twice
// over: when the newer half fills, the older is dropped whole).
const defaultChains = 4096

// chainState is what a conversation had read up to one response: what a
// request continuing from that response starts from.
type chainState struct {
	goal, key   string
	run, origin string // the run's names (wire.Info.Run, Origin)
	found       bool   // goal is the user's task, not a provisional one
	tools       []string
	toolCount   int
	names       map[string]string // call id -> tool name, of the calls the response made
	tallies     []wire.ToolTally
}

// chains remembers chain states by tenant and response id, bounded.
// States are never modified once stored.
type chains struct {
	mu        sync.Mutex
	max       int
	cur, prev map[string]*chainState
}

func newChains(max int) *chains {
	return &chains{max: max, cur: make(map[string]*chainState)}
}

func chainKey(tenant, id string) string { return tenant + "\x00" + id }

// get returns the state after response id, or nil. A nil *chains
// remembers nothing.
func (c *chains) get(tenant, id string) *chainState {
	if c == nil {
		return nil
	}
	k := chainKey(tenant, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.cur[k]; ok {
		return st
	}
	return c.prev[k]
}

func (c *chains) put(tenant, id string, st *chainState) {
	if c == nil {
		return
	}
	k := chainKey(tenant, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[k]; !ok && len(c.cur) >= c.max {
		c.prev, c.cur = c.cur, make(map[string]*chainState, c.max)
	}
	c.cur[k] = st
}
