package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// report is the JSON result file.
type report struct {
	Machine machine        `json:"machine"`
	Options map[string]any `json:"options"`
	// Rounds holds each round's runs, in the order they ran.
	Rounds  [][]runResult `json:"rounds,omitempty"`
	Summary *summary      `json:"summary,omitempty"`
	Soak    []*soakResult `json:"soak,omitempty"`
	Storm   *stormCheck   `json:"storm_count_check,omitempty"`
}

type machine struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpu_model"`
	GoVersion  string `json:"go_version"`
	GOMAXPROCS int    `json:"gomaxprocs"`
}

func machineInfo() machine {
	m := machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func optionsReport(o options) map[string]any {
	return map[string]any{
		"c": o.conc, "d": o.dur.String(), "warmup": o.warmup.String(), "rounds": o.rounds,
		"stream": o.stream, "soak": o.soak, "incidents": o.incidents, "solutions": o.solutions,
		"targets": o.targets, "fail_every": o.failEvery, "final_every": o.finalEvery, "api": o.api,
		"storm": o.storm, "retries": o.retries, "postgres": o.postgres != "", "history_kb": o.history, "grow": o.grow,
		"prefix": o.prefix, "system_kb": o.system,
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// spread is the min, median and max of one measure over the rounds.
type spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Min: s[0], Median: med, Max: s[len(s)-1]}
}

func (s spread) format(prec int) string {
	return fmt.Sprintf("%.*f / %.*f / %.*f", prec, s.Min, prec, s.Median, prec, s.Max)
}

// targetSummary is one target's measures over the rounds.
type targetSummary struct {
	Target  string  `json:"target"`
	RPS     spread  `json:"rps"`
	P50     spread  `json:"p50_ms"`
	P90     spread  `json:"p90_ms"`
	P99     spread  `json:"p99_ms"`
	TTFB50  *spread `json:"ttfb_p50_ms,omitempty"`
	TTFB99  *spread `json:"ttfb_p99_ms,omitempty"`
	CPUUS   spread  `json:"cpu_us_per_request,omitzero"`
	Errors  int     `json:"errors"`
	Samples int     `json:"requests"`
}

// comparison is scarproxy (c) against the bare proxy (b), per round.
type comparison struct {
	RatioRPS  spread  `json:"rps_ratio_c_over_b"`
	AddedP50  spread  `json:"added_p50_ms"`
	AddedP90  spread  `json:"added_p90_ms"`
	AddedP99  spread  `json:"added_p99_ms"`
	AddedTTFB *spread `json:"added_ttfb_p50_ms,omitempty"`
	// AddedCPU is scarproxy's CPU time per request less the bare proxy's,
	// in microseconds: what scarproxy's own work costs, hardly moved by
	// the load of the rest of the machine.
	AddedCPU   spread `json:"added_cpu_us_per_request,omitzero"`
	RatioCPU   spread `json:"cpu_ratio_c_over_b,omitzero"`
	BareDirect spread `json:"rps_ratio_b_over_a,omitzero"`
}

type summary struct {
	Targets    []targetSummary `json:"targets"`
	Comparison *comparison     `json:"scar_vs_bare,omitempty"`
	Verdicts   []string        `json:"targets_verdict,omitempty"`
}

// overheadSeries are scarproxy's histogram of the time it spends on a chat
// completion before forwarding it (inspection, guard, recall, rewrite).
var overheadSeries = []string{"scarproxy_overhead_seconds_sum", "scarproxy_overhead_seconds_count"}

// loadTest runs the interleaved rounds and prints them.
func loadTest(ctx context.Context, e *benchEnv, o options, rep *report, w io.Writer) error {
	wl := newWorkload(e.api, o.conc, o.stream, o.failEvery, o.finalEvery, e.convs)
	if o.grow > 0 {
		for i := range wl.convs {
			if err := wl.convs[i].markRound(); err != nil {
				return err
			}
		}
		wl.grow = o.grow
	}
	if o.storm {
		wl.storm, wl.sessions, wl.seen = true, make([]stormSession, o.conc), map[string]int{}
		wl.retries = o.retries
	}
	targets := make([]target, len(o.targets))
	for i, name := range o.targets {
		targets[i] = newTarget(name, e.base(name), o.conc)
	}
	mode := "non-streaming"
	if o.stream {
		mode = "streaming"
	}
	if o.retries > 0 {
		mode += fmt.Sprintf(", each request sent %d times (retries)", o.retries+1)
	}
	if o.grow > 0 {
		mode += fmt.Sprintf(", conversations growing a round a request for %d requests", o.grow)
	}
	if a := e.pre.agent; a != nil {
		mode += ", the system prompt and tools of " + a.file
	}
	fmt.Fprintf(w, "%s API (POST %s), %d clients, %s, %s per run after %s warm-up, %d rounds, request body %d bytes\n",
		e.api.name, e.api.pathOf(o.stream), o.conc, mode, o.dur, o.warmup, o.rounds, len(e.convs[0].requestBody(nil, 0, 0, false)))
	// Every conversation starts as an agent's does, with its first
	// request: the proxy decides its recall there, once.
	for _, t := range targets {
		if err := startConversations(ctx, t, wl); err != nil {
			return err
		}
	}
	for r := range o.rounds {
		var runs []runResult
		for i := range targets {
			t := targets[(i+r)%len(targets)] // rotate the order: no target always runs first
			if err := warmUp(ctx, t, wl, o.warmup); err != nil {
				return err
			}
			var before map[string]float64
			if t.name == "scar" {
				before, _ = scrape(ctx, e.metricsURL(), overheadSeries...)
			}
			cpu0, cpuErr := procCPU(e.pid(t.name))
			res := drive(ctx, t, wl, o.dur)
			if ctx.Err() != nil {
				return fmt.Errorf("run interrupted: %w", ctx.Err())
			}
			if cpu1, err := procCPU(e.pid(t.name)); cpuErr == nil && err == nil && res.Requests > 0 {
				res.CPUUS = float64((cpu1 - cpu0).Microseconds()) / float64(res.Requests)
			}
			if before != nil {
				if after, err := scrape(ctx, e.metricsURL(), overheadSeries...); err == nil {
					if n := after[overheadSeries[1]] - before[overheadSeries[1]]; n > 0 {
						res.OverheadUS = (after[overheadSeries[0]] - before[overheadSeries[0]]) / n * 1e6
					}
				}
			}
			runs = append(runs, res)
		}
		rep.Rounds = append(rep.Rounds, runs)
		fmt.Fprintf(w, "\nround %d\n", r+1)
		printRuns(w, runs, o.stream)
	}
	rep.Summary = summarize(rep.Rounds, o)
	printSummary(w, rep.Summary, o)
	if o.storm && e.scar != nil {
		c, err := countCheck(ctx, e, o, wl)
		if err != nil {
			return err
		}
		var rates []float64
		for _, runs := range rep.Rounds {
			for _, r := range runs {
				if r.Target == "scar" {
					rates = append(rates, r.RPS)
				}
			}
		}
		c.IncidentsPerSecond = spreadOf(rates)
		rep.Storm = c
		fmt.Fprintf(w, "\nincidents stored per second by scarproxy (one per answer): %.0f / %.0f / %.0f (min / median / max over rounds)",
			c.IncidentsPerSecond.Min, c.IncidentsPerSecond.Median, c.IncidentsPerSecond.Max)
		fmt.Fprintf(w, "\ncount check: scarproxy answered %d 429s (%d said X-Scar-Degraded: store); after a graceful shutdown its store holds %d of them; missing %d\n",
			c.Answered, c.Degraded, c.Stored, c.Missing)
		if c.Missing > c.Degraded {
			return fmt.Errorf("count check failed: %d failures answered without X-Scar-Degraded are not in the store", c.Missing-c.Degraded)
		}
	}
	return nil
}

// stormCheck is the storm's count check.
type stormCheck struct {
	Answered int `json:"answered_429"`      // 429s scarproxy answered (warm-ups included)
	Degraded int `json:"answered_degraded"` // of them, with X-Scar-Degraded: store
	Stored   int `json:"stored"`            // of them, in the store after shutdown
	Missing  int `json:"missing"`           // answered but not stored
	// IncidentsPerSecond is scarproxy's throughput in the measured runs:
	// every answer is an incident.
	IncidentsPerSecond spread `json:"incidents_per_second"`
}

// countCheck stops scarproxy gracefully and counts, session by session,
// the 429 incidents its store holds against the 429s it answered.
func countCheck(ctx context.Context, e *benchEnv, o options, wl *workload) (*stormCheck, error) {
	e.scar.stop()
	st, err := e.openStore(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("count check: %w", err)
	}
	defer st.Close()
	c := &stormCheck{Degraded: wl.degraded}
	for session, n := range wl.seen {
		incs, err := st.ListIncidents(ctx, store.IncidentQuery{Workspace: "default", Project: "default", Session: session, Limit: 10_000})
		if err != nil {
			return nil, fmt.Errorf("count check: %w", err)
		}
		stored := 0
		for _, in := range incs {
			if in.Type == store.TypeHTTPError && in.StatusCode == 429 {
				stored++
			}
		}
		c.Answered += n
		c.Stored += min(stored, n)
		c.Missing += max(n-stored, 0)
	}
	return c, nil
}

// warmUp drives t unmeasured for d. A conversation's first turn through
// scarproxy records the failures in its history, one fsynced store write
// each: with many clients on a busy disk no request may complete within d.
// Then it goes on, up to a minute, until one does; a request that fails
// ends it.
// startConversations sends each client's first request to t.
func startConversations(ctx context.Context, t target, wl *workload) error {
	hdr := wl.api.header.Clone()
	hdr.Del(headerFinal)
	for c := range wl.convs {
		if _, err := once(ctx, t.client, t.base+wl.api.pathOf(wl.stream), hdr, wl.convs[c].first, make([]byte, 32<<10), wl.streamEnd(), http.StatusOK); err != nil {
			return fmt.Errorf("%s: the first request of conversation %d: %w", t.name, c, err)
		}
	}
	return nil
}

func warmUp(ctx context.Context, t target, wl *workload, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	for start := time.Now(); ; {
		res := drive(ctx, t, wl, d)
		switch {
		case res.Requests > 0:
			return nil
		case res.Errors > 0:
			return fmt.Errorf("%s: no request succeeded during warm-up: %s", t.name, res.FirstError)
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Since(start) > time.Minute:
			return fmt.Errorf("%s: no request completed within a minute of warm-up", t.name)
		}
	}
}

func printRuns(w io.Writer, runs []runResult, stream bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hdr := "target\treq/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\t"
	if stream {
		hdr += "ttfb p50\tttfb p99\t"
	}
	fmt.Fprintln(tw, hdr+"errors\tguard\trecall\t")
	for _, r := range runs {
		line := fmt.Sprintf("%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t", r.Target, r.RPS, r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max)
		if stream && r.TTFB != nil {
			line += fmt.Sprintf("%.3f\t%.3f\t", r.TTFB.P50, r.TTFB.P99)
		}
		g, rc := "-", "-"
		if r.Guard >= 0 {
			g = fmt.Sprint(r.Guard)
		}
		if r.Recall >= 0 {
			rc = fmt.Sprint(r.Recall)
		}
		fmt.Fprintln(tw, line+fmt.Sprintf("%d\t%s\t%s\t", r.Errors, g, rc))
	}
	tw.Flush()
	for _, r := range runs {
		if r.OverheadUS > 0 {
			fmt.Fprintf(w, "  %s: mean time from request to forwarding (scarproxy_overhead_seconds): %.1f µs\n", r.Target, r.OverheadUS)
		}
		if r.FirstError != "" {
			fmt.Fprintf(w, "  %s: first error: %s\n", r.Target, r.FirstError)
		}
	}
}

func summarize(rounds [][]runResult, o options) *summary {
	by := map[string][]runResult{}
	for _, runs := range rounds {
		for _, r := range runs {
			by[r.Target] = append(by[r.Target], r)
		}
	}
	pick := func(rs []runResult, f func(runResult) float64) spread {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return spreadOf(v)
	}
	s := &summary{}
	for _, name := range o.targets {
		rs := by[name]
		ts := targetSummary{
			Target: name,
			RPS:    pick(rs, func(r runResult) float64 { return r.RPS }),
			P50:    pick(rs, func(r runResult) float64 { return r.Latency.P50 }),
			P90:    pick(rs, func(r runResult) float64 { return r.Latency.P90 }),
			P99:    pick(rs, func(r runResult) float64 { return r.Latency.P99 }),
		}
		for _, r := range rs {
			ts.Errors += r.Errors
			ts.Samples += r.Requests
		}
		if !slices.ContainsFunc(rs, func(r runResult) bool { return r.CPUUS == 0 }) {
			ts.CPUUS = pick(rs, func(r runResult) float64 { return r.CPUUS })
		}
		if o.stream {
			a := pick(rs, func(r runResult) float64 { return r.TTFB.P50 })
			b := pick(rs, func(r runResult) float64 { return r.TTFB.P99 })
			ts.TTFB50, ts.TTFB99 = &a, &b
		}
		s.Targets = append(s.Targets, ts)
	}
	bare, scar, direct := by["bare"], by["scar"], by["direct"]
	if len(bare) == 0 || len(bare) != len(scar) {
		return s
	}
	per := func(f func(b, c runResult) float64) spread {
		v := make([]float64, len(bare))
		for i := range bare {
			v[i] = f(bare[i], scar[i])
		}
		return spreadOf(v)
	}
	cmp := &comparison{
		RatioRPS: per(func(b, c runResult) float64 { return ratio(c.RPS, b.RPS) }),
		AddedP50: per(func(b, c runResult) float64 { return c.Latency.P50 - b.Latency.P50 }),
		AddedP90: per(func(b, c runResult) float64 { return c.Latency.P90 - b.Latency.P90 }),
		AddedP99: per(func(b, c runResult) float64 { return c.Latency.P99 - b.Latency.P99 }),
	}
	if o.stream {
		t := per(func(b, c runResult) float64 { return c.TTFB.P50 - b.TTFB.P50 })
		cmp.AddedTTFB = &t
	}
	if !slices.ContainsFunc(append(slices.Clip(bare), scar...), func(r runResult) bool { return r.CPUUS == 0 }) {
		cmp.AddedCPU = per(func(b, c runResult) float64 { return c.CPUUS - b.CPUUS })
		cmp.RatioCPU = per(func(b, c runResult) float64 { return ratio(c.CPUUS, b.CPUUS) })
	}
	if len(direct) == len(bare) {
		v := make([]float64, len(bare))
		for i := range bare {
			v[i] = ratio(bare[i].RPS, direct[i].RPS)
		}
		cmp.BareDirect = spreadOf(v)
	}
	s.Comparison = cmp
	verdict := func(name string, ok bool, detail string) {
		word := "MISSED"
		if ok {
			word = "met"
		}
		s.Verdicts = append(s.Verdicts, fmt.Sprintf("%s: %s (%s)", name, word, detail))
	}
	switch {
	case o.stream:
		verdict("stream time to first byte within 0.1 ms of the bare proxy", cmp.AddedTTFB.Median <= 0.1,
			fmt.Sprintf("median over rounds %+.3f ms", cmp.AddedTTFB.Median))
	case o.conc == 1:
		verdict("c=1 median within 0.1 ms of the bare proxy", cmp.AddedP50.Median <= 0.1,
			fmt.Sprintf("median over rounds %+.3f ms", cmp.AddedP50.Median))
		verdict("c=1 p99 within 0.5 ms of the bare proxy", cmp.AddedP99.Median <= 0.5,
			fmt.Sprintf("median over rounds %+.3f ms", cmp.AddedP99.Median))
	case o.conc >= 32:
		verdict(fmt.Sprintf("c=%d throughput at least 0.8 x the bare proxy", o.conc), cmp.RatioRPS.Median >= 0.8,
			fmt.Sprintf("median over rounds %.2f", cmp.RatioRPS.Median))
	}
	return s
}

// ratio is a/b, or 0 when b is: a run that answered nothing in its
// window (a loaded machine, a short -d) has no ratio, and JSON has no
// infinity.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func printSummary(w io.Writer, s *summary, o options) {
	fmt.Fprintf(w, "\nsummary over %d rounds (min / median / max)\n", o.rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range s.Targets {
		fmt.Fprintf(tw, "  %s\treq/s %s\tp50 %s ms\tp99 %s ms", t.Target, t.RPS.format(0), t.P50.format(3), t.P99.format(3))
		if t.TTFB50 != nil {
			fmt.Fprintf(tw, "\tttfb p50 %s ms", t.TTFB50.format(3))
		}
		if t.CPUUS != (spread{}) {
			fmt.Fprintf(tw, "\tCPU %s µs/req", t.CPUUS.format(1))
		}
		fmt.Fprintf(tw, "\terrors %d\n", t.Errors)
	}
	tw.Flush()
	if c := s.Comparison; c != nil {
		fmt.Fprintln(w, "scarproxy (c) against the bare proxy (b), per round:")
		fmt.Fprintf(w, "  throughput (c)/(b): %s\n", c.RatioRPS.format(2))
		fmt.Fprintf(w, "  added p50 (c)-(b):  %s ms\n", c.AddedP50.format(3))
		fmt.Fprintf(w, "  added p90 (c)-(b):  %s ms\n", c.AddedP90.format(3))
		fmt.Fprintf(w, "  added p99 (c)-(b):  %s ms\n", c.AddedP99.format(3))
		if c.AddedTTFB != nil {
			fmt.Fprintf(w, "  added ttfb p50:     %s ms\n", c.AddedTTFB.format(3))
		}
		if c.AddedCPU != (spread{}) {
			fmt.Fprintf(w, "  added CPU per request (c)-(b): %s µs; (c)/(b): %s\n", c.AddedCPU.format(1), c.RatioCPU.format(2))
		}
		if c.BareDirect != (spread{}) {
			fmt.Fprintf(w, "  bare proxy throughput / direct: %s\n", c.BareDirect.format(2))
		}
	}
	for _, v := range s.Verdicts {
		fmt.Fprintln(w, "target "+v)
	}
}
