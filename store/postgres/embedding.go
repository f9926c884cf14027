package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// SetSolutionEmbedding stores e as the embedding of one solution whose goal
// is still goal, with a new seq (a change in the feed) under the lock of
// solution writes; see [store.Store]. The solution keeps its Updated time.
func (p *Store) SetSolutionEmbedding(ctx context.Context, workspace, id, goal string, e store.Embedding) error {
	workspace, id, goal, e, err := backend.PrepareEmbedding(workspace, id, goal, e)
	if err != nil {
		return fmt.Errorf("store: set solution embedding: %w", err)
	}
	if err := p.use(ctx, "set solution embedding"); err != nil {
		return err
	}
	var n int64
	err = pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if err := lockSolutionWrites(ctx, tx); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE solutions SET embedding_model = $4, embedding = $5, seq = nextval('solution_seq')
			WHERE workspace = $1 AND id = $2 AND goal = $3`, workspace, id, goal, e.Model, stored.Vector(e.Vector))
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("store: set solution embedding: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store: set solution embedding: %s: %w", id, store.ErrNotFound)
	}
	return nil
}
