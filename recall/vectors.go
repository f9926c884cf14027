package recall

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"

	"github.com/scarproxy/scarproxy/store"
)

// Pending is a solution whose goal has no vector of the current model.
type Pending struct {
	Workspace, ID, Goal string
}

// Vectors keeps the goal embeddings of every workspace's solutions for
// vector search, and the solutions still to embed. It follows the same
// change feed as the [Index] (see [Vectors.Tee]) and does no I/O: the
// caller embeds what [Vectors.Next] hands out and stores it with
// store.Store.SetSolutionEmbedding, whose change brings the vector here.
//
// Only vectors of the current model ([Vectors.SetModel]) are searched; a
// workspace's vectors are of one length, that of the first one it got
// (a vector of another length is left out). They are kept normalised, in
// one contiguous array per workspace, so that a search is one pass of dot
// products (BENCHMARKS.md measures it).
//
// It is safe for concurrent use. The zero Vectors is not usable; call
// NewVectors.
type Vectors struct {
	mu      sync.RWMutex
	model   string
	wss     map[string]*vspace
	pending map[pendingKey]string // goal by solution, when model is set
	wake    chan struct{}
}

type pendingKey struct{ workspace, id string }

type ventry struct {
	sol store.Solution // without its Embedding
	row int            // row in vspace.data, -1 without a vector of the model
}

type vspace struct {
	mu      sync.RWMutex
	dim     int
	entries map[string]*ventry // by solution ID
	rows    []*ventry          // by row
	data    []float32          // len(rows)*dim, each row of norm 1
}

// NewVectors returns an empty vector store with no model: nothing is
// searched nor pending until SetModel names one.
func NewVectors() *Vectors {
	return &Vectors{wss: map[string]*vspace{}, pending: map[pendingKey]string{}, wake: make(chan struct{}, 1)}
}

// Model returns the current model, empty when none.
func (v *Vectors) Model() string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.model
}

// SetModel makes model the one whose vectors are searched. When it
// changes, every vector leaves the search (only the normalised vectors of
// the current model are kept) and every solution is pending, to be
// embedded by the new model (or, when the store already holds its vector
// of that model, given it back with Offer). An empty model turns vector
// search off and forgets what was pending.
func (v *Vectors) SetModel(model string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if model == v.model {
		return
	}
	v.model = model
	clear(v.pending)
	for name, ws := range v.wss {
		ws.mu.Lock()
		ws.rows, ws.data, ws.dim = nil, nil, 0
		for _, e := range ws.entries {
			e.row = -1
			if model != "" {
				v.pending[pendingKey{name, e.sol.ID}] = e.sol.Goal
			}
		}
		ws.mu.Unlock()
	}
	v.poke()
}

// place gives e a row when emb is a usable vector of the model, or makes
// it pending. The caller holds v.mu and ws.mu for writing.
func (v *Vectors) place(workspace string, ws *vspace, e *ventry, emb *store.Embedding) {
	if v.model == "" {
		return
	}
	k := pendingKey{workspace, e.sol.ID}
	if emb == nil || emb.Model != v.model {
		v.pending[k] = e.sol.Goal
		return
	}
	delete(v.pending, k)
	vec := emb.Vector
	norm := norm(vec)
	if norm == 0 || ws.dim != 0 && len(vec) != ws.dim {
		return // not comparable: left out of the search
	}
	ws.dim = len(vec)
	e.row = len(ws.rows)
	ws.rows = append(ws.rows, e)
	for _, x := range vec {
		ws.data = append(ws.data, float32(float64(x)/norm))
	}
}

// unplace removes e's row (the last row takes its place).
func (ws *vspace) unplace(e *ventry) {
	if e.row < 0 {
		return
	}
	last := len(ws.rows) - 1
	if e.row != last {
		moved := ws.rows[last]
		copy(ws.data[e.row*ws.dim:(e.row+1)*ws.dim], ws.data[last*ws.dim:])
		ws.rows[e.row], moved.row = moved, e.row
	}
	ws.rows[last] = nil
	ws.rows, ws.data = ws.rows[:last], ws.data[:last*ws.dim]
	e.row = -1
	if last == 0 {
		ws.dim = 0 // the next vector sets the length again
	}
}

func norm(vec []float32) float64 {
	var s float64
	for _, x := range vec {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// Apply applies changes of the solution change feed, in order.
func (v *Vectors) Apply(changes []store.SolutionChange) {
	if len(changes) == 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	before := len(v.pending)
	for _, ch := range changes {
		name := ch.Solution.Workspace
		// A solution marked wrong is never recalled: it leaves as a
		// deleted one does, and is not embedded.
		gone := ch.Deleted || ch.Solution.Wrong != nil
		ws := v.wss[name]
		if ws == nil {
			if gone {
				continue
			}
			ws = &vspace{entries: map[string]*ventry{}}
			v.wss[name] = ws
		}
		ws.mu.Lock()
		if e := ws.entries[ch.Solution.ID]; e != nil {
			ws.unplace(e)
			delete(ws.entries, ch.Solution.ID)
			delete(v.pending, pendingKey{name, ch.Solution.ID})
		}
		if !gone {
			sol := ch.Solution
			emb := sol.Embedding
			sol.Embedding = nil
			e := &ventry{sol: sol, row: -1}
			ws.entries[sol.ID] = e
			v.place(name, ws, e, emb)
		}
		empty := len(ws.entries) == 0
		ws.mu.Unlock()
		if empty {
			delete(v.wss, name)
		}
	}
	if len(v.pending) > before {
		v.poke()
	}
}

func (v *Vectors) poke() {
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

// Wake returns a channel that receives when solutions become pending.
func (v *Vectors) Wake() <-chan struct{} { return v.wake }

// Next hands out at most max pending solutions, in a stable order
// (workspace, then ID), and takes them off the pending set: the caller
// embeds them, or gives up on them. A solution changed since comes back
// pending with its new goal.
func (v *Vectors) Next(max int) []Pending {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]Pending, 0, min(max, len(v.pending)))
	for k, goal := range v.pending {
		out = append(out, Pending{Workspace: k.workspace, ID: k.id, Goal: goal})
	}
	slices.SortFunc(out, func(a, b Pending) int {
		return cmp.Or(cmp.Compare(a.Workspace, b.Workspace), cmp.Compare(a.ID, b.ID))
	})
	out = out[:min(max, len(out))]
	for _, p := range out {
		delete(v.pending, pendingKey{p.Workspace, p.ID})
	}
	return out
}

// PendingLen returns how many solutions wait for a vector of the model.
func (v *Vectors) PendingLen() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.pending)
}

// Embedded reports whether the solution id of workspace has a vector of
// the current model for its goal goal.
func (v *Vectors) Embedded(workspace, id, goal string) bool {
	v.mu.RLock()
	ws := v.wss[workspace]
	v.mu.RUnlock()
	if ws == nil {
		return false
	}
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	e := ws.entries[id]
	return e != nil && e.row >= 0 && e.sol.Goal == goal
}

// Len returns how many solutions of the workspace have a vector searched.
func (v *Vectors) Len(workspace string) int {
	v.mu.RLock()
	ws := v.wss[workspace]
	v.mu.RUnlock()
	if ws == nil {
		return 0
	}
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	return len(ws.rows)
}

// Tee returns feed, whose changes are also applied to v as they are read,
// and handed on without their embeddings (v keeps what it needs of them):
// give it to [Index.Follow] so that the index and v follow one feed.
func (v *Vectors) Tee(feed ChangeFeed) ChangeFeed { return teeFeed{feed, v} }

type teeFeed struct {
	feed ChangeFeed
	v    *Vectors
}

func (t teeFeed) SolutionChanges(ctx context.Context, after int64, limit int) ([]store.SolutionChange, int64, error) {
	ch, next, err := t.feed.SolutionChanges(ctx, after, limit)
	if err == nil {
		t.v.Apply(ch)
		for i := range ch {
			ch[i].Solution.Embedding = nil
		}
	}
	return ch, next, err
}

// VectorHit is one solution found by its goal's vector.
type VectorHit struct {
	Solution store.Solution // without its Embedding
	Cosine   float64        // the cosine similarity of the goals' vectors, in [-1,1]
}

// Search returns the at most n solutions of q.Workspace whose goal vectors
// are nearest q's vector, by cosine similarity, best first (equal ones:
// smaller ID first), with q's Project and ExcludeKey filters applied. It
// returns nil when vec is empty, of another length than the workspace's
// vectors, or all zero.
func (v *Vectors) Search(q Query, vec []float32, n int) []VectorHit {
	v.mu.RLock()
	ws := v.wss[q.Workspace]
	v.mu.RUnlock()
	if ws == nil || n <= 0 {
		return nil
	}
	qn := norm(vec)
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	if len(ws.rows) == 0 || len(vec) != ws.dim || qn == 0 {
		return nil
	}
	unit := make([]float32, len(vec))
	for i, x := range vec {
		unit[i] = float32(float64(x) / qn)
	}
	type hit struct {
		row int
		cos float32
	}
	top := make([]hit, 0, n+1)
	worse := func(a, b hit) bool { // a ranks below b
		if a.cos != b.cos {
			return a.cos < b.cos
		}
		return ws.rows[a.row].sol.ID > ws.rows[b.row].sol.ID
	}
	dim := ws.dim
	for r := range ws.rows {
		c := dot(unit, ws.data[r*dim:(r+1)*dim])
		h := hit{r, c}
		if len(top) == n && !worse(top[n-1], h) {
			continue
		}
		if !admits(q, &ws.rows[r].sol) {
			continue
		}
		i := len(top)
		top = append(top, h)
		for i > 0 && worse(top[i-1], h) {
			top[i] = top[i-1]
			i--
		}
		top[i] = h
		if len(top) > n {
			top = top[:n]
		}
	}
	out := make([]VectorHit, len(top))
	for i, h := range top {
		out[i] = VectorHit{Solution: ws.rows[h.row].sol, Cosine: math.Max(-1, math.Min(1, float64(h.cos)))}
	}
	return out
}

// admits applies q's filters, as the index's search does.
func admits(q Query, s *store.Solution) bool {
	if q.Project != "" && s.Project != "" && s.Project != q.Project {
		return false
	}
	return q.ExcludeKey == "" || s.Key != q.ExcludeKey
}

// dot is the dot product of two vectors of one length, four sums at a
// time.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

// Retry makes the solutions of ps pending again, those that still have
// the same goal and no vector of the model: handed out by Next, they
// could not be embedded or stored this time.
func (v *Vectors) Retry(ps []Pending) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.model == "" {
		return
	}
	added := false
	for _, p := range ps {
		ws := v.wss[p.Workspace]
		if ws == nil {
			continue
		}
		ws.mu.RLock()
		e := ws.entries[p.ID]
		again := e != nil && e.row < 0 && e.sol.Goal == p.Goal
		ws.mu.RUnlock()
		if again {
			v.pending[pendingKey{p.Workspace, p.ID}] = p.Goal
			added = true
		}
	}
	if added {
		v.poke()
	}
}

// Offer makes emb the vector of the solution id of workspace when emb is
// of the current model and the solution is still there, with goal goal
// and no vector: a vector read back from the store (after the model was
// turned off and on again) need not be made again. It reports whether it
// did.
func (v *Vectors) Offer(workspace, id, goal string, emb *store.Embedding) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	ws := v.wss[workspace]
	if ws == nil || emb == nil || v.model == "" || emb.Model != v.model {
		return false
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	e := ws.entries[id]
	if e == nil || e.row >= 0 || e.sol.Goal != goal {
		return false
	}
	v.place(workspace, ws, e, emb)
	return e.row >= 0
}
