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
