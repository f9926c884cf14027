package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// PutConversations stores the labels of conversations that have none, in
// one statement; see [store.Store].
func (p *Store) PutConversations(ctx context.Context, batch []store.Conversation) error {
	recs, err := backend.PrepareConversations(batch)
	if err != nil {
		return fmt.Errorf("store: put conversations: %w", err)
	}
	if err := p.use(ctx, "put conversations"); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	var ws, proj, ids, tasks, agents []string
	var started []time.Time
	for _, c := range recs {
		ws, proj, ids = append(ws, c.Workspace), append(proj, c.Project), append(ids, c.ID)
		tasks, agents, started = append(tasks, c.Task), append(agents, c.Agent), append(started, c.Started)
	}
	_, err = p.pool.Exec(ctx, `INSERT INTO conversations (workspace, project, id, task, agent, started)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
		ON CONFLICT DO NOTHING`, ws, proj, ids, tasks, agents, started)
	if err != nil {
		return fmt.Errorf("store: put conversations: %w", err)
	}
	return nil
}

// GetConversations returns the tenant's labels among ids; see [store.Store].
func (p *Store) GetConversations(ctx context.Context, workspace, project string, ids []string) (map[string]store.Conversation, error) {
	ids, err := backend.ConversationIDs(ids)
	if err != nil {
		return nil, fmt.Errorf("store: get conversations: %w", err)
	}
	if err := p.use(ctx, "get conversations"); err != nil {
		return nil, err
	}
	out := map[string]store.Conversation{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := p.pool.Query(ctx, `SELECT workspace, project, id, task, agent, started FROM conversations
		WHERE workspace = $1 AND project = $2 AND id = ANY($3)`, stored.Text(workspace), stored.Text(project), ids)
	if err != nil {
		return nil, fmt.Errorf("store: get conversations: %w", err)
	}
	var c store.Conversation
	_, err = pgx.ForEachRow(rows, []any{&c.Workspace, &c.Project, &c.ID, &c.Task, &c.Agent, &c.Started}, func() error {
		c.Started = c.Started.UTC()
		out[c.ID] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: get conversations: %w", err)
	}
	return out, nil
}

// PruneConversations removes the labels of conversations started before
// before; see [store.Store].
func (p *Store) PruneConversations(ctx context.Context, before time.Time) (int, error) {
	if err := p.use(ctx, "prune conversations"); err != nil {
		return 0, err
	}
	tag, err := p.pool.Exec(ctx, `DELETE FROM conversations WHERE started < $1`, stored.CeilMicro(before))
	if err != nil {
		return 0, fmt.Errorf("store: prune conversations: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
