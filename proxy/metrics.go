package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// metrics are the proxy's Prometheus series, on a registry of its own so
// that several servers (tests, replicas in one process) never collide.
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	overhead prometheus.Histogram
	injected *prometheus.CounterVec
	// The injected series of each block, made once (and so exported from
	// the start, at zero).
	injectedGuard, injectedRecall prometheus.Counter
	fallbacks                     *prometheus.CounterVec
	degraded                      prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_requests_total",
			Help: "Proxied requests by route, answered status and provider.",
		}, []string{"route", "status", "provider"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scarproxy_request_duration_seconds",
			Help:    "Time from request to the end of the answer, by route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"route"}),
		overhead: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "scarproxy_overhead_seconds",
			Help:    "Time the proxy adds before forwarding a rewritten request (reading, guard, recall, rewrite).",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 16),
		}),
		injected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_blocks_injected_total",
			Help: "Requests that carried a guard or a recall block, by block.",
		}, []string{"block"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_fallbacks_total",
			Help: "Requests retried on a fallback provider, by failed and next provider.",
		}, []string{"from", "to"}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scarproxy_degraded_requests_total",
			Help: "Rewritten requests forwarded unchanged because the store failed.",
		}),
	}
	m.injectedGuard = m.injected.WithLabelValues("guard")
	m.injectedRecall = m.injected.WithLabelValues("recall")
	m.registry.MustRegister(m.requests, m.latency, m.overhead, m.injected,
		m.fallbacks, m.degraded,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// memoHolder is a format that remembers conversations between turns.
type memoHolder interface{ MemoBytes() int }

// registerMemos exports the bytes each format's conversation memo holds,
// by format.
func (m *metrics) registerMemos(formats map[string]wire.Format) {
	for name, f := range formats {
		mh, ok := f.(memoHolder)
		if !ok {
			continue
		}
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "scarproxy_conversation_memo_bytes",
			Help:        "Bytes held by a wire format's memo of the latest turn of each conversation (bounded by its budget).",
			ConstLabels: prometheus.Labels{"format": name},
		}, func() float64 { return float64(mh.MemoBytes()) }))
	}
}
