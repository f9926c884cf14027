package recall

import (
	"slices"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// A solution marked wrong leaves the index, and comes back when a person
// clears the mark: the store sends both as puts on the change feed.
func TestPutOfASolutionMarkedWrongRemovesIt(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("a", "rotate the TLS certificates"))
	ix.Put(sol("b", "plot revenue with matplotlib"))
	q := Query{Workspace: "w", Goal: "rotate TLS certificates", K: 5, MinSimilarity: DefaultMinSimilarity}
	if got := ids(ix.Search(q)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("before the mark: got %v", got)
	}

	marked := sol("a", "rotate the TLS certificates")
	marked.Wrong = &store.Wrong{At: time.Unix(0, 0), Note: "the run failed"}
	ix.Put(marked)
	if got := ids(ix.Search(q)); len(got) != 0 {
		t.Fatalf("a solution marked wrong is recalled: %v", got)
	}
	if ix.Has("w", "a") || ix.Len("w") != 1 {
		t.Fatalf("marked solution still indexed: Has %v, Len %d", ix.Has("w", "a"), ix.Len("w"))
	}
	ix.Put(marked) // a marked solution never indexed: nothing to remove
	checkInvariants(t, ix)

	ix.Put(sol("a", "rotate the TLS certificates"))
	if got := ids(ix.Search(q)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after the mark is cleared: got %v", got)
	}
}

// The vectors of semantic recall follow the same marks: a solution marked
// wrong leaves them and is not embedded; cleared, it is back.
func TestVectorsDropASolutionMarkedWrong(t *testing.T) {
	v := NewVectors()
	v.SetModel("m")
	s := sol("a", "rotate the TLS certificates")
	s.Embedding = &store.Embedding{Model: "m", Vector: []float32{1, 0}}
	v.Apply([]store.SolutionChange{{Seq: 1, Solution: s}})
	if v.Len("w") != 1 {
		t.Fatalf("before the mark: Len %d", v.Len("w"))
	}
	marked := s
	marked.Wrong = &store.Wrong{At: time.Unix(0, 0)}
	v.Apply([]store.SolutionChange{{Seq: 2, Solution: marked}})
	if v.Len("w") != 0 || v.PendingLen() != 0 {
		t.Fatalf("after the mark: Len %d, pending %d; want none", v.Len("w"), v.PendingLen())
	}
	v.Apply([]store.SolutionChange{{Seq: 3, Solution: s}})
	if v.Len("w") != 1 {
		t.Fatalf("after the mark is cleared: Len %d", v.Len("w"))
	}
}
