package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// failingUsage is a store whose AddUsage fails while fail is set.
type failingUsage struct {
	store.Store
	fail bool
}

func (s *failingUsage) AddUsage(ctx context.Context, batch []store.Usage) error {
	if s.fail {
		return errors.New("store down")
	}
	return s.Store.AddUsage(ctx, batch)
}

func usageOf(t *testing.T, st store.Store, q store.UsageQuery) []store.Usage {
	t.Helper()
	if q.Workspace == "" {
		q.Workspace, q.Project = "ws", "p"
	}
	recs, err := st.ListUsage(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// Usage is summed per conversation, provider, model and hour between
// flushes, one record per key; a flush the store refuses keeps the
// counts for the next one, and nothing is counted twice.
func TestUsageIsSummedAndSurvivesAFailedFlush(t *testing.T) {
	st := &failingUsage{Store: tempBolt(t)}
	now := time.Date(2026, 11, 26, 14, 10, 0, 0, time.UTC)
	m := newTestMemory(t, st, func(o *Options) { o.Now = func() time.Time { return now } })
	tn := tenant.Tenant{Workspace: "ws", Project: "p", Session: "c:1"}
	u := wire.Usage{Input: 1000, Output: 20, CacheRead: 900, CacheWrite: 50}

	m.CountUsage(tn, "openai", "gpt", u)
	m.CountUsage(tn, "openai", "gpt", u)
	m.CountUsage(tenant.Tenant{Workspace: "ws", Project: "p", Session: "c:2"}, "openai", "gpt", u)
	m.CountUsage(tn, "openai", "gpt", wire.Usage{}) // said nothing: not counted
	st.fail = true
	if err := m.FlushUsage(context.Background()); err == nil {
		t.Fatal("a failed flush returned no error")
	}
	now = now.Add(time.Hour)
	m.CountUsage(tn, "openai", "gpt", u)
	st.fail = false
	if err := m.FlushUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := usageOf(t, st, store.UsageQuery{})
	want := []store.Usage{
		{Workspace: "ws", Project: "p", Conversation: "c:1", Provider: "openai", Model: "gpt", Hour: now.Truncate(time.Hour), Requests: 1, Input: 1000, Output: 20, CacheRead: 900, CacheWrite: 50},
		{Workspace: "ws", Project: "p", Conversation: "c:1", Provider: "openai", Model: "gpt", Hour: now.Add(-time.Hour).Truncate(time.Hour), Requests: 2, Input: 2000, Output: 40, CacheRead: 1800, CacheWrite: 100},
		{Workspace: "ws", Project: "p", Conversation: "c:2", Provider: "openai", Model: "gpt", Hour: now.Add(-time.Hour).Truncate(time.Hour), Requests: 1, Input: 1000, Output: 20, CacheRead: 900, CacheWrite: 50},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored\n%v\nwant\n%v", got, want)
	}
	if err := m.FlushUsage(context.Background()); err != nil { // nothing left: adds nothing
		t.Fatal(err)
	}
	if again := usageOf(t, st, store.UsageQuery{}); fmt.Sprint(again) != fmt.Sprint(want) {
		t.Fatalf("a second flush changed the records: %v", again)
	}
	if v := counterValue(t, m.metrics.tokens.WithLabelValues("ws", "p", "openai", "gpt", "cache_read")); v != 4*900 {
		t.Errorf("scarproxy_tokens_total cache_read = %v, want %d", v, 4*900)
	}
	if v := counterValue(t, m.metrics.storeErrs.WithLabelValues("add_usage")); v != 1 {
		t.Errorf("store errors add_usage = %v, want 1", v)
	}
}

// Shutdown adds what was counted since the last flush.
func TestShutdownFlushesUsage(t *testing.T) {
	st := tempBolt(t)
	m := newTestMemory(t, st)
	m.CountUsage(tenant.Tenant{Workspace: "ws", Project: "p"}, "anthropic", "claude", wire.Usage{Input: 7, Output: 3})
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := usageOf(t, st, store.UsageQuery{By: store.UsageByHour})
	if len(got) != 1 || got[0].Input != 7 || got[0].Output != 3 || got[0].Requests != 1 {
		t.Fatalf("after Shutdown the store holds %v", got)
	}
}

// The book holds at most maxUsageRecords between flushes, and the tokens
// counter at most maxUsageSeries label sets: past them, the answers are
// counted as dropped and under "_other", never lost silently and never
// growing without bound.
func TestUsageBounds(t *testing.T) {
	st := tempBolt(t)
	reg := prometheus.NewRegistry()
	g := newTestMemory(t, st).Guard()
	m, err := New(context.Background(), Options{Store: st, Guard: g}, reg)
	if err != nil {
		t.Fatal(err)
	}
	u := wire.Usage{Input: 10, CacheRead: 5}
	for i := range maxUsageRecords + 10 {
		m.CountUsage(tenant.Tenant{Workspace: "ws", Project: "p", Session: fmt.Sprintf("c:%d", i)}, "mock", fmt.Sprintf("model-%d", i%(maxUsageSeries+5)), u)
	}
	if v := counterValue(t, m.metrics.usageDropped); v != 10 {
		t.Errorf("dropped %v answers, want 10", v)
	}
	if n := len(m.usage.series); n != maxUsageSeries+1 {
		t.Errorf("%d label sets, want %d and _other", n, maxUsageSeries)
	}
	if v := counterValue(t, m.metrics.tokens.WithLabelValues("_other", "_other", "mock", "_other", "input")); v == 0 {
		t.Error("nothing counted under _other")
	}
	if err := m.FlushUsage(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := usageOf(t, st, store.UsageQuery{By: store.UsageByHour})
	if len(total) != 1 || total[0].Requests != maxUsageRecords {
		t.Fatalf("stored %v, want %d answers", total, maxUsageRecords)
	}
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// counterValue reads a counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func TestModelName(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	for _, in := range []string{"gpt-5", "bad\xffutf8", long, strings.Repeat("a", 127) + "é"} {
		got := modelName(in)
		if !utf8.ValidString(got) || len(got) > maxModelName {
			t.Errorf("modelName(%q) = %q: not valid UTF-8 or too long", in, got)
		}
		if utf8.ValidString(in) && len(in) <= maxModelName && got != in {
			t.Errorf("modelName(%q) = %q: changed a name it should keep", in, got)
		}
	}
}
