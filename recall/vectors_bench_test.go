package recall

import (
	"context"
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

// BenchmarkFuse measures a whole hybrid recall (the words' search, the
// vectors' and their fusion, 256 dimensions) in a workspace of 100k
// solutions, beside the words' search alone on the same queries.
func BenchmarkFuse(b *testing.B) {
	const n, dim = 100_000, 256
	verbs := []string{"fix", "add", "remove", "parse", "write", "migrate", "cache", "retry", "deploy", "test", "import", "export"}
	objects := []string{"config loader", "unit tests", "http client", "login handler", "csv export", "kafka consumer",
		"rate limiter", "webhook sender", "tls certificates", "cron jobs", "s3 uploads", "audit log", "search index"}
	places := []string{"", "in the billing service", "for postgres", "in the react app", "on windows", "under load"}
	rng := rand.New(rand.NewPCG(9, 9))
	goal := func() string {
		return verbs[rng.IntN(len(verbs))] + " the " + objects[rng.IntN(len(objects))] + " " + places[rng.IntN(len(places))] + fmt.Sprintf(" %d", rng.IntN(1000))
	}
	var feed changeList
	for i := range n {
		v := make([]float32, dim)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		g := goal()
		feed = append(feed, store.SolutionChange{Seq: int64(i + 1), Solution: store.Solution{
			ID: fmt.Sprintf("s%06d", i), Workspace: "w", Key: fmt.Sprintf("k%06d", i), Goal: g, Approach: "did it",
			Confidence: 0.8, Embedding: &store.Embedding{Model: "m", Vector: v},
		}})
	}
	ix, vs := NewIndex(), NewVectors()
	vs.SetModel("m")
	if _, _, err := ix.Follow(context.Background(), vs.Tee(feed), 0); err != nil {
		b.Fatal(err)
	}
	queries := make([]string, 64)
	qvecs := make([][]float32, 64)
	for i := range queries {
		queries[i] = goal()
		qvecs[i] = make([]float32, dim)
		for j := range qvecs[i] {
			qvecs[i][j] = float32(rng.NormFloat64())
		}
	}
	b.Run("words", func(b *testing.B) {
		i := 0
		for b.Loop() {
			ix.Search(Query{Workspace: "w", Goal: queries[i%64], K: 1, MinSimilarity: DefaultMinSimilarity})
			i++
		}
	})
	b.Run("fused", func(b *testing.B) {
		i := 0
		for b.Loop() {
			Fuse(ix, vs, Query{Workspace: "w", Goal: queries[i%64], K: 1, MinSimilarity: DefaultMinSimilarity}, qvecs[i%64], DefaultEmbeddingsMinSimilarity)
			i++
		}
	})
}
