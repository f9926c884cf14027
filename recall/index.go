package recall

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/scarproxy/scarproxy/store"
)

// minFuzzyLen is the shortest term corrected for typos (bytes, ASCII).
const minFuzzyLen = 5

// Index is the in-memory recall index: per workspace, an inverted index of
// goal and approach terms (BM25F) and of goal character trigrams, kept
// current by Put and Delete. It is safe for concurrent use; searches of one
// workspace run in parallel with each other, writes to it are serialised.
//
// The zero Index is not usable; call NewIndex.
type Index struct {
	mu  sync.RWMutex
	wss map[string]*workspace
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{wss: make(map[string]*workspace)}
}

// posting is one document in a term's postings: its slot, the term's
// frequency in its goal and approach, and the lengths (in terms) of both,
// all capped at 255, so that scoring reads nothing else.
type posting struct {
	slot     uint32
	tfG, tfA uint8
	lg, la   uint8
}

type docTerm struct {
	id       uint32 // term id
	pos      uint32 // position of this doc in the term's postings
	tfG, tfA uint8
	// lead holds the term's roles around the goal's main action
	// (leadObject, leadFrom, leadTo) and the families of its own
	// direction, or 0 (see leadScanner).
	lead uint16
}

type docTri struct {
	h   uint32 // trigram hash
	pos uint32 // position of this doc in the trigram's postings
}

type doc struct {
	sol    store.Solution
	terms  []docTerm // sorted by id
	tris   []docTri  // sorted by h
	lg, la int32     // goal and approach lengths, in terms
	dir    uint32    // the goal's main action (see lead)
	verb   uint32    // term of the goal's first word (see lead.verb), noTerm if none
	verb2  uint32    // term of a verb joined to it (lead.verb2), noTerm if none
	head   uint32    // term of the leading phrase's head (lead.head), noTerm if none
	kind   uint8     // what verb is: actNone, actGeneric, actSpecific
	// outcome and tailDir are the goal's (see lead).
	outcome uint8
	tailDir uint32
	quals   uint32    // the goal's qualifiers (see qualifiers.go)
	tools   []toolUse // tools the goal and the approach name (see parts.go)
	names   []string  // the names the goal gives (see thing.go)
	// versions are the versions of tools the goal names (see thing.go).
	versions []string
	// acronyms are the goal's acronyms the vocabulary does not know (see
	// goalAcronyms).
	acronyms []string
	// slots are the goal's words in slots (see slotWords), as terms.
	slots []docSlot
}

// docSlot is a term of a goal's slot (see slotWords).
type docSlot struct {
	id   uint32
	slot uint8
}

type term struct {
	word   string
	post   []posting
	common bool // one of commonTerms
	// context marks a word of a task's context rather than of the thing
	// it does (see thing.go); goalDF counts the solutions whose goal
	// holds the term.
	context bool
	goalDF  int32
}

type workspace struct {
	mu        sync.RWMutex
	dict      map[string]uint32   // term -> id
	terms     []term              // by id
	freeTerms []uint32            // ids of dropped terms, for reuse
	fuzzy     map[string][]uint32 // one-deletion variants -> term ids
	tri       map[uint32][]uint32 // trigram -> slots
	byID      map[string]uint32   // solution ID -> slot
	docs      []*doc              // by slot, nil when free
	freeSlots []uint32
	n         int
	sumG      int64
	sumA      int64
	pool      sync.Pool // *scratch
}

func (ix *Index) workspace(name string, create bool) *workspace {
	ix.mu.RLock()
	ws := ix.wss[name]
	ix.mu.RUnlock()
	if ws != nil || !create {
		return ws
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ws = ix.wss[name]; ws == nil {
		ws = &workspace{
			dict:  make(map[string]uint32),
			fuzzy: make(map[string][]uint32),
			tri:   make(map[uint32][]uint32),
			byID:  make(map[string]uint32),
		}
		ix.wss[name] = ws
	}
	return ws
}

// Put adds s to the index of s.Workspace, or replaces the solution with the
// same ID there. A solution without ID is ignored: the store assigns IDs, so
// Put the record the store returned. A solution marked wrong
// (store.Solution.Wrong) is never recalled: Put removes it. Only the
// postings of s's own terms and trigrams change: the cost of a Put does
// not grow with the index.
func (ix *Index) Put(s store.Solution) {
	if s.ID == "" {
		return
	}
	if s.Wrong != nil {
		ix.Delete(s.Workspace, s.ID)
		return
	}
	if ix.refresh(s) {
		return
	}
	g := analyze(s.Goal, maxGoalRunes)
	a := analyze(s.Approach, maxApproachRunes)
	tris := trigrams(g.norm)
	counts := termCounts(g.terms, a.terms)
	for _, o := range g.lead.objs {
		if i, ok := slices.BinarySearchFunc(counts, o.term, func(c termCount, w string) int { return cmp.Compare(c.word, w) }); ok {
			counts[i].lead |= o.flags
		}
	}

	ws := ix.workspace(s.Workspace, true)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if slot, ok := ws.byID[s.ID]; ok {
		ws.remove(slot)
	}
	ws.add(s, counts, len(g.terms), len(a.terms), tris, g.lead, docTools(g.tools, a.tools), names(s.Goal))
	d := ws.docs[ws.byID[s.ID]]
	if v := versions(s.Goal); len(v) > 0 {
		d.versions = v
	}
	d.acronyms = goalAcronyms(s.Goal)
}

// refresh replaces the indexed solution with s's ID by s when its goal and
// approach, all that its postings and parts are made of, are the same
// bytes: a solution stored again (its outcome, its confidence, its time
// changed) is not analyzed again. It reports whether it did.
func (ix *Index) refresh(s store.Solution) bool {
	ws := ix.workspace(s.Workspace, false)
	if ws == nil {
		return false
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	slot, ok := ws.byID[s.ID]
	if !ok {
		return false
	}
	d := ws.docs[slot]
	if d.sol.Goal != s.Goal || d.sol.Approach != s.Approach {
		return false
	}
	d.sol = s
	return true
}

// Delete removes the solution with the given ID from the workspace's index.
// Deleting an unknown ID does nothing.
func (ix *Index) Delete(workspace, id string) {
	ws := ix.workspace(workspace, false)
	if ws == nil {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if slot, ok := ws.byID[id]; ok {
		ws.remove(slot)
	}
}

// Has reports whether the workspace's index holds the solution with the
// given ID.
func (ix *Index) Has(workspace, id string) bool {
	ws := ix.workspace(workspace, false)
	if ws == nil {
		return false
	}
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	_, ok := ws.byID[id]
	return ok
}

// Len returns the number of solutions indexed for the workspace.
func (ix *Index) Len(workspace string) int {
	ws := ix.workspace(workspace, false)
	if ws == nil {
		return 0
	}
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	return ws.n
}

type termCount struct {
	word     string
	tfG, tfA uint8
	lead     uint16
}

// termCounts merges goal and approach terms into per-term frequencies,
// sorted by term so that indexing is deterministic.
func termCounts(goal, app []string) []termCount {
	out := make([]termCount, 0, len(goal)+len(app))
	idx := make(map[string]int, len(goal)+len(app))
	add := func(w string, g bool) {
		i, ok := idx[w]
		if !ok {
			i = len(out)
			idx[w] = i
			out = append(out, termCount{word: w})
		}
		tc := &out[i]
		if g {
			tc.tfG = satAdd(tc.tfG)
		} else {
			tc.tfA = satAdd(tc.tfA)
		}
	}
	for _, w := range goal {
		add(w, true)
	}
	for _, w := range app {
		add(w, false)
	}
	slices.SortFunc(out, func(a, b termCount) int { return cmp.Compare(a.word, b.word) })
	return out
}

func satAdd(v uint8) uint8 {
	if v == math.MaxUint8 {
		return v
	}
	return v + 1
}

func clampU8[N int | int32](n N) uint8 {
	return uint8(min(n, math.MaxUint8))
}

// add indexes one solution. The caller holds ws.mu.
func (ws *workspace) add(s store.Solution, counts []termCount, lg, la int, tris []uint32, ld lead, tools []toolUse, names []string) {
	var slot uint32
	if n := len(ws.freeSlots); n > 0 {
		slot = ws.freeSlots[n-1]
		ws.freeSlots = ws.freeSlots[:n-1]
	} else {
		slot = uint32(len(ws.docs))
		ws.docs = append(ws.docs, nil)
	}
	lg, la = min(lg, math.MaxInt32), min(la, math.MaxInt32)
	d := &doc{sol: s, terms: make([]docTerm, 0, len(counts)), tris: make([]docTri, 0, len(tris)), lg: int32(lg), la: int32(la), dir: ld.dir, verb: noTerm, verb2: noTerm, head: noTerm, kind: ld.kind, tools: tools, outcome: ld.outcome, tailDir: ld.tailDir, quals: ld.quals, names: names}
	for _, c := range counts {
		id := ws.termID(c.word)
		t := &ws.terms[id]
		d.terms = append(d.terms, docTerm{id: id, pos: uint32(len(t.post)), tfG: c.tfG, tfA: c.tfA, lead: c.lead})
		t.post = append(t.post, posting{slot: slot, tfG: c.tfG, tfA: c.tfA, lg: clampU8(lg), la: clampU8(la)})
		if c.tfG > 0 {
			t.goalDF++
		}
	}
	slices.SortFunc(d.terms, func(a, b docTerm) int { return cmp.Compare(a.id, b.id) })
	if id, ok := ws.dict[ld.verb]; ok && ld.verb != "" {
		d.verb = id
	}
	if id, ok := ws.dict[ld.verb2]; ok && ld.verb2 != "" {
		d.verb2 = id
	}
	if id, ok := ws.dict[ld.head]; ok && ld.head != "" {
		d.head = id
	}
	for _, st := range ld.slots {
		if id, ok := ws.dict[st.term]; ok {
			d.slots = append(d.slots, docSlot{id: id, slot: st.slot})
		}
	}
	for _, h := range tris {
		p := ws.tri[h]
		d.tris = append(d.tris, docTri{h: h, pos: uint32(len(p))})
		ws.tri[h] = append(p, slot)
	}
	ws.docs[slot] = d
	ws.byID[s.ID] = slot
	ws.n++
	ws.sumG += int64(lg)
	ws.sumA += int64(la)
}

// remove unindexes the solution in slot. The caller holds ws.mu.
func (ws *workspace) remove(slot uint32) {
	d := ws.docs[slot]
	for _, dt := range d.terms {
		t := &ws.terms[dt.id]
		if dt.tfG > 0 {
			t.goalDF--
		}
		last := uint32(len(t.post) - 1)
		if dt.pos != last {
			moved := t.post[last]
			t.post[dt.pos] = moved
			md := ws.docs[moved.slot]
			md.terms[findTerm(md.terms, dt.id)].pos = dt.pos
		}
		t.post = t.post[:last]
		if last == 0 {
			ws.dropTerm(dt.id)
		}
	}
	for _, dt := range d.tris {
		p := ws.tri[dt.h]
		last := uint32(len(p) - 1)
		if dt.pos != last {
			moved := p[last]
			p[dt.pos] = moved
			md := ws.docs[moved]
			i, _ := slices.BinarySearchFunc(md.tris, dt.h, func(e docTri, h uint32) int { return cmp.Compare(e.h, h) })
			md.tris[i].pos = dt.pos
		}
		if last == 0 {
			delete(ws.tri, dt.h)
		} else {
			ws.tri[dt.h] = p[:last]
		}
	}
	delete(ws.byID, d.sol.ID)
	ws.docs[slot] = nil
	ws.n--
	ws.sumG -= int64(d.lg)
	ws.sumA -= int64(d.la)
	ws.freeSlots = append(ws.freeSlots, slot)
}

func (ws *workspace) termID(w string) uint32 {
	if id, ok := ws.dict[w]; ok {
		return id
	}
	var id uint32
	if n := len(ws.freeTerms); n > 0 {
		id = ws.freeTerms[n-1]
		ws.freeTerms = ws.freeTerms[:n-1]
		ws.terms[id] = term{word: w, common: commonTerms[w], context: contextTerms[w]}
	} else {
		id = uint32(len(ws.terms))
		ws.terms = append(ws.terms, term{word: w, common: commonTerms[w], context: contextTerms[w]})
	}
	ws.dict[w] = id
	if fuzzyEligible(w) {
		forDeletes(w, func(v string) { ws.fuzzy[v] = append(ws.fuzzy[v], id) })
	}
	return id
}

func (ws *workspace) dropTerm(id uint32) {
	w := ws.terms[id].word
	delete(ws.dict, w)
	if fuzzyEligible(w) {
		forDeletes(w, func(v string) {
			ids := ws.fuzzy[v]
			if i := slices.Index(ids, id); i >= 0 {
				ids[i] = ids[len(ids)-1]
				ids = ids[:len(ids)-1]
			}
			if len(ids) == 0 {
				delete(ws.fuzzy, v)
			} else {
				ws.fuzzy[v] = ids
			}
		})
	}
	ws.terms[id] = term{}
	ws.freeTerms = append(ws.freeTerms, id)
}

// fuzzyEligible reports whether w takes part in typo correction: ASCII
// letters only, long enough that one edit rarely turns a word into another.
func fuzzyEligible(w string) bool {
	if len(w) < minFuzzyLen {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// forDeletes calls fn with each distinct string made by deleting one byte of
// the ASCII word w, except its first: typos rarely touch the first letter,
// and keeping it stops corrections such as "bread" to "read".
func forDeletes(w string, fn func(string)) {
	for i := 1; i < len(w); i++ {
		if i > 1 && w[i] == w[i-1] {
			continue // same variant as deleting w[i-1]
		}
		fn(w[:i] + w[i+1:])
	}
}

// correct finds the indexed term one edit (insertion, deletion,
// substitution or adjacent transposition, the first letter kept) away from
// the unknown term w, preferring the most frequent one. It reports false
// when there is none.
func (ws *workspace) correct(w string) (uint32, bool) {
	best, bestDF, found := uint32(0), 0, false
	consider := func(id uint32) {
		df := len(ws.terms[id].post)
		if !found || df > bestDF || df == bestDF && ws.terms[id].word < ws.terms[best].word {
			best, bestDF, found = id, df, true
		}
	}
	for _, id := range ws.fuzzy[w] {
		consider(id)
	}
	forDeletes(w, func(v string) {
		if id, ok := ws.dict[v]; ok {
			consider(id)
		}
		for _, id := range ws.fuzzy[v] {
			consider(id)
		}
	})
	return best, found
}
