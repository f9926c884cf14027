package recall

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

func hitIDs(hs []VectorHit) []string {
	out := []string{}
	for _, h := range hs {
		out = append(out, h.Solution.ID)
	}
	return out
}

func pendingIDs(ps []Pending) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Workspace+"/"+p.ID+":"+p.Goal)
	}
	return out
}

func withEmb(s store.Solution, model string, vec ...float32) store.Solution {
	s.Embedding = &store.Embedding{Model: model, Vector: vec}
	return s
}

func TestVectorsFollowChanges(t *testing.T) {
	vs := NewVectors()
	vs.SetModel("m")
	a, b, c := fuseSol("a", "goal a", nil), fuseSol("b", "goal b", nil), fuseSol("c", "goal c", nil)
	vs.Apply([]store.SolutionChange{
		{Seq: 1, Solution: withEmb(a, "m", 3, 4)}, // normalised to (0.6, 0.8)
		{Seq: 2, Solution: withEmb(b, "other", 1, 0)},
		{Seq: 3, Solution: c},
	})
	if n := vs.Len("w"); n != 1 {
		t.Fatalf("Len = %d, want 1 (only a has a vector of m)", n)
	}
	hits := vs.Search(Query{Workspace: "w"}, []float32{0.6, 0.8}, 5)
	if len(hits) != 1 || hits[0].Solution.ID != "a" || hits[0].Cosine < 0.999 || hits[0].Solution.Embedding != nil {
		t.Fatalf("Search = %+v", hits)
	}
	if !vs.Embedded("w", "a", "goal a") || vs.Embedded("w", "a", "goal b") || vs.Embedded("w", "b", "goal b") {
		t.Fatal("Embedded: want a only, for its own goal")
	}
	// b (another model's vector) and c (none) wait for a vector of m.
	select {
	case <-vs.Wake():
	default:
		t.Fatal("no wake-up for pending solutions")
	}
	if got := pendingIDs(vs.Next(10)); !slices.Equal(got, []string{"w/b:goal b", "w/c:goal c"}) {
		t.Fatalf("Next = %v", got)
	}
	if vs.PendingLen() != 0 || len(vs.Next(10)) != 0 {
		t.Fatal("Next did not take what it handed out")
	}

	// c gets its vector; a's goal changes (its vector goes, it is pending
	// again); b is deleted.
	a2 := a
	a2.Goal = "goal a, reworded"
	vs.Apply([]store.SolutionChange{
		{Seq: 4, Solution: withEmb(c, "m", 1, 0)},
		{Seq: 5, Solution: a2},
		{Seq: 6, Deleted: true, Solution: store.Solution{Workspace: "w", ID: "b"}},
		{Seq: 7, Deleted: true, Solution: store.Solution{Workspace: "nowhere", ID: "x"}},
	})
	if got := hitIDs(vs.Search(Query{Workspace: "w"}, []float32{1, 0}, 5)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("after the changes: %v, want [c]", got)
	}
	if got := pendingIDs(vs.Next(10)); !slices.Equal(got, []string{"w/a:goal a, reworded"}) {
		t.Fatalf("pending after the changes: %v", got)
	}

	// Another model: nothing is searched, everything is pending again.
	vs.SetModel("m2")
	if vs.Len("w") != 0 {
		t.Fatal("vectors of the old model still searched")
	}
	if got := pendingIDs(vs.Next(1)); !slices.Equal(got, []string{"w/a:goal a, reworded"}) {
		t.Fatalf("Next(1) after the model changed: %v", got)
	}
	if vs.PendingLen() != 1 {
		t.Fatalf("PendingLen = %d, want 1 (c)", vs.PendingLen())
	}
	// No model: nothing pending, nothing searched.
	vs.SetModel("")
	vs.Apply([]store.SolutionChange{{Seq: 8, Solution: withEmb(a2, "", 1, 0)}})
	if vs.PendingLen() != 0 || vs.Len("w") != 0 {
		t.Fatalf("without a model: %d pending, %d searched", vs.PendingLen(), vs.Len("w"))
	}
}

// TestVectorsLengths: a workspace's vectors are of the first one's
// length; others and zero vectors are left out without being pending
// again (embedding them again would give the same).
func TestVectorsLengths(t *testing.T) {
	vs := NewVectors()
	vs.SetModel("m")
	vs.Apply([]store.SolutionChange{
		{Seq: 1, Solution: withEmb(fuseSol("a", "a", nil), "m", 1, 0)},
		{Seq: 2, Solution: withEmb(fuseSol("b", "b", nil), "m", 1, 0, 0)},
		{Seq: 3, Solution: withEmb(fuseSol("z", "z", nil), "m", 0, 0)},
	})
	if vs.Len("w") != 1 || vs.PendingLen() != 0 {
		t.Fatalf("Len %d, pending %d; want 1, 0", vs.Len("w"), vs.PendingLen())
	}
	if hits := vs.Search(Query{Workspace: "w"}, []float32{1, 0, 0}, 5); hits != nil {
		t.Fatalf("a query of another length found %v", hitIDs(hits))
	}
	// Once the workspace has no vector left, the next sets the length.
	vs.Apply([]store.SolutionChange{
		{Seq: 4, Deleted: true, Solution: store.Solution{Workspace: "w", ID: "a"}},
		{Seq: 5, Solution: withEmb(fuseSol("c", "c", nil), "m", 0, 0, 1)},
	})
	if got := hitIDs(vs.Search(Query{Workspace: "w"}, []float32{0, 0, 2}, 5)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("three dimensions: %v", got)
	}
}

// TestVectorSearchMatchesBruteForce compares Search with sorting every
// solution's cosine, over random vectors with swaps and removals.
func TestVectorSearchMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	vs := NewVectors()
	vs.SetModel("m")
	const dim = 16
	vecs := map[string][]float32{}
	projects := map[string]string{}
	seq := int64(0)
	for i := range 300 {
		id := fmt.Sprintf("s%03d", rng.IntN(200))
		seq++
		if i%7 == 6 {
			delete(vecs, id)
			vs.Apply([]store.SolutionChange{{Seq: seq, Deleted: true, Solution: store.Solution{Workspace: "w", ID: id}}})
			continue
		}
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		s := fuseSol(id, "goal "+id, nil)
		s.Project = []string{"", "p", "q"}[rng.IntN(3)]
		vecs[id], projects[id] = v, s.Project
		vs.Apply([]store.SolutionChange{{Seq: seq, Solution: withEmb(s, "m", v...)}})
	}
	for range 20 {
		qv := make([]float32, dim)
		for j := range qv {
			qv[j] = float32(rng.NormFloat64())
		}
		type sc struct {
			id  string
			cos float64
		}
		var all []sc
		for id, v := range vecs {
			if projects[id] == "q" {
				continue
			}
			all = append(all, sc{id, float64(dot(qv, v)) / norm(qv) / norm(v)})
		}
		slices.SortFunc(all, func(a, b sc) int {
			if a.cos != b.cos {
				if a.cos > b.cos {
					return -1
				}
				return 1
			}
			return 0
		})
		got := vs.Search(Query{Workspace: "w", Project: "p"}, qv, 10)
		if len(got) != 10 {
			t.Fatalf("%d hits, want 10", len(got))
		}
		for i, h := range got {
			if d := h.Cosine - all[i].cos; d > 1e-5 || d < -1e-5 {
				t.Fatalf("hit %d: %s at %.6f, want %s at %.6f", i, h.Solution.ID, h.Cosine, all[i].id, all[i].cos)
			}
		}
	}
}

// failingFeed fails every read.
type failingFeed struct{}

func (failingFeed) SolutionChanges(context.Context, int64, int) ([]store.SolutionChange, int64, error) {
	return nil, 0, errors.New("down")
}

// TestVectorsTee: the index gets the changes without embeddings; a
// failed read applies nothing.
func TestVectorsTee(t *testing.T) {
	vs := NewVectors()
	vs.SetModel("m")
	feed := changeList{{Seq: 1, Solution: withEmb(fuseSol("a", "goal a", nil), "m", 1, 0)}}
	ch, _, err := vs.Tee(feed).SolutionChanges(context.Background(), 0, 10)
	if err != nil || len(ch) != 1 || ch[0].Solution.Embedding != nil {
		t.Fatalf("tee = %+v, %v; want the change without its embedding", ch, err)
	}
	if vs.Len("w") != 1 {
		t.Fatal("the vector did not reach the store")
	}
	if _, _, err := vs.Tee(failingFeed{}).SolutionChanges(context.Background(), 1, 10); err == nil {
		t.Fatal("the feed's error was lost")
	}
}
