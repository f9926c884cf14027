package ui

import (
	"net/http"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// maxUsageRows caps the conversations and models the usage page lists.
const maxUsageRows = 50

// usageData is the usage page: what the providers said the tenant's
// answers cost, and how much of their input the prompt cache served.
type usageData struct {
	Span          span
	Spans         []span
	Total         store.Usage
	Buckets       []usageBucket                 // newest first, only those with answers
	Conversations []store.Usage                 // the latest first
	Labels        map[string]store.Conversation // of Conversations
	Models        []store.Usage                 // the latest first
}

// usageBucket is the usage of one bucket of the page's span.
type usageBucket struct {
	Label string
	store.Usage
}

// usage shows the tenant's token usage over the span: totals, each hour
// or day, each conversation and each model, with the share of the input
// read from the prompt cache.
func (h *Handler) usage(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	ctx := r.Context()
	sp := spanOf(r.FormValue("range"))
	since, until := rangeOf(sp, h.opts.Now())
	q := store.UsageQuery{Workspace: p.WS, Project: p.Proj, Since: since, Until: until}
	d := usageData{Span: sp, Spans: spans}
	var err error
	for _, read := range []struct {
		by   string
		into *[]store.Usage
		max  int
	}{{store.UsageByHour, nil, store.MaxLimit}, {store.UsageByConversation, &d.Conversations, maxUsageRows}, {store.UsageByModel, &d.Models, maxUsageRows}} {
		q.By, q.Limit = read.by, read.max
		var recs []store.Usage
		if recs, err = h.src.Usage(ctx, q); err != nil {
			h.fail(w, r, p, err)
			return
		}
		if read.into != nil {
			*read.into = recs
			continue
		}
		d.Total, d.Buckets = usageBuckets(recs, sp.Bucket)
	}
	ids := make([]string, len(d.Conversations))
	for i, u := range d.Conversations {
		ids[i] = u.Conversation
	}
	d.Labels = h.labels(ctx, p, nil, ids...)
	p.Title = "Token usage and prompt cache"
	p.Data = d
	h.render(w, http.StatusOK, "usage", p)
}

// usageBuckets sums hourly records (newest first) into buckets of size
// bucket, newest first, and returns their total too.
func usageBuckets(hours []store.Usage, bucket time.Duration) (store.Usage, []usageBucket) {
	var total store.Usage
	var out []usageBucket
	format := "2006-01-02 15:00"
	if bucket >= 24*time.Hour {
		format = "2006-01-02"
	}
	for _, u := range hours {
		total.Add(u)
		start := u.Hour.UTC().Truncate(bucket)
		label := start.Format(format)
		if n := len(out); n > 0 && out[n-1].Label == label {
			out[n-1].Add(u)
			continue
		}
		b := usageBucket{Label: label}
		b.Hour = start
		b.Add(u)
		out = append(out, b)
	}
	return total, out
}
