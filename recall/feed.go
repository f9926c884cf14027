package recall

import (
	"context"

	"github.com/scarproxy/scarproxy/store"
)

// ChangeFeed is the part of a store an index follows: its solution
// changes in sequence order (see store.Store.SolutionChanges).
type ChangeFeed interface {
	SolutionChanges(ctx context.Context, after int64, limit int) ([]store.SolutionChange, int64, error)
}

// followPage is how many changes Follow asks for at a time.
const followPage = 1000

// Follow applies to the index every change of feed after the cursor after,
// page by page. It returns the cursor reached and how many changes it
// applied; on an error, the pages applied so far stay applied and the
// cursor says how far they went. A new index follows from 0.
func (ix *Index) Follow(ctx context.Context, feed ChangeFeed, after int64) (int64, int, error) {
	applied := 0
	for {
		changes, next, err := feed.SolutionChanges(ctx, after, followPage)
		if err != nil {
			return after, applied, err
		}
		for _, ch := range changes {
			if ch.Deleted {
				ix.Delete(ch.Solution.Workspace, ch.Solution.ID)
			} else {
				ix.Put(ch.Solution)
			}
		}
		applied += len(changes)
		after = next
		if len(changes) < followPage {
			return after, applied, nil
		}
	}
}
