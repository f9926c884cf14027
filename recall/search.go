package recall

import (
	"cmp"
	"math"
	"slices"

	"github.com/scarproxy/scarproxy/store"
)

// Ranking parameters (see the package documentation).
const (
	bm25K1       = 1.2
	bm25B        = 0.75
	weightGoal   = 3.0 // BM25F weight of the goal field
	weightApp    = 1.0 // BM25F weight of the approach field
	alpha        = 0.8 // share of normalised BM25 in the blended similarity
	beta         = 0.6 // weight of trigram similarity on its own
	fuzzyPenalty = 0.8 // a typo-corrected query term counts this much
	maxK         = 5   // most results of one search
	// priorDocs is added to a workspace's number of solutions in idf: in a
	// workspace of a few solutions every shared word is "common" and every
	// other word "rare", which says nothing about the words themselves.
	// Values from 5 to 40 separate the ranking tests about as well.
	priorDocs = 10
	// commonShare is the share of the prior documents in which a common
	// word (see commonWords) is counted.
	commonShare = 0.25
	// oppositeFactor scales the similarity of a solution whose main action
	// is the opposite of the query's (see directionTable): 1 becomes 0.3,
	// below the default threshold.
	oppositeFactor = 0.3
)

// Search effort bounds.
const (
	raiseTerms   = 4    // query terms after which the threshold is raised early
	raiseDocs    = 8    // documents evaluated by each early raise, per result asked
	conjFactor   = 4    // read a term's postings when under this many times the documents seen
	diceBudget   = 32   // trigram similarities computed for BM25 candidates, per result asked
	triBudget    = 4096 // trigram postings read when BM25 finds fewer than k results
	triEvalLimit = 64   // trigram-only candidates evaluated at most
	numBuckets   = 64   // buckets of the BM25 bound candidates are evaluated in

	// roundEps widens every pruning bound: similarities are compared
	// after rounding to two decimals, and scores are summed in float32.
	roundEps = 0.005 + 1e-6
	// leastSimilarity is the least similarity that rounds to 0.01.
	leastSimilarity = 0.005
)

// Query asks for the solutions most similar to a goal.
type Query struct {
	Workspace string
	// Project, when set, skips solutions of another non-empty project;
	// solutions without a project match any.
	Project string
	Goal    string
	// K is the number of matches wanted: 0 (or less) means 1; capped at 5.
	K int
	// MinSimilarity drops matches below it (0 keeps every solution that
	// shares anything with the goal).
	MinSimilarity float64
	// ExcludeKey skips the solution with this Key: a conversation never
	// recalls its own auto-captured solution.
	ExcludeKey string
}

// Match is one recalled solution.
type Match struct {
	Solution store.Solution `json:"solution"`
	// Similarity is in [0,1], rounded to two decimals, and means the same
	// thing across queries.
	Similarity float64 `json:"similarity"`
	// Why is the action and the object the solution's goal shares with
	// the query; empty when it shares neither (a match on the approach or
	// on spelling alone).
	Why Reason `json:"why,omitzero"`
}

// Search returns the solutions of q.Workspace most similar to q.Goal, best
// first: at most q.K of them, each with Similarity >= q.MinSimilarity. A
// solution that shares nothing with the goal is never returned. Among equal
// (rounded) similarities verified solutions come first, then higher
// confidence, then the most recently updated, then the smaller ID.
//
// Similarity blends the coverage c with the Dice similarity of goal
// character trigrams: max(0.8*c + 0.2*dice, 0.6*dice). c is the query
// coverage q (BM25F over goal, weighted 3, and approach, normalised by the
// query's score against itself), or, when the query covers a larger share
// g of the stored goal than the solution covers of the query, the harmonic
// mean 2qg/(q+g). A solution whose main action is the opposite of the
// goal's (export for import, a writer for a parser), or whose task parts
// do not fit the goal's (another action, object, direction or tool; see
// parts.go), scores 0.3 of that. Each match says why it was recalled
// (Match.Why). See the package documentation.
//
// Pruning never changes the results, but the trigram part is bounded: it
// is computed for at most 32 candidates per result asked (those with the
// best BM25 bounds), and solutions that share no term with the goal are
// looked up by trigram only when fewer than q.K results were found,
// reading at most 4096 trigram postings: the work of a search does not
// grow with the solutions that cannot match (BENCHMARKS.md measures it).
func (ix *Index) Search(q Query) []Match {
	s := ix.prepare(q)
	if s == nil {
		return nil
	}
	defer s.release()
	s.run()
	return s.matches()
}

// qobj is a word around the query's main action (see leadObj).
type qobj struct {
	term  string
	id    uint32 // noTerm when the workspace does not have it
	flags uint16
	ctx   bool    // a word of the context (see thing.go)
	w     float64 // its weight (see thing.go)
}

// qid locates a query term by id: its share of a matching goal term's
// weight (less than 1 for a corrected typo).
type qid struct {
	id   uint32
	frac float64
}

type qterm struct {
	id   uint32
	w    float32 // docW * idf * (k1+1)
	cap  float32 // ub, as float32
	docW float64 // weight on the document side: 1, less for a corrected typo
	idf  float64
	// ub caps the term's contribution to any document: its contribution
	// to the query's own score (times the typo penalty), so that a
	// normalised score is the weighted share of the query a solution
	// covers, never above 1.
	ub float64
}

type result struct {
	slot uint32
	sim  float64 // rounded
}

type cand struct {
	slot uint32
	ub   float64
}

// scratch is the per-search working memory, pooled per workspace.
type scratch struct {
	// acc holds a document's partial BM25 score: 0 before it is seen,
	// negative once evaluated.
	acc     []float32
	cnt     []uint16 // trigrams shared, in the trigram phase
	touched []uint32 // documents whose acc or cnt is set
	cands   []cand
	sorted  []cand
}

func (ws *workspace) getScratch() *scratch {
	sc, _ := ws.pool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	if n := len(ws.docs); len(sc.acc) < n {
		sc.acc = make([]float32, n+n/4)
		sc.cnt = make([]uint16, n+n/4)
	}
	return sc
}

func (ws *workspace) putScratch(sc *scratch) {
	for _, s := range sc.touched {
		sc.acc[s] = 0
		sc.cnt[s] = 0
	}
	sc.touched = sc.touched[:0]
	ws.pool.Put(sc)
}

// searcher holds the state of one search.
type searcher struct {
	ws     *workspace
	q      Query
	k      int
	min    float64
	terms  []qterm   // known query terms, by ub descending
	ids    []qid     // the same, by id
	suffix []float64 // suffix[i]: sum of terms[i:].ub
	self   float64   // the query's score against itself
	n      float64   // solutions in the workspace
	dir    uint32    // the query's main action
	objs   []qobj
	// verb is the term of the query's first word (noTerm when the
	// workspace does not hold it), verbSet whether there is one, kind
	// what it is (see vocab.go); tools the tools the query names.
	verb    uint32
	verb2   uint32
	head    uint32 // the term of the query's head (see lead.head), or noTerm
	verbSet bool
	kind    uint8
	tools   []toolUse
	outcome uint8 // the query's outcome (see lead)
	// onFailure: the query's task is done on a failure (see lead).
	onFailure bool
	tailDir   uint32   // the direction of the query's later phrases (see lead)
	quals     uint32   // the query's qualifiers (see qualifiers.go)
	names     []string // the names the query gives (see thing.go)
	// instead are the terms of what the query says it is not (see
	// insteadOf), those the workspace holds.
	instead []uint32
	// slots are the query's words in slots (see slotWords); an id is
	// noTerm when the workspace does not hold the word.
	slots []docSlot
	// versions are the versions of tools the query names (see thing.go).
	versions []string
	qtri     []uint32
	invG     [256]float32 // goal weight / BM25 length norm, by goal length
	invA     [256]float32 // same for the approach
	sc       *scratch
	top      []result // best first, at most k
	// diceLeft counts the trigram similarities still allowed.
	diceLeft int
	// exhaustive lifts the effort bounds on trigrams, leaving only exact
	// pruning: the results are then those of scoring every solution
	// (tests compare it with brute force).
	exhaustive bool
}

// prepare analyses the goal and sets up a search of its workspace, holding
// the workspace's read lock until release. It returns nil when nothing can
// match.
func (ix *Index) prepare(q Query) *searcher {
	k := q.K
	if k <= 0 {
		k = 1
	}
	k = min(k, maxK)
	minSim := q.MinSimilarity
	if !(minSim > 0) {
		minSim = 0
	}
	ws := ix.workspace(q.Workspace, false)
	if ws == nil {
		return nil
	}
	a := analyze(q.Goal, maxGoalRunes)
	qtri := trigrams(a.norm)
	if len(a.terms) == 0 && len(qtri) == 0 {
		return nil
	}
	// Query words count once: a task states what it wants once, and
	// repeats mostly come from word forms folded together ("write a CSV
	// writer", "run the test runner").
	dup := map[string]bool{}
	var order []string
	for _, t := range a.terms {
		if !dup[t] {
			dup[t] = true
			order = append(order, t)
		}
	}
	if len(order) > maxQueryTerms {
		order = order[:maxQueryTerms]
	}

	qnames, qversions := names(q.Goal), versions(q.Goal)

	ws.mu.RLock()
	if ws.n == 0 {
		ws.mu.RUnlock()
		return nil
	}
	s := &searcher{ws: ws, q: q, k: k, min: minSim, qtri: qtri, diceLeft: diceBudget * k, n: float64(ws.n), dir: a.lead.dir,
		verb: noTerm, verb2: noTerm, head: noTerm, verbSet: a.lead.verb != "", kind: a.lead.kind, tools: a.tools,
		outcome: a.lead.outcome, onFailure: a.lead.onFailure, tailDir: a.lead.tailDir, quals: a.lead.quals}
	if id, ok := ws.dict[a.lead.verb]; ok && s.verbSet {
		s.verb = id
	}
	if id, ok := ws.dict[a.lead.verb2]; ok && a.lead.verb2 != "" {
		s.verb2 = id
	}
	if id, ok := ws.dict[a.lead.head]; ok && a.lead.head != "" {
		s.head = id
	}
	avgG := max(float64(ws.sumG)/float64(ws.n), 1)
	avgA := max(float64(ws.sumA)/float64(ws.n), 1)
	for l := range s.invG {
		s.invG[l] = float32(weightGoal / (1 - bm25B + bm25B*float64(l)/avgG))
		s.invA[l] = float32(weightApp / (1 - bm25B + bm25B*float64(l)/avgA))
	}
	selfTF := weightGoal / (1 - bm25B + bm25B*float64(len(a.terms))/avgG)
	seen := make(map[uint32]bool, len(order))
	for _, w := range order {
		qt := qterm{docW: 1}
		id, known := ws.dict[w]
		if !known && fuzzyEligible(w) {
			if id, known = ws.correct(w); known {
				qt.docW *= fuzzyPenalty
			}
		}
		if known && seen[id] {
			continue // a misspelling of another query word, or the reverse
		}
		df, common := 0, commonTerms[w]
		if known {
			seen[id] = true
			qt.id, df, common = id, len(ws.terms[id].post), ws.terms[id].common
		}
		qt.idf = s.idf(df, common)
		self := qt.idf * selfTF * (bm25K1 + 1) / (selfTF + bm25K1)
		s.self += self
		qt.ub = self * qt.docW
		qt.w, qt.cap = float32(qt.docW*qt.idf*(bm25K1+1)), float32(qt.ub)
		if known {
			s.terms = append(s.terms, qt)
		}
	}
	slices.SortStableFunc(s.terms, func(a, b qterm) int { return cmp.Compare(b.ub, a.ub) })
	s.ids = make([]qid, len(s.terms))
	for i, qt := range s.terms {
		s.ids[i] = qid{id: qt.id, frac: qt.docW}
	}
	slices.SortFunc(s.ids, func(a, b qid) int { return cmp.Compare(a.id, b.id) })
	for _, o := range a.lead.objs {
		id, known := ws.dict[o.term]
		if !known {
			id = noTerm
		}
		df := 0
		if known {
			df = int(ws.terms[id].goalDF)
		}
		s.objs = append(s.objs, qobj{term: o.term, id: id, flags: o.flags, ctx: contextTerms[o.term], w: s.goalIDF(df)})
	}
	s.names, s.versions = qnames, qversions
	for _, st := range a.lead.slots {
		id, ok := ws.dict[st.term]
		if !ok {
			id = noTerm
		}
		s.slots = append(s.slots, docSlot{id: id, slot: st.slot})
	}
	for _, t := range a.instead {
		if id, ok := ws.dict[t]; ok && (!contextTerms[t] || isKnownTool(t)) {
			s.instead = append(s.instead, id)
		}
	}
	s.suffix = make([]float64, len(s.terms)+1)
	for i := len(s.terms) - 1; i >= 0; i-- {
		s.suffix[i] = s.suffix[i+1] + s.terms[i].ub
	}
	s.sc = ws.getScratch()
	return s
}

// release returns the scratch space and the workspace's read lock.
func (s *searcher) release() {
	s.ws.putScratch(s.sc)
	s.ws.mu.RUnlock()
}

func (s *searcher) run() {
	if len(s.terms) > 0 {
		s.searchTerms()
	}
	if len(s.qtri) > 0 && (len(s.top) < s.k || s.exhaustive && s.threshold()-roundEps < beta) {
		s.searchTrigrams()
	}
}

func (s *searcher) matches() []Match {
	out := make([]Match, len(s.top))
	for i, r := range s.top {
		d := s.ws.docs[r.slot]
		out[i] = Match{Solution: d.sol, Similarity: r.sim, Why: s.reason(d)}
	}
	return out
}

// threshold is the rounded similarity a new result must reach to enter the
// results: the k-th best so far, or the query's minimum.
func (s *searcher) threshold() float64 {
	if len(s.top) == s.k {
		return max(s.min, s.top[len(s.top)-1].sim)
	}
	return s.min
}

// bmNeeded is the BM25 score below which the similarity cannot reach the
// current threshold, whatever the trigram similarity and the goal: the
// inverse of bound.
func (s *searcher) bmNeeded() float64 {
	y := (s.threshold() - roundEps - (1 - alpha)) / alpha // coverage needed
	if y >= 2 {
		return math.Inf(1)
	}
	return y / (2 - y) * s.self
}

// idf is the inverse document frequency of a term found in df solutions of
// the workspace, counting priorDocs more solutions, of which a common
// word is in commonShare.
func (s *searcher) idf(df int, common bool) float64 {
	x := float64(df)
	if common {
		x += priorDocs * commonShare
	}
	return math.Log(1 + (s.n+priorDocs-x+0.5)/(x+0.5))
}

// contrib is the BM25F contribution of query term qt to a document where
// it occurs tfG times in a goal of lg terms and tfA times in an approach of
// la terms.
func (s *searcher) contrib(qt *qterm, tfG, tfA, lg, la uint8) float32 {
	tf := float32(tfG)*s.invG[lg] + float32(tfA)*s.invA[la]
	return min(qt.w*tf/(tf+bm25K1), qt.cap)
}

// queryCoverage is the share of the query's score a BM25 score bm reaches.
func (s *searcher) queryCoverage(bm float64) float64 {
	if s.self <= 0 || bm <= 0 {
		return 0
	}
	return min(1, bm/s.self)
}

// docCoverage is the idf-weighted share of d's goal terms the query holds.
func (s *searcher) docCoverage(d *doc) float64 {
	var all, hit float64
	for _, dt := range d.terms {
		if dt.tfG == 0 {
			continue
		}
		tf := float64(dt.tfG)
		t := &s.ws.terms[dt.id]
		w := s.idf(len(t.post), t.common) * tf * (bm25K1 + 1) / (tf + bm25K1)
		all += w
		if i, ok := slices.BinarySearchFunc(s.ids, dt.id, func(q qid, id uint32) int { return cmp.Compare(q.id, id) }); ok {
			hit += w * s.ids[i].frac
		}
	}
	if all == 0 {
		return 0
	}
	return hit / all
}

// similarity is the similarity of d, given its BM25 score bm and the
// trigram similarity tri of the goals, rounded to two decimals: the query
// coverage q, or the harmonic mean of q and the goal coverage g when g is
// the larger, blended with tri; scaled by oppositeFactor when d's main
// action is the opposite of the query's.
func (s *searcher) similarity(d *doc, bm, tri float64) float64 {
	return s.scaledSimilarity(d, bm, tri, s.factor(d))
}

// factor is what d's similarity is scaled by: oppositeFactor when its main
// action is the opposite of the query's, mismatchFactor when its task
// parts do not fit the query's (see parts.go), else 1.
func (s *searcher) factor(d *doc) float64 {
	switch {
	case s.opposes(d):
		return oppositeFactor
	case !s.fits(d):
		return mismatchFactor
	}
	return 1
}

// scaledSimilarity is similarity with d's factor already known.
func (s *searcher) scaledSimilarity(d *doc, bm, tri, factor float64) float64 {
	c := s.queryCoverage(bm)
	if c > 0 {
		if g := s.docCoverage(d); g > c {
			c = 2 * c * g / (c + g)
		}
	}
	sim := max(alpha*c+(1-alpha)*tri, beta*tri) * factor
	if sim > 0 {
		// A solution that shares something keeps a similarity above 0
		// when scaled down (0.01 at least); the raise is under roundEps,
		// so the pruning bounds still hold.
		sim = max(sim, leastSimilarity)
	}
	return math.Round(sim*100) / 100
}

// bound is the highest similarity of a solution whose BM25 score is at
// most bm and trigram similarity at most tri: one whose goal the query
// covers whole, so that c = 2q/(1+q).
func (s *searcher) bound(bm, tri float64) float64 {
	q := s.queryCoverage(bm)
	return max(alpha*2*q/(1+q)+(1-alpha)*tri, beta*tri)
}

// opposes reports whether d's main action is the opposite of the query's,
// on the same thing (see sameThing): "export users" against "import
// users", not "parse the commits" against "generate a changelog".
func (s *searcher) opposes(d *doc) bool {
	f := opposedFamilies(s.dir, d.dir)
	if f == 0 {
		return false
	}
	var q, g headWords
	for _, o := range s.objs {
		q.add(o.id, o.flags, f)
	}
	for _, dt := range d.terms {
		if dt.lead != 0 {
			g.add(dt.id, dt.lead, f)
		}
	}
	return sameThing(&q, &g, f, firstSide(s.dir, f))
}

// searchTerms finds BM25 candidates, MaxScore style. Query terms are read
// term at a time, highest bound first, into per-document accumulators.
// After each of the first terms the most promising documents are evaluated,
// which raises the threshold; new documents stop being admitted as soon as
// the terms left cannot lift an unseen document over it. Later terms then
// only refine the documents seen (while that is cheaper than looking terms
// up per document), and the documents seen are evaluated in buckets of
// their bound, best first, until a bucket cannot reach the threshold.
func (s *searcher) searchTerms() {
	sc, ws := s.sc, s.ws
	done := 0
	for done < len(s.terms) && s.suffix[done] >= s.bmNeeded() {
		qt := &s.terms[done]
		for _, p := range ws.terms[qt.id].post {
			a := sc.acc[p.slot]
			if a < 0 {
				continue
			}
			if a == 0 {
				sc.touched = append(sc.touched, p.slot)
			}
			sc.acc[p.slot] = a + s.contrib(qt, p.tfG, p.tfA, p.lg, p.la)
		}
		done++
		if done <= raiseTerms && done < len(s.terms) {
			s.raise(done)
		}
	}
	for done < len(s.terms) && len(ws.terms[s.terms[done].id].post) <= conjFactor*len(sc.touched) {
		qt := &s.terms[done]
		for _, p := range ws.terms[qt.id].post {
			if a := sc.acc[p.slot]; a > 0 {
				sc.acc[p.slot] = a + s.contrib(qt, p.tfG, p.tfA, p.lg, p.la)
			}
		}
		done++
	}
	s.finish(done)
}

// raise evaluates the documents with the highest partial scores after the
// first done terms.
func (s *searcher) raise(done int) {
	sc := s.sc
	n := raiseDocs * s.k
	sc.cands = sc.cands[:0]
	for _, slot := range sc.touched {
		a := sc.acc[slot]
		if a <= 0 {
			continue
		}
		c := cand{slot: slot, ub: float64(a)}
		if len(sc.cands) < n {
			sc.cands = append(sc.cands, c)
			if len(sc.cands) == n {
				heapInit(sc.cands)
			}
			continue
		}
		if c.ub > sc.cands[0].ub {
			sc.cands[0] = c
			heapDown(sc.cands, 0)
		}
	}
	slices.SortFunc(sc.cands, func(a, b cand) int { return cmp.Compare(b.ub, a.ub) })
	for _, c := range sc.cands {
		s.evaluate(c.slot, done)
	}
}

// finish evaluates the documents seen but not yet evaluated, in buckets of
// their upper bound, best first.
func (s *searcher) finish(done int) {
	sc := s.sc
	needed := s.bmNeeded()
	rest := s.suffix[done]
	var count [numBuckets]int
	sc.cands = sc.cands[:0]
	for _, slot := range sc.touched {
		a := sc.acc[slot]
		if a <= 0 {
			continue
		}
		ub := float64(a) + rest
		if ub < needed {
			continue
		}
		sc.cands = append(sc.cands, cand{slot: slot, ub: ub})
		count[bucket(ub/s.self)]++
	}
	// Counting sort by bucket, highest first.
	var start, next [numBuckets]int
	for b, pos := numBuckets-1, 0; b >= 0; b-- {
		start[b] = pos
		pos += count[b]
	}
	next = start
	sc.sorted = slices.Grow(sc.sorted[:0], len(sc.cands))[:len(sc.cands)]
	for _, c := range sc.cands {
		b := bucket(c.ub / s.self)
		sc.sorted[next[b]] = c
		next[b]++
	}
	for b := numBuckets - 1; b >= 0; b-- {
		edge := float64(b+1) / numBuckets // the bucket's highest bound, over self
		if s.bound(edge*s.self, 1) < s.threshold()-roundEps {
			return
		}
		for _, c := range sc.sorted[start[b] : start[b]+count[b]] {
			if s.diceLeft <= 0 && !s.exhaustive {
				return
			}
			if s.bound(c.ub, 1) >= s.threshold()-roundEps {
				s.evaluate(c.slot, done)
			}
		}
	}
}

// bucket maps a normalised BM25 bound to one of numBuckets buckets; bounds
// of 1 and more share the top one.
func bucket(x float64) int {
	return min(max(int(x*numBuckets), 0), numBuckets-1)
}

// heapInit and heapDown keep a min-heap of candidates by bound.
func heapInit(h []cand) {
	for i := len(h)/2 - 1; i >= 0; i-- {
		heapDown(h, i)
	}
}

func heapDown(h []cand, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].ub < h[l].ub {
			m = r
		}
		if h[i].ub <= h[m].ub {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// admissible applies the query's filters.
func (s *searcher) admissible(d *doc) bool {
	if s.q.Project != "" && d.sol.Project != "" && d.sol.Project != s.q.Project {
		return false
	}
	if s.q.ExcludeKey != "" && d.sol.Key == s.q.ExcludeKey {
		return false
	}
	return true
}

// evaluate computes the similarity of the document in slot, whose
// accumulator holds the contributions of the first done query terms, and
// offers it to the results. It gives up as soon as the document cannot
// reach the threshold.
func (s *searcher) evaluate(slot uint32, done int) {
	sc, ws := s.sc, s.ws
	bm := sc.acc[slot]
	if bm < 0 {
		return
	}
	if bm == 0 {
		sc.touched = append(sc.touched, slot)
	}
	sc.acc[slot] = -1
	d := ws.docs[slot]
	if !s.admissible(d) {
		return
	}
	triUB := 0.0
	if len(s.qtri) > 0 && len(d.tris) > 0 {
		triUB = 2 * float64(min(len(s.qtri), len(d.tris))) / float64(len(s.qtri)+len(d.tris))
	}
	lg, la := clampU8(d.lg), clampU8(d.la)
	for i := done; i < len(s.terms); i++ {
		if s.bound(float64(bm)+s.suffix[i], triUB) < s.threshold()-roundEps {
			return
		}
		qt := &s.terms[i]
		if j := findTerm(d.terms, qt.id); j >= 0 {
			bm += s.contrib(qt, d.terms[j].tfG, d.terms[j].tfA, lg, la)
		}
	}
	if s.bound(float64(bm), triUB) < s.threshold()-roundEps {
		return
	}
	// A solution whose task does not fit the query's is scaled down: it
	// is dropped here, before it spends the trigram budget, when scaling
	// puts it below the threshold.
	f := s.factor(d)
	if f < 1 && s.bound(float64(bm), triUB)*f < s.threshold()-roundEps {
		return
	}
	tri := 0.0
	if triUB > 0 {
		if s.diceLeft <= 0 && !s.exhaustive {
			return
		}
		s.diceLeft--
		tri = 2 * float64(intersectTris(s.qtri, d.tris)) / float64(len(s.qtri)+len(d.tris))
	}
	if bm <= 0 && tri <= 0 || s.bound(float64(bm), tri)*f < s.threshold()-roundEps {
		return
	}
	sim := s.scaledSimilarity(d, float64(bm), tri, f)
	if sim < s.min-1e-9 {
		return
	}
	s.offer(result{slot: slot, sim: sim})
}

// findTerm returns the index of term id in the sorted terms, or -1.
func findTerm(terms []docTerm, id uint32) int {
	lo, hi := 0, len(terms)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if terms[m].id < id {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(terms) && terms[lo].id == id {
		return lo
	}
	return -1
}

func intersectTris(a []uint32, b []docTri) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j].h:
			i++
		case a[i] > b[j].h:
			j++
		default:
			n++
			i++
			j++
		}
	}
	return n
}

// better orders results: similarity, verified, confidence, most recently
// updated, smaller ID.
func (s *searcher) better(a, b result) bool {
	if a.sim != b.sim {
		return a.sim > b.sim
	}
	x, y := &s.ws.docs[a.slot].sol, &s.ws.docs[b.slot].sol
	if x.Verified != y.Verified {
		return x.Verified
	}
	if x.Confidence != y.Confidence {
		return x.Confidence > y.Confidence
	}
	if !x.Updated.Equal(y.Updated) {
		return x.Updated.After(y.Updated)
	}
	return x.ID < y.ID
}

func (s *searcher) offer(r result) {
	i := len(s.top)
	for i > 0 && s.better(r, s.top[i-1]) {
		i--
	}
	if i >= s.k {
		return
	}
	if len(s.top) < s.k {
		s.top = append(s.top, result{})
	}
	copy(s.top[i+1:], s.top[i:])
	s.top[i] = r
}

// searchTrigrams finds candidates by goal trigrams alone (typos, word forms
// the tokenizer does not join), for when BM25 found fewer than k results. A
// solution can reach the threshold on trigrams only if it shares at least c
// of the query's trigrams; it then holds one of the len-c+1 rarest, so only
// their postings are read, rarest first, at most triBudget of them; the
// triEvalLimit solutions sharing the most are evaluated.
func (s *searcher) searchTrigrams() {
	sc, ws := s.sc, s.ws
	x := (s.threshold() - roundEps) / beta // Dice needed
	if x > 1 {
		return
	}
	na := len(s.qtri)
	c := 1
	if x > 0 {
		c = max(1, int(math.Ceil(x*float64(na)/(2-x)-1e-9)))
	}
	if c > na {
		return
	}
	type triDF struct {
		h  uint32
		df int
	}
	ts := make([]triDF, 0, na)
	for _, h := range s.qtri {
		if p := ws.tri[h]; len(p) > 0 {
			ts = append(ts, triDF{h, len(p)})
		}
	}
	slices.SortFunc(ts, func(a, b triDF) int {
		if a.df != b.df {
			return cmp.Compare(a.df, b.df)
		}
		return cmp.Compare(a.h, b.h)
	})
	prefix := min(len(ts), na-c+1)
	budget := triBudget
	if s.exhaustive {
		budget = math.MaxInt
	}
	var hits []uint32
read:
	for _, t := range ts[:prefix] {
		for _, slot := range ws.tri[t.h] {
			if budget == 0 {
				break read
			}
			budget--
			a := sc.acc[slot]
			if a < 0 {
				continue
			}
			if sc.cnt[slot] == 0 {
				hits = append(hits, slot)
				if a == 0 {
					sc.touched = append(sc.touched, slot)
				}
			}
			sc.cnt[slot]++
		}
	}
	// Evaluate the solutions sharing the most trigrams, at most triEvalLimit.
	limit := triEvalLimit
	if s.exhaustive {
		limit = len(hits)
	}
	sc.cands = sc.cands[:0]
	for _, slot := range hits {
		c := cand{slot: slot, ub: float64(sc.cnt[slot])}
		if len(sc.cands) < limit {
			sc.cands = append(sc.cands, c)
			if len(sc.cands) == limit {
				heapInit(sc.cands)
			}
			continue
		}
		if c.ub > sc.cands[0].ub {
			sc.cands[0] = c
			heapDown(sc.cands, 0)
		}
	}
	slices.SortFunc(sc.cands, func(a, b cand) int {
		if a.ub != b.ub {
			return cmp.Compare(b.ub, a.ub)
		}
		return cmp.Compare(a.slot, b.slot)
	})
	s.diceLeft = max(s.diceLeft, len(sc.cands))
	for _, c := range sc.cands {
		d := ws.docs[c.slot]
		// Bound the Dice similarity by the trigrams it can still share.
		shared := int(c.ub) + na - prefix
		ub := 2 * float64(min(shared, len(d.tris))) / float64(na+len(d.tris))
		thr := s.threshold() - roundEps
		if s.bound(s.suffix[0], ub) < thr {
			continue
		}
		sc.acc[c.slot] = 0
		s.evaluate(c.slot, 0)
	}
}
