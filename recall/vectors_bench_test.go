package recall

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

// BenchmarkVectorSearch measures one vector search (the 20 nearest, as a
// fusion asks) in a workspace of 100k solutions, for the lengths of
// common embedding models: the mock's 256, nomic-embed-text's 768,
// text-embedding-3-small's 1536.
func BenchmarkVectorSearch(b *testing.B) {
	const n = 100_000
	for _, dim := range []int{256, 768, 1536} {
		b.Run(fmt.Sprintf("solutions=%d/dims=%d", n, dim), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(dim)))
			vs := NewVectors()
			vs.SetModel("m")
			changes := make([]store.SolutionChange, 0, 1000)
			for i := range n {
				v := make([]float32, dim)
				for j := range v {
					v[j] = float32(rng.NormFloat64())
				}
				id := fmt.Sprintf("s%06d", i)
				changes = append(changes, store.SolutionChange{Seq: int64(i + 1), Solution: store.Solution{
					ID: id, Workspace: "w", Key: id, Goal: "goal " + id, Embedding: &store.Embedding{Model: "m", Vector: v},
				}})
				if len(changes) == cap(changes) {
					vs.Apply(changes)
					changes = changes[:0]
				}
			}
			vs.Apply(changes)
			q := make([]float32, dim)
			for j := range q {
				q[j] = float32(rng.NormFloat64())
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if hits := vs.Search(Query{Workspace: "w"}, q, vectorDepth); len(hits) != vectorDepth {
					b.Fatalf("%d hits", len(hits))
				}
			}
		})
	}
}
