package memoryapi

import (
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// usageView is one usage record as the API shows it.
type usageView struct {
	store.Usage
	CacheHitRatio float64 `json:"cache_hit_ratio"`
}

func viewUsage(u store.Usage) usageView {
	return usageView{Usage: u, CacheHitRatio: u.CacheHitRatio()}
}

// listUsage answers GET /scar/v1/usage: the tokens one tenant's answers
// used, as the providers reported them, grouped by hour, conversation or
// model (by=), within since and until, with their total. The records are
// the store's: every replica adds to them every few seconds.
func (a *API) listUsage(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := a.tenantFor(c, q.Get("workspace"), q.Get("project"), false)
	if aerr != nil {
		return aerr
	}
	uq, aerr := a.usageQuery(q, t)
	if aerr != nil {
		return aerr
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	recs, err := a.store.ListUsage(ctx, uq)
	if err != nil {
		return a.storeError(c, "list_usage", err)
	}
	total := store.Usage{Workspace: t.Workspace, Project: t.Project, Conversation: uq.Conversation}
	views := make([]usageView, len(recs))
	for i, r := range recs {
		total.Add(r)
		views[i] = viewUsage(r)
	}
	tv := viewUsage(total)
	return c.JSON(http.StatusOK, map[string]any{"usage": views, "total": tv})
}

// usageQuery reads the query of GET /scar/v1/usage.
func (a *API) usageQuery(q url.Values, t tenant.Tenant) (store.UsageQuery, *wire.Error) {
	uq := store.UsageQuery{Workspace: t.Workspace, Project: t.Project, Conversation: q.Get("conversation"), By: q.Get("by")}
	switch uq.By {
	case "", store.UsageByHour, store.UsageByConversation, store.UsageByModel:
	default:
		return uq, wire.BadRequest("by: must be hour, conversation or model")
	}
	if uq.Conversation != "" {
		if err := tenant.ValidName(uq.Conversation); err != nil {
			return uq, wire.BadRequest("conversation: " + err.Error())
		}
	}
	now := a.memory.Now()
	var aerr *wire.Error
	if uq.Since, aerr = usageTime(q, "since", now); aerr != nil {
		return uq, aerr
	}
	if uq.Until, aerr = usageTime(q, "until", now); aerr != nil {
		return uq, aerr
	}
	if q.Get("limit") != "" {
		if uq.Limit, aerr = listLimit(q); aerr != nil {
			return uq, aerr
		}
	}
	return uq, nil
}

// usageTime reads a time bound of the usage query: an RFC 3339 time, or a
// duration before now ("24h", "90m"). Absent, it is zero (unbounded).
func usageTime(q url.Values, name string, now time.Time) (time.Time, *wire.Error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, wire.BadRequest(name + ": must be an RFC 3339 time or a duration before now, such as 24h")
}
