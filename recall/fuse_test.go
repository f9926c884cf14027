package recall

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// at returns the unit vector at the angle whose cosine with (1, 0) is cos:
// the geometry of a test's embeddings, known exactly.
func at(cos float64) []float32 {
	return []float32{float32(cos), float32(math.Sqrt(1 - cos*cos))}
}

var fuseT0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// fuseSol is a solution of workspace w with an embedding of model m.
func fuseSol(id, goal string, vec []float32) store.Solution {
	s := store.Solution{
		ID: id, Workspace: "w", Key: GoalKey(goal), Goal: goal, Approach: "approach of " + id,
		Outcome: "done", Confidence: 0.9, Source: store.SourceAPI, Created: fuseT0, Updated: fuseT0,
	}
	if vec != nil {
		s.Embedding = &store.Embedding{Model: "m", Vector: vec}
	}
	return s
}

// changeList is a change feed of the changes it holds.
type changeList []store.SolutionChange

func (f changeList) SolutionChanges(_ context.Context, after int64, limit int) ([]store.SolutionChange, int64, error) {
	var out []store.SolutionChange
	last := after
	for _, ch := range f {
		if ch.Seq > after && len(out) < limit {
			out = append(out, ch)
			last = ch.Seq
		}
	}
	return out, last, nil
}

// fuseIndex loads sols into a new index and vector store (model m)
// through one feed, as the memory does.
func fuseIndex(t *testing.T, sols ...store.Solution) (*Index, *Vectors) {
	t.Helper()
	var feed changeList
	for i, s := range sols {
		feed = append(feed, store.SolutionChange{Seq: int64(i + 1), Solution: s})
	}
	ix, vs := NewIndex(), NewVectors()
	vs.SetModel("m")
	if _, _, err := ix.Follow(context.Background(), vs.Tee(feed), 0); err != nil {
		t.Fatal(err)
	}
	return ix, vs
}

func matchIDs(ms []Match) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Solution.ID)
	}
	return out
}

func lexicalSim(ix *Index, q Query, id string) float64 {
	q.K, q.MinSimilarity = maxK, 0
	for _, m := range ix.Search(q) {
		if m.Solution.ID == id {
			return m.Similarity
		}
	}
	return 0
}

// TestFuseOrder proves the fusion with embeddings of known geometry: the
// query's vector is (1, 0) and each solution's is at a chosen cosine.
func TestFuseOrder(t *testing.T) {
	ix, vs := fuseIndex(t,
		// The words' best, but its vector is far.
		fuseSol("lex", "import the users from a CSV file", at(0.2)),
		// Found by both: second by words, first by vector.
		fuseSol("both", "load users from CSV", at(0.95)),
		// A rewording the words miss, near by vector.
		fuseSol("vec", "bring customer records in from spreadsheets", at(0.9)),
		// Nearest of all by vector, but it goes the other way.
		fuseSol("opposite", "export the users to a CSV file", at(0.99)),
		// Shares nothing, and its vector is under the threshold.
		fuseSol("far", "rotate the TLS certificates", at(0.5)),
		// No vector at all: only the words can find it.
		fuseSol("novec", "import users from CSV files nightly", nil),
	)
	q := Query{Workspace: "w", Goal: "import the users from a CSV file", K: 5, MinSimilarity: DefaultMinSimilarity}
	query := []float32{1, 0}

	// The premises, so that the fused order below means something.
	if a, b := lexicalSim(ix, q, "lex"), lexicalSim(ix, q, "both"); !(a > b && b >= q.MinSimilarity) {
		t.Fatalf("lexical: lex %.2f, both %.2f; want lex > both >= %.2f", a, b, q.MinSimilarity)
	}
	if s := lexicalSim(ix, q, "vec"); s >= q.MinSimilarity {
		t.Fatalf("lexical similarity of the rewording %.2f: the words find it", s)
	}
	if s := lexicalSim(ix, q, "opposite"); s >= q.MinSimilarity {
		t.Fatalf("lexical similarity of the opposite %.2f: the words recall it", s)
	}
	lexOnly := matchIDs(ix.Search(q))
	if lexOnly[0] != "lex" || slices.Contains(lexOnly, "vec") {
		t.Fatalf("lexical alone = %v", lexOnly)
	}

	got := Fuse(ix, vs, q, query, 0.6)
	// both: 1/(60+2) + 1/(60+2) (vector rank 2 after the opposite);
	// lex: 1/(60+1) + 1/(60+5); vec: 1/(60+3); novec: lexical only.
	want := []string{"both", "lex", "novec", "vec"}
	if !slices.Equal(matchIDs(got), want) {
		t.Fatalf("fused = %v, want %v", matchIDs(got), want)
	}
	for _, m := range got {
		if m.Solution.Embedding != nil {
			t.Errorf("%s: match carries the embedding", m.Solution.ID)
		}
	}
	sims := map[string]float64{}
	for _, m := range got {
		sims[m.Solution.ID] = m.Similarity
	}
	if sims["vec"] != 0.9 || sims["both"] != 0.95 {
		t.Errorf("similarities %v: want the cosine where it is the larger (vec 0.9, both 0.95)", sims)
	}

	// K cuts the fused list.
	q.K = 2
	if got := matchIDs(Fuse(ix, vs, q, query, 0.6)); !slices.Equal(got, want[:2]) {
		t.Fatalf("K=2: %v", got)
	}
	// A higher cosine threshold drops the vector-only match.
	q.K = 5
	if got := matchIDs(Fuse(ix, vs, q, query, 0.95)); slices.Contains(got, "vec") || !slices.Contains(got, "both") {
		t.Fatalf("min cosine 0.95: %v", got)
	}
}

// TestFuseFallsBackToLexical: without a query vector, or one the
// workspace's vectors cannot be compared with, the result is Search's.
func TestFuseFallsBackToLexical(t *testing.T) {
	ix, vs := fuseIndex(t,
		fuseSol("lex", "import the users from a CSV file", at(0.2)),
		fuseSol("vec", "bring customer records in from spreadsheets", at(0.9)),
	)
	q := Query{Workspace: "w", Goal: "import the users from a CSV file", K: 5, MinSimilarity: DefaultMinSimilarity}
	want := matchIDs(ix.Search(q))
	for name, vec := range map[string][]float32{
		"no vector":    nil,
		"other length": {1, 0, 0},
		"zero":         {0, 0},
	} {
		if got := matchIDs(Fuse(ix, vs, q, vec, 0.6)); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want lexical %v", name, got, want)
		}
	}
	if got := matchIDs(Fuse(ix, nil, q, []float32{1, 0}, 0.6)); !slices.Equal(got, want) {
		t.Errorf("no vector store: %v, want lexical %v", got, want)
	}
	if got := matchIDs(Fuse(ix, vs, q, []float32{1, 0}, 0.6)); !slices.Equal(got, []string{"lex", "vec"}) {
		t.Errorf("with the vector: %v", got)
	}
}

// TestFuseFilters: the vector side applies the project and ExcludeKey
// filters as the words do.
func TestFuseFilters(t *testing.T) {
	a := fuseSol("a", "bring customer records in from spreadsheets", at(0.9))
	a.Project = "p1"
	b := fuseSol("b", "pull client rows out of spreadsheets", at(0.8))
	ix, vs := fuseIndex(t, a, b)
	q := Query{Workspace: "w", Project: "p2", Goal: "import the users from a CSV file", K: 5, MinSimilarity: 0.35}
	if got := matchIDs(Fuse(ix, vs, q, []float32{1, 0}, 0.6)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("project p2: %v", got)
	}
	q.Project, q.ExcludeKey = "", b.Key
	if got := matchIDs(Fuse(ix, vs, q, []float32{1, 0}, 0.6)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("excluding b: %v", got)
	}
	q.Workspace = "other"
	if got := Fuse(ix, vs, q, []float32{1, 0}, 0.6); len(got) != 0 {
		t.Fatalf("another workspace: %v", matchIDs(got))
	}
}

// TestFuseKeepsThePrecisionRules: a vector near the task does not make a
// different task recalled: source and target swapped, or another
// language, are rejected as the words' rules reject them; a rewording
// with the same parts passes.
func TestFuseKeepsThePrecisionRules(t *testing.T) {
	for _, c := range []struct {
		goal string
		sols []store.Solution
		want []string
	}{
		{"migrate the orders database from MySQL to PostgreSQL", []store.Solution{
			fuseSol("swapped", "migrate the orders database from PostgreSQL to MySQL", at(0.99)),
			fuseSol("reworded", "move the order tables off MySQL and onto PostgreSQL", at(0.95)),
		}, []string{"reworded"}},
		{"write the command line tool in Python", []store.Solution{
			fuseSol("rust", "write the command line tool in Rust", at(0.98)),
			fuseSol("reworded", "build a Python CLI", at(0.9)),
		}, []string{"reworded"}},
		{"keep the dependencies up to date with Dependabot", []store.Solution{
			fuseSol("renovate", "keep the dependencies up to date with Renovate", at(0.97)),
			fuseSol("reworded", "a bot that opens pull requests to bump our libraries, Dependabot", at(0.9)),
		}, []string{"reworded"}},
	} {
		ix, vs := fuseIndex(t, c.sols...)
		q := Query{Workspace: "w", Goal: c.goal, K: 5, MinSimilarity: DefaultMinSimilarity}
		if got := matchIDs(Fuse(ix, vs, q, []float32{1, 0}, 0.6)); !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, want %v", c.goal, got, c.want)
		}
	}
}
