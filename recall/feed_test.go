package recall

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

// sliceFeed serves changes from a slice, failing from failAt on when set.
type sliceFeed struct {
	changes []store.SolutionChange
	failAt  int64
}

var _ ChangeFeed = (*sliceFeed)(nil)

func (f *sliceFeed) SolutionChanges(_ context.Context, after int64, limit int) ([]store.SolutionChange, int64, error) {
	if f.failAt > 0 && after >= f.failAt {
		return nil, after, errors.New("feed down")
	}
	var out []store.SolutionChange
	next := after
	for _, c := range f.changes {
		if c.Seq > after && len(out) < limit {
			out = append(out, c)
			next = c.Seq
		}
	}
	return out, next, nil
}

func TestFollowPagesAppliesDeletesAndKeepsItsPlaceOnError(t *testing.T) {
	feed := &sliceFeed{}
	for i := 1; i <= 2500; i++ {
		feed.changes = append(feed.changes, store.SolutionChange{Seq: int64(i), Solution: store.Solution{
			ID: fmt.Sprint("s", i), Workspace: "w", Key: fmt.Sprint("k", i), Goal: fmt.Sprint("goal ", i),
		}})
	}
	feed.changes = append(feed.changes, store.SolutionChange{Seq: 2501, Deleted: true, Solution: store.Solution{ID: "s7", Workspace: "w"}})
	ix := NewIndex()
	next, applied, err := ix.Follow(context.Background(), feed, 0)
	if err != nil || next != 2501 || applied != 2501 || ix.Len("w") != 2499 {
		t.Fatalf("next %d applied %d err %v len %d", next, applied, err, ix.Len("w"))
	}

	// The feed fails after the first page: that page stays applied and
	// the cursor says how far it went.
	feed.failAt = 1000
	ix2 := NewIndex()
	next, applied, err = ix2.Follow(context.Background(), feed, 0)
	if err == nil || next != 1000 || applied != 1000 || ix2.Len("w") != 1000 {
		t.Fatalf("next %d applied %d err %v len %d", next, applied, err, ix2.Len("w"))
	}
}
