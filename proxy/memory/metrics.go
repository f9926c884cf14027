package memory

import "github.com/prometheus/client_golang/prometheus"

// metrics are the memory's Prometheus series.
type metrics struct {
	incidents      *prometheus.CounterVec
	storeErrs      *prometheus.CounterVec
	loops          *prometheus.CounterVec
	captureSkipped prometheus.Counter
	captureDropped prometheus.Counter
	tokens         *prometheus.CounterVec
	usageDropped   prometheus.Counter
}

// newMetrics makes the memory's series and registers them with reg (nil:
// none).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		incidents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_incidents_total",
			Help: "Incidents recorded, by type and matched pattern (none when no pattern matched).",
		}, []string{"type", "pattern"}),
		storeErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_store_errors_total",
			Help: "Store operations that failed, by operation.",
		}, []string{"op"}),
		loops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scarproxy_loops_total",
			Help: "Loops by the level they reached (guard, stop, hard-stop), counted once per loop and level, and loops broken (the agent moved on).",
		}, []string{"level"}),
		captureSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scarproxy_captures_refused_total",
			Help: "Final answers not captured as solutions because a tool's latest result had failed or the answer says the task failed.",
		}),
		captureDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scarproxy_captures_dropped_total",
			Help: "Solutions captured from final answers and dropped because the capture queue was full (or shut down).",
		}),
	}
	m.tokens, m.usageDropped = usageMetrics()
	for _, l := range []string{"guard", "stop", "hard-stop", "broken"} {
		m.loops.WithLabelValues(l)
	}
	if reg != nil {
		reg.MustRegister(m.incidents, m.storeErrs, m.loops, m.captureSkipped, m.captureDropped, m.tokens, m.usageDropped)
	}
	return m
}

// registerWriterGauges registers with reg (nil: none) the incident
// writer's gauges: the incidents not yet committed, and those of them
// whose answers are out.
func registerWriterGauges(reg prometheus.Registerer, w *incidentWriter) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "scarproxy_incidents_uncommitted",
			Help: "Incidents queued or being written: observed failures not yet in the store.",
		}, func() float64 { n, _ := w.uncommitted(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "scarproxy_incidents_uncommitted_answered",
			Help: "Incidents not yet in the store whose answers were delivered (store.durability async): what a crash would lose of the failures clients saw.",
		}, func() float64 { _, n := w.uncommitted(); return float64(n) }),
	)
}

// registerStateGauges registers with reg (nil: none) the gauges of the
// bytes the memory keeps per conversation and per tenant.
func registerStateGauges(reg prometheus.Registerer, m *Memory) {
	if reg == nil {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "scarproxy_loop_state_bytes",
		Help: "Bytes of the conversations' latest tool calls kept to detect loops (capped; the least recently used conversations go first).",
	}, func() float64 { return float64(m.loops.bytes()) }))
	for _, c := range []struct {
		name  string
		bytes func() int64
	}{
		{"guard", m.guardCache.bytes},
		{"recall", m.recallCache.bytes},
		{"task_vectors", m.taskVecs.bytes},
		{"classifications", func() int64 { return int64(m.Guard().CacheBytes()) }},
	} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "scarproxy_cache_bytes",
			Help:        "Bytes held by one of the memory's caches: guard (the tenants' guard windows), recall (each conversation's recall), task_vectors (the latest tasks' embeddings), classifications (the guard's patterns' verdict on each failure message); each capped, the least recently used go first.",
			ConstLabels: prometheus.Labels{"cache": c.name},
		}, func() float64 { return float64(c.bytes()) }))
	}
}
