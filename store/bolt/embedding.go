package bolt

import (
	"context"
	"fmt"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"go.etcd.io/bbolt"
)

// SetSolutionEmbedding stores e as the embedding of one solution whose goal
// is still goal, as a new change in the feed; see [store.Store]. The
// solution keeps its Updated time and its place in retention's order.
func (b *Store) SetSolutionEmbedding(ctx context.Context, workspace, id, goal string, e store.Embedding) error {
	workspace, id, goal, e, err := backend.PrepareEmbedding(workspace, id, goal, e)
	if err != nil {
		return fmt.Errorf("store: set solution embedding: %w", err)
	}
	return b.update(ctx, "set solution embedding", func(tx *bbolt.Tx) error {
		ws := openSolutionWorkspace(tx.Bucket(bktSolutions), workspace)
		if ws == nil || id == "" {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		v := ws.ids.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("%s: %w", id, store.ErrNotFound)
		}
		rec, oldSeq, err := decodeSolution(v)
		if err != nil {
			return fmt.Errorf("solution %s: %w", id, err)
		}
		if rec.Goal != goal {
			return fmt.Errorf("%s: goal changed: %w", id, store.ErrNotFound)
		}
		rec.Embedding = &e
		feed := tx.Bucket(bktFeed)
		if err := feed.Delete(seqKey(oldSeq)); err != nil {
			return err
		}
		seq, err := feed.NextSequence()
		if err != nil {
			return err
		}
		if err := feed.Put(seqKey(seq), feedEntry(false, workspace, id)); err != nil {
			return err
		}
		nv, err := encodeSolution(&rec, seq)
		if err != nil {
			return err
		}
		return ws.ids.Put([]byte(id), nv)
	})
}
