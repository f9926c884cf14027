package memory

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// Token usage. Each answer's usage is counted at once in Prometheus and
// summed in memory per store record (tenant, conversation, provider,
// model, hour); [Memory.Run] adds the sums to the store every UsageFlush,
// in one write, and [Memory.Shutdown] adds what is left. A replica that
// dies loses at most one period of counts; a store that fails keeps them
// in memory, up to maxUsageRecords, until a later flush.

// maxUsageRecords bounds the records summed between two flushes. Past it
// an answer's usage still counts in Prometheus but not in the store
// (scarproxy_usage_dropped_total).
const maxUsageRecords = 1 << 14

// maxUsageSeries bounds the label sets of scarproxy_tokens_total (a
// client chooses the model, and on an open gateway the tenant): past it,
// a new tenant or model is counted under "_other" (the provider is kept:
// the configuration bounds it).
const maxUsageSeries = 2000

// maxModelName bounds the model name a record keeps: a client chooses it.
const maxModelName = 128

// usageKey names one usage record.
type usageKey struct {
	workspace, project, conversation, provider, model string
	hour                                              int64
}

// usageBook sums usage between flushes. It is safe for concurrent use.
type usageBook struct {
	mu     sync.Mutex
	recs   map[usageKey]*store.Usage
	series map[[4]string]*tokenCounters // label sets of the tokens counter in use
}

func newUsageBook() *usageBook {
	return &usageBook{recs: map[usageKey]*store.Usage{}, series: map[[4]string]*tokenCounters{}}
}

// add sums one answer's usage into its record. It reports false when the
// record is new and the book is full.
func (b *usageBook) add(k usageKey, u wire.Usage) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recs[k]
	if r == nil {
		if len(b.recs) >= maxUsageRecords {
			return false
		}
		r = &store.Usage{Workspace: k.workspace, Project: k.project, Conversation: k.conversation,
			Provider: k.provider, Model: k.model, Hour: time.Unix(k.hour, 0).UTC()}
		b.recs[k] = r
	}
	r.Add(store.Usage{Requests: 1, Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite})
	return true
}

// take empties the book and returns what it held.
func (b *usageBook) take() []store.Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.recs) == 0 {
		return nil
	}
	batch := make([]store.Usage, 0, len(b.recs))
	for _, r := range b.recs {
		batch = append(batch, *r)
	}
	clear(b.recs)
	return batch
}

// putBack returns the records of a batch the store refused to the book,
// as far as there is room; it returns how many it dropped.
func (b *usageBook) putBack(batch []store.Usage) int {
	dropped := 0
	for _, r := range batch {
		k := usageKey{r.Workspace, r.Project, r.Conversation, r.Provider, r.Model, r.Hour.Unix()}
		b.mu.Lock()
		cur := b.recs[k]
		switch {
		case cur != nil:
			cur.Add(r)
		case len(b.recs) < maxUsageRecords:
			b.recs[k] = &r
		default:
			dropped++
		}
		b.mu.Unlock()
	}
	return dropped
}

// tokenCounters are the series of scarproxy_tokens_total of one label
// set, by kind: input, output, cache_read, cache_write.
type tokenCounters [4]prometheus.Counter

// add counts u.
func (c *tokenCounters) add(u wire.Usage) {
	for i, n := range [4]int64{u.Input, u.Output, u.CacheRead, u.CacheWrite} {
		if n > 0 {
			c[i].Add(float64(n))
		}
	}
}

// counters returns the series of the tokens counter for a tenant,
// provider and model: their own while the counter has room for a new
// label set, else those of "_other" for all but the provider.
func (b *usageBook) counters(vec *prometheus.CounterVec, workspace, project, provider, model string) *tokenCounters {
	l := [4]string{workspace, project, provider, model}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c := b.series[l]; c != nil {
		return c
	}
	if len(b.series) >= maxUsageSeries {
		l = [4]string{"_other", "_other", provider, "_other"}
		if c := b.series[l]; c != nil {
			return c
		}
	}
	c := new(tokenCounters)
	for i, kind := range [4]string{"input", "output", "cache_read", "cache_write"} {
		c[i] = vec.WithLabelValues(l[0], l[1], l[2], l[3], kind)
	}
	b.series[l] = c
	return c
}

// CountUsage counts the usage a provider reported for one answer to a
// request of tenant t for model: in the tokens counter at once, and in
// the store at the next flush, as part of t's conversation (t.Session).
func (m *Memory) CountUsage(t tenant.Tenant, provider, model string, u wire.Usage) {
	if u.Zero() {
		return
	}
	model = modelName(model)
	m.usage.counters(m.metrics.tokens, t.Workspace, t.Project, provider, model).add(u)
	hour := m.opts.Now().UTC().Truncate(time.Hour).Unix()
	if !m.usage.add(usageKey{t.Workspace, t.Project, t.Session, provider, model, hour}, u) {
		m.metrics.usageDropped.Inc()
	}
}

// modelName is the model a request names as usage records and labels
// keep it: valid UTF-8 (a metric's label must be), at most maxModelName
// bytes.
func modelName(model string) string {
	model = strings.ToValidUTF8(model, "\uFFFD")
	for len(model) > maxModelName {
		_, size := utf8.DecodeLastRuneInString(model)
		model = model[:len(model)-size]
	}
	return model
}

// FlushUsage adds the usage summed since the last flush to the store,
// with the labels of the conversations that began since (see
// NoteConversation), within StoreTimeout. Records the store refused stay
// for the next flush.
func (m *Memory) FlushUsage(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.StoreTimeout)
	defer cancel()
	return errors.Join(m.addUsage(ctx), m.flushLabels(ctx))
}

// addUsage adds the usage summed since the last flush to the store.
func (m *Memory) addUsage(ctx context.Context) error {
	batch := m.usage.take()
	if len(batch) == 0 {
		return nil
	}
	err := m.store.AddUsage(ctx, batch)
	if err != nil {
		m.metrics.storeErrs.WithLabelValues("add_usage").Inc()
		if n := m.usage.putBack(batch); n > 0 {
			m.metrics.usageDropped.Add(float64(n))
		}
	}
	return err
}

// flushUsage is Run's flush: it logs a failure.
func (m *Memory) flushUsage(ctx context.Context) {
	if err := m.FlushUsage(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("adding token usage to the store failed; kept for the next flush", "err", err)
	}
}

// usageMetrics makes the usage series.
func usageMetrics() (*prometheus.CounterVec, prometheus.Counter) {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_tokens_total",
			Help: "Tokens the providers reported, by workspace, project, provider, model and kind (input: every input token, cached included; output; cache_read; cache_write).",
		}, []string{"workspace", "project", "provider", "model", "kind"}),
		prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scarproxy_usage_dropped_total",
			Help: "Answers whose token usage was counted in the metrics but not stored, for want of room between two flushes.",
		})
}
