package backend

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// defaultUsageLimit is UsageQuery.Limit when 0 (the cap is store.MaxLimit).
const defaultUsageLimit = 1000

// UsageLimit applies UsageQuery.Limit's default and cap.
func UsageLimit(n int) int {
	switch {
	case n <= 0:
		return defaultUsageLimit
	case n > store.MaxLimit:
		return store.MaxLimit
	}
	return n
}

// UsageHour returns the start of t's UTC hour: the Hour a usage record
// made at t is stored under, whatever t's location.
func UsageHour(t time.Time) time.Time {
	// Truncate works on the absolute time, so a location whose offset is
	// not whole hours still lands on the UTC hour.
	return t.Truncate(time.Hour).UTC()
}

// PrepareUsage returns the records AddUsage stores for batch: their text
// cleaned, each Hour the start of its UTC hour, the records of one key
// (see CompareUsageKey) merged into one that sums their counts, sorted by
// key, which is the order in which concurrent writers lock them. batch is
// not changed. It returns an error wrapping store.ErrInvalid, and no
// records, when one of them names no workspace or project, holds a
// negative count, or when the counts of one key overflow.
func PrepareUsage(batch []store.Usage) ([]store.Usage, error) {
	recs := make([]store.Usage, len(batch))
	for i, u := range batch {
		if err := validUsage(&u); err != nil {
			return nil, fmt.Errorf("usage record %d: %w", i, err)
		}
		for _, p := range []*string{&u.Workspace, &u.Project, &u.Conversation, &u.Provider, &u.Model} {
			*p = stored.Text(*p)
		}
		u.Hour = UsageHour(u.Hour)
		recs[i] = u
	}
	slices.SortStableFunc(recs, CompareUsageKey)
	merged := recs[:0]
	for _, u := range recs {
		if n := len(merged); n > 0 && CompareUsageKey(merged[n-1], u) == 0 {
			if err := AddUsageCounts(&merged[n-1], u); err != nil {
				return nil, err
			}
			continue
		}
		merged = append(merged, u)
	}
	return merged, nil
}

// validUsage returns an error wrapping store.ErrInvalid for a record
// without its tenant or with a negative count.
func validUsage(u *store.Usage) error {
	switch {
	case u.Workspace == "":
		return fmt.Errorf("%w: usage without workspace", store.ErrInvalid)
	case u.Project == "":
		return fmt.Errorf("%w: usage without project", store.ErrInvalid)
	case min(u.Requests, u.Input, u.Output, u.CacheRead, u.CacheWrite) < 0:
		return fmt.Errorf("%w: usage with a negative count", store.ErrInvalid)
	}
	return nil
}

// AddUsageCounts adds the counts of u to sum. It returns an error
// wrapping store.ErrInvalid, leaving sum as it was, when a count would
// overflow (counts are never negative).
func AddUsageCounts(sum *store.Usage, u store.Usage) error {
	out := *sum
	dst := [...]*int64{&out.Requests, &out.Input, &out.Output, &out.CacheRead, &out.CacheWrite}
	add := [...]int64{u.Requests, u.Input, u.Output, u.CacheRead, u.CacheWrite}
	for i, p := range dst {
		if *p > math.MaxInt64-add[i] {
			return fmt.Errorf("%w: usage count overflows", store.ErrInvalid)
		}
		*p += add[i]
	}
	*sum = out
	return nil
}

// CompareUsageKey orders usage records by their key: Workspace, Project,
// Hour, Conversation, Provider, Model. It returns 0 for two records that
// AddUsage adds up.
func CompareUsageKey(a, b store.Usage) int {
	return cmp.Or(cmp.Compare(a.Workspace, b.Workspace), cmp.Compare(a.Project, b.Project), a.Hour.Compare(b.Hour),
		cmp.Compare(a.Conversation, b.Conversation), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Model, b.Model))
}

// CompareUsage orders one tenant's usage records as ListUsage returns
// them: newest Hour first, then by Conversation, Provider and Model (in
// byte order).
func CompareUsage(a, b store.Usage) int {
	return cmp.Or(b.Hour.Compare(a.Hour), cmp.Compare(a.Conversation, b.Conversation),
		cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Model, b.Model))
}

// PrepareUsageQuery returns q in the form both backends read it: its
// names cleaned as stored names are, Since and Until rounded up to a
// whole microsecond (see stored.CeilMicro; Hours are whole hours, so
// Since <= Hour < Until is unchanged), Limit with its default and cap
// applied. It returns an error wrapping store.ErrInvalid when q names no
// workspace or project, or an unknown By.
func PrepareUsageQuery(q store.UsageQuery) (store.UsageQuery, error) {
	if q.Workspace == "" || q.Project == "" {
		return q, fmt.Errorf("%w: workspace and project are required", store.ErrInvalid)
	}
	switch q.By {
	case "", store.UsageByHour, store.UsageByConversation, store.UsageByModel:
	default:
		return q, fmt.Errorf("%w: unknown usage grouping %q", store.ErrInvalid, q.By)
	}
	q.Workspace, q.Project, q.Conversation = stored.Text(q.Workspace), stored.Text(q.Project), stored.Text(q.Conversation)
	if !q.Since.IsZero() {
		q.Since = stored.CeilMicro(q.Since)
	}
	if !q.Until.IsZero() {
		q.Until = stored.CeilMicro(q.Until)
	}
	q.Limit = UsageLimit(q.Limit)
	return q, nil
}
