package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/backend"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// addUsage adds the counts of several records (one per key) to the rows
// of their keys, creating them, in one statement and in the order of its
// arrays (see usageColumns): the order in which it locks the rows.
const addUsage = `INSERT INTO usage AS u (workspace, project, conversation, provider, model, hour,
		requests, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens)
	SELECT workspace, project, conversation, provider, model, hour,
		requests, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[],
		$7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[])
		WITH ORDINALITY AS r(workspace, project, conversation, provider, model, hour,
			requests, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, n)
	ORDER BY n
	ON CONFLICT (workspace, project, conversation, hour, provider, model) DO UPDATE SET
		requests = u.requests + excluded.requests,
		input_tokens = u.input_tokens + excluded.input_tokens,
		output_tokens = u.output_tokens + excluded.output_tokens,
		cache_read_tokens = u.cache_read_tokens + excluded.cache_read_tokens,
		cache_write_tokens = u.cache_write_tokens + excluded.cache_write_tokens`

// usageColumns returns the arguments of addUsage for recs: one array per
// column.
func usageColumns(recs []store.Usage) []any {
	n := len(recs)
	wss, projects, convs, providers, models := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	hours := make([]time.Time, n)
	reqs, ins, outs, reads, writes := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, u := range recs {
		wss[i], projects[i], convs[i], providers[i], models[i] = u.Workspace, u.Project, u.Conversation, u.Provider, u.Model
		hours[i] = u.Hour
		reqs[i], ins[i], outs[i], reads[i], writes[i] = u.Requests, u.Input, u.Output, u.CacheRead, u.CacheWrite
	}
	return []any{wss, projects, convs, providers, models, hours, reqs, ins, outs, reads, writes}
}

// codeOutOfRange is PostgreSQL's numeric_value_out_of_range: a sum that
// does not fit a bigint.
const codeOutOfRange = "22003"

// usageErr maps a count that overflows a bigint to store.ErrInvalid, as
// the bbolt store reports it.
func usageErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == codeOutOfRange {
		return fmt.Errorf("%w: usage count overflows: %w", store.ErrInvalid, err)
	}
	return err
}

// AddUsage adds each record's counts to the row of its key, creating it,
// in one statement; see [store.Store]. Records of one key are summed
// first (a statement may not update a row twice), and the rows are locked
// in key order, the same in every replica, so concurrent batches wait
// for each other instead of deadlocking.
func (p *Store) AddUsage(ctx context.Context, batch []store.Usage) error {
	recs, err := backend.PrepareUsage(batch)
	if err != nil {
		return fmt.Errorf("store: add usage: %w", err)
	}
	if err := p.use(ctx, "add usage"); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	if _, err := p.pool.Exec(ctx, addUsage, usageColumns(recs)...); err != nil {
		return fmt.Errorf("store: add usage: %w", usageErr(err))
	}
	return nil
}

// usageGroupings holds, for each UsageQuery.By, the names and hour
// ListUsage selects (a grouping selects the names it blanks as empty
// strings) and its GROUP BY (none without a grouping).
var usageGroupings = map[string]struct{ names, group string }{
	"":                        {`conversation, provider, model, hour`, ``},
	store.UsageByHour:         {`'', '', '', hour`, `hour`},
	store.UsageByConversation: {`conversation, '', '', max(hour)`, `conversation`},
	store.UsageByModel:        {`'', provider, model, max(hour)`, `provider, model`},
}

// Counts selected by ListUsage: as stored, or summed in groups.
const (
	usageCounts = `requests, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens`
	usageSums   = `sum(requests)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint,
		sum(cache_read_tokens)::bigint, sum(cache_write_tokens)::bigint`
)

// ListUsage returns the tenant's usage records that q selects, grouped
// in SQL as q.By says; see [store.Store]. It reads the tenant's range of
// the (workspace, project, hour DESC, ...) index, or with a Conversation
// the conversation's range of the primary key.
func (p *Store) ListUsage(ctx context.Context, q store.UsageQuery) ([]store.Usage, error) {
	q, err := backend.PrepareUsageQuery(q)
	if err != nil {
		return nil, fmt.Errorf("store: list usage: %w", err)
	}
	if err := p.use(ctx, "list usage"); err != nil {
		return nil, err
	}
	sql, args := usageQuery(q)
	rows, err := p.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list usage: %w", err)
	}
	out := []store.Usage{}
	for rows.Next() {
		u := store.Usage{Workspace: q.Workspace, Project: q.Project}
		if err := rows.Scan(&u.Conversation, &u.Provider, &u.Model, &u.Hour,
			&u.Requests, &u.Input, &u.Output, &u.CacheRead, &u.CacheWrite); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: list usage: %w", err)
		}
		u.Hour = u.Hour.UTC()
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list usage: %w", usageErr(err))
	}
	return out, nil
}

// usageQuery returns the statement that reads what q (prepared by
// backend.PrepareUsageQuery) selects, and its arguments.
func usageQuery(q store.UsageQuery) (string, []any) {
	g := usageGroupings[q.By]
	counts := usageCounts
	if g.group != "" {
		counts = usageSums
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `SELECT %s, %s FROM usage WHERE workspace = $1 AND project = $2`, g.names, counts)
	args := []any{q.Workspace, q.Project}
	if q.Conversation != "" {
		args = append(args, q.Conversation)
		fmt.Fprintf(&sb, " AND conversation = $%d", len(args))
	}
	if !q.Since.IsZero() {
		args = append(args, q.Since)
		fmt.Fprintf(&sb, " AND hour >= $%d", len(args))
	}
	if !q.Until.IsZero() {
		args = append(args, q.Until)
		fmt.Fprintf(&sb, " AND hour < $%d", len(args))
	}
	if g.group != "" {
		sb.WriteString(" GROUP BY " + g.group)
	}
	args = append(args, q.Limit)
	fmt.Fprintf(&sb, " ORDER BY 4 DESC, 1, 2, 3 LIMIT $%d", len(args))
	return sb.String(), args
}

// PruneUsage removes the usage records of hours before before, in one
// statement that reads the hour index; see [store.Store]. A zero before
// removes nothing.
func (p *Store) PruneUsage(ctx context.Context, before time.Time) (int, error) {
	if err := p.use(ctx, "prune usage"); err != nil {
		return 0, err
	}
	if before.IsZero() {
		return 0, nil
	}
	tag, err := p.pool.Exec(ctx, `DELETE FROM usage WHERE hour < $1`, stored.CeilMicro(before))
	if err != nil {
		return 0, fmt.Errorf("store: prune usage: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
