package proxy

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the proxy's Prometheus series, on a registry of its own so
// that several servers (tests, replicas in one process) never collide.
type metrics struct {
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	overhead  prometheus.Histogram
	incidents *prometheus.CounterVec
	injected  *prometheus.CounterVec
	// The injected series of each block, made once (and so exported from
	// the start, at zero).
	injectedGuard, injectedRecall prometheus.Counter
	storeErrs                     *prometheus.CounterVec
	fallbacks                     *prometheus.CounterVec
	degraded                      prometheus.Counter
	captureSkipped                prometheus.Counter
	captureDropped                prometheus.Counter
	mcpCalls                      *prometheus.CounterVec
	loops                         *prometheus.CounterVec
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
		incidents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_incidents_total",
			Help: "Incidents recorded, by type and matched pattern (none when no pattern matched).",
		}, []string{"type", "pattern"}),
		injected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_blocks_injected_total",
			Help: "Guard and recall blocks injected into system text.",
		}, []string{"block"}),
		storeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_store_errors_total",
			Help: "Store operations that failed, by operation.",
		}, []string{"op"}),
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_fallbacks_total",
			Help: "Requests retried on a fallback provider, by failed and next provider.",
		}, []string{"from", "to"}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scarproxy_degraded_requests_total",
			Help: "Rewritten requests forwarded unchanged because the store failed.",
		}),
	}
	m.captureSkipped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "scarproxy_captures_refused_total",
		Help: "Final answers not captured as solutions because a tool's latest result had failed.",
	})
	m.captureDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "scarproxy_captures_dropped_total",
		Help: "Solutions captured from final answers and dropped because the capture queue was full (or shut down).",
	})
	m.mcpCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scarproxy_mcp_calls_total",
		Help: "MCP tool calls, by tool and outcome (ok, error).",
	}, []string{"tool", "outcome"})
	m.loops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "scarproxy_loops_total",
		Help: "Loops by the level they reached (guard, stop, hard-stop), counted once per loop and level, and loops broken (the agent moved on).",
	}, []string{"level"})
	for _, l := range []string{"guard", "stop", "hard-stop", "broken"} {
		m.loops.WithLabelValues(l)
	}
	m.injectedGuard = m.injected.WithLabelValues("guard")
	m.injectedRecall = m.injected.WithLabelValues("recall")
	m.registry.MustRegister(m.requests, m.latency, m.overhead, m.incidents, m.injected,
		m.storeErrs, m.fallbacks, m.degraded, m.captureSkipped, m.captureDropped, m.mcpCalls, m.loops,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
