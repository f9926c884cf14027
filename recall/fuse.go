package recall

import (
	"cmp"
	"math"
	"slices"
)

// Fusion of the lexical and the vector ranking (semantic recall).
const (
	// rrfK is reciprocal rank fusion's constant: a solution scores
	// 1/(rrfK+rank) in each list it is in (Cormack, Clarke and Büttcher,
	// SIGIR 2009, where 60 works across collections).
	rrfK = 60
	// vectorDepth is how many nearest vectors take part in a fusion.
	vectorDepth = 20
)

// Fuse returns the solutions of q.Workspace most similar to q.Goal by both
// rankings, best first, at most q.K of them: the lexical one of [Index.Search]
// and the vector one of [Vectors.Search] with vec, q.Goal's embedding.
// Their ranks are fused (reciprocal rank fusion: each list a solution is
// in adds 1/(60+rank)), so that a solution both find comes first, then one
// found by either.
//
// The precision rules come after the fusion. A solution is recalled when
// its lexical similarity reaches q.MinSimilarity (the lexical rules, the
// opposite direction included, are in that similarity), or when the
// cosine similarity of the goal vectors reaches minCosine and the lexical
// side does not reject it for the goal (see [Index.rejects]): a reworded
// task the words miss is found, a task that goes the other way is not,
// however close its vector.
//
// A match's Similarity is the larger of its lexical similarity and its
// cosine similarity, rounded to two decimals. Among equal fused scores,
// the higher Similarity comes first, then as in Search. With an empty vec
// (the embedding failed or came too late) Fuse is Search.
func Fuse(ix *Index, vs *Vectors, q Query, vec []float32, minCosine float64) []Match {
	k := q.K
	if k <= 0 {
		k = 1
	}
	k = min(k, maxK)
	var hits []VectorHit
	if len(vec) > 0 && vs != nil {
		hits = vs.Search(q, vec, vectorDepth)
	}
	if len(hits) == 0 {
		return ix.Search(q)
	}
	wide := q
	wide.K, wide.MinSimilarity = maxK, 0
	lex := ix.Search(wide)

	type cand struct {
		Match
		lexical bool // the lexical similarity reaches q.MinSimilarity
		cosine  float64
		score   float64
	}
	byID := make(map[string]*cand, len(lex)+len(hits))
	var all []*cand
	for i, m := range lex {
		c := &cand{Match: m, lexical: m.Similarity >= q.MinSimilarity-1e-9, cosine: math.Inf(-1)}
		c.score = 1 / float64(rrfK+i+1)
		byID[m.Solution.ID] = c
		all = append(all, c)
	}
	var vectorOnly []string
	for i, h := range hits {
		c := byID[h.Solution.ID]
		if c == nil {
			c = &cand{Match: Match{Solution: h.Solution}}
			byID[h.Solution.ID] = c
			all = append(all, c)
		}
		c.cosine = h.Cosine
		c.score += 1 / float64(rrfK+i+1)
		if !c.lexical && h.Cosine >= minCosine {
			vectorOnly = append(vectorOnly, h.Solution.ID)
		}
	}
	rejected := ix.rejects(q, vectorOnly)
	kept := all[:0]
	for _, c := range all {
		switch {
		case c.lexical:
		case c.cosine >= minCosine && !rejected[c.Solution.ID]:
		default:
			continue
		}
		c.Similarity = math.Round(min(1, max(c.Similarity, c.cosine))*100) / 100
		kept = append(kept, c)
	}
	slices.SortFunc(kept, func(a, b *cand) int {
		if a.score != b.score {
			return cmp.Compare(b.score, a.score)
		}
		if a.Similarity != b.Similarity {
			return cmp.Compare(b.Similarity, a.Similarity)
		}
		x, y := &a.Solution, &b.Solution
		if x.Verified != y.Verified {
			if x.Verified {
				return -1
			}
			return 1
		}
		if x.Confidence != y.Confidence {
			return cmp.Compare(y.Confidence, x.Confidence)
		}
		if !x.Updated.Equal(y.Updated) {
			return y.Updated.Compare(x.Updated)
		}
		return cmp.Compare(x.ID, y.ID)
	})
	out := make([]Match, 0, min(k, len(kept)))
	for _, c := range kept[:min(k, len(kept))] {
		out = append(out, c.Match)
	}
	return out
}

// rejects returns the solutions among ids that the lexical rules reject
// for q's goal whatever their similarity ([searcher.conflicts]: an
// opposite or another named action, source and target swapped, tools
// that do not meet). The solutions of q.Workspace the index does not hold
// are not rejected.
func (ix *Index) rejects(q Query, ids []string) map[string]bool {
	if len(ids) == 0 {
		return nil
	}
	s := ix.prepare(q)
	if s == nil {
		return nil // nothing in the goal the rules can read
	}
	defer s.release()
	out := map[string]bool{}
	for _, id := range ids {
		slot, ok := s.ws.byID[id]
		if !ok {
			continue
		}
		if s.conflicts(s.ws.docs[slot]) {
			out[id] = true
		}
	}
	return out
}
