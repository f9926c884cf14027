package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// target is one way to reach the fake upstream.
type target struct {
	name   string
	base   string // its root, e.g. http://127.0.0.1:PORT
	client *http.Client
}

// newTarget returns a target whose client keeps enough idle connections
// for conc clients and never compresses (bytes go through as sent).
func newTarget(name, base string, conc int) target {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2*conc + 16,
		MaxIdleConnsPerHost: conc + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return target{name: name, base: base, client: &http.Client{Transport: tr}}
}

// workload is what the clients send.
type workload struct {
	api        *api
	convs      []conversation // one per client, in api's shape
	stream     bool
	failEvery  int // every Nth request of a client carries a new failed tool result; 0 never
	finalEvery int // every Nth request of a client asks for a final answer; 0 never
	grow       int // a conversation grows for this many requests (see grownBody); 0 never
	seqs       []int

	// With storm, every answer is a 429. Each client names its session
	// (X-Scar-Session), so that the count check reads the incidents of
	// one session at a time; the failures scarproxy answered are counted
	// per session.
	storm    bool
	retries  int // each request is sent this many times more, the same bytes (a 429 retried)
	stormMu  sync.Mutex
	sessions []stormSession // per client
	seen     map[string]int // session -> 429s answered by scarproxy
	degraded int            // of them, answered with X-Scar-Degraded: store
}

// stormSession is a client's current session; it moves to a new one
// before the store's read limit (10,000) could hide some of its incidents.
type stormSession struct {
	name string
	n    int
	gen  int
}

const stormSessionMax = 9000

func newWorkload(a *api, clients int, stream bool, failEvery, finalEvery int, convs []conversation) *workload {
	return &workload{api: a, convs: convs[:clients], stream: stream, failEvery: failEvery, finalEvery: finalEvery, seqs: make([]int, clients)}
}

// failed reports whether a client's request seq carries a failed tool
// result.
func (wl *workload) failed(seq int) bool { return wl.failEvery > 0 && seq%wl.failEvery == 0 }

// requestSeq is the request a client's nth request sends (both from 1):
// with retries, each one is sent retries+1 times.
func requestSeq(n, retries int) int { return (n + retries) / (retries + 1) }

// stormSessionOf returns client c's session for its next request.
func (wl *workload) stormSessionOf(c int) string {
	wl.stormMu.Lock()
	defer wl.stormMu.Unlock()
	ss := &wl.sessions[c]
	if ss.name == "" || ss.n >= stormSessionMax {
		ss.gen++
		ss.name, ss.n = fmt.Sprintf("storm-%d-%d", c, ss.gen), 0
	}
	return ss.name
}

// noteStorm counts a 429 that scarproxy answered in a session.
func (wl *workload) noteStorm(c int, session string, degraded bool) {
	wl.stormMu.Lock()
	defer wl.stormMu.Unlock()
	wl.sessions[c].n++
	wl.seen[session]++
	if degraded {
		wl.degraded++
	}
}

// dist summarises latencies, in milliseconds.
type dist struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// newDist sorts d and reads its percentiles (nearest rank).
func newDist(d []time.Duration) dist {
	if len(d) == 0 {
		return dist{}
	}
	slices.Sort(d)
	at := func(p float64) float64 {
		i := int(p*float64(len(d))+0.999999) - 1
		i = min(max(i, 0), len(d)-1)
		return ms(d[i])
	}
	return dist{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(d[len(d)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// runResult is one measured run of one target.
type runResult struct {
	Target   string  `json:"target"`
	Requests int     `json:"requests"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	RPS      float64 `json:"rps"`
	Latency  dist    `json:"latency"`
	TTFB     *dist   `json:"ttfb,omitempty"`
	// Guard and Recall are the X-Scar-Guard / X-Scar-Recall values of the
	// run's last answer (scarproxy only; -1 when absent).
	Guard  int `json:"guard"`
	Recall int `json:"recall"`
	// OverheadUS is scarproxy's own mean time before forwarding, in
	// microseconds, from its scarproxy_overhead_seconds histogram.
	OverheadUS float64 `json:"overhead_mean_us,omitempty"`
	// CPUUS is the CPU time the process serving the target (the proxy,
	// or the upstream for direct) used per request answered in the run,
	// in microseconds. Unlike throughput, it hardly moves with what else
	// runs on the machine.
	CPUUS float64 `json:"cpu_us_per_request,omitempty"`
	// FirstError describes the first failed request, if any.
	FirstError string `json:"first_error,omitempty"`
}

// drive runs a closed loop: each of the workload's clients sends a request,
// reads the whole answer, and sends the next, until dur has passed. Only
// requests completed by then are counted.
func drive(ctx context.Context, t target, wl *workload, dur time.Duration) runResult {
	conc := len(wl.convs)
	lats := make([][]time.Duration, conc)
	ttfbs := make([][]time.Duration, conc)
	var errs atomic.Int64
	var firstErr atomic.Value
	var guardHdr, recallHdr atomic.Int64
	guardHdr.Store(-1)
	recallHdr.Store(-1)
	url := t.base + wl.api.pathOf(wl.stream)
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for c := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conv := &wl.convs[c]
			body := make([]byte, 0, len(conv.template)+256)
			rbuf := make([]byte, 32<<10)
			hdr := wl.api.header.Clone()
			want := http.StatusOK
			if wl.storm {
				hdr.Set(headerStatus, strconv.Itoa(http.StatusTooManyRequests))
				want = http.StatusTooManyRequests
			}
			if !wl.storm && len(conv.first) > 0 {
				// The conversation's first request, unmeasured: the
				// proxy decides its recall there, as for an agent.
				once(ctx, t.client, url, hdr, conv.first, rbuf, wl.streamEnd(), want)
			}
			for ctx.Err() == nil && time.Now().Before(deadline) {
				wl.seqs[c]++
				seq := requestSeq(wl.seqs[c], wl.retries)
				if wl.grow > 0 {
					body = conv.grownBody(body[:0], c, seq, wl.grow, wl.failed)
				} else {
					body = conv.requestBody(body[:0], c, seq, wl.failed(seq))
				}
				if wl.finalEvery > 0 && seq%wl.finalEvery == 0 {
					hdr.Set(headerFinal, strconv.Itoa(seq))
				} else {
					hdr.Del(headerFinal)
				}
				var session string
				if wl.storm {
					session = wl.stormSessionOf(c)
					hdr.Set("X-Scar-Session", session)
				}
				a, err := once(ctx, t.client, url, hdr, body, rbuf, wl.streamEnd(), want)
				if err == nil && wl.storm && t.name == "scar" {
					// Counted whether or not the run still measures it:
					// the store must hold it.
					wl.noteStorm(c, session, a.degraded)
				}
				lat, ttfb, g, r := a.lat, a.ttfb, a.guard, a.recall
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					if errs.Add(1) == 1 {
						firstErr.Store(err.Error())
					}
					if errs.Load() > 1000 {
						return // the target is broken: stop hammering it
					}
					continue
				}
				if time.Now().After(deadline) {
					return
				}
				lats[c] = append(lats[c], lat)
				if wl.stream {
					ttfbs[c] = append(ttfbs[c], ttfb)
				}
				guardHdr.Store(int64(g))
				recallHdr.Store(int64(r))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := slices.Concat(lats...)
	res := runResult{
		Target: t.name, Requests: len(all), Errors: int(errs.Load()),
		Seconds: elapsed.Seconds(), RPS: float64(len(all)) / dur.Seconds(),
		Latency: newDist(all), Guard: int(guardHdr.Load()), Recall: int(recallHdr.Load()),
	}
	if wl.stream {
		d := newDist(slices.Concat(ttfbs...))
		res.TTFB = &d
	}
	if s, ok := firstErr.Load().(string); ok {
		res.FirstError = s
	}
	return res
}

// streamEnd is the marker of the last event of the workload's streams, or
// nil when it does not stream.
func (wl *workload) streamEnd() []byte {
	if !wl.stream {
		return nil
	}
	return wl.api.end
}

// answered is what once read of an answer: the latency to its end, the
// time to its first body byte, the X-Scar-Guard and X-Scar-Recall headers
// (-1 when absent), and whether it said X-Scar-Degraded: store.
type answered struct {
	lat, ttfb     time.Duration
	guard, recall int
	degraded      bool
}

// once sends one request and reads the whole answer, which must have
// status want. With an end marker the answer is a stream that must carry
// it.
func once(ctx context.Context, c *http.Client, url string, hdr http.Header, body, rbuf, end []byte, want int) (answered, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answered{}, err
	}
	req.Header = hdr
	t0 := time.Now()
	res, err := c.Do(req)
	if err != nil {
		return answered{}, err
	}
	defer res.Body.Close()
	ended := endWatch{marker: end}
	first := true
	var ttfb time.Duration
	for {
		n, rerr := res.Body.Read(rbuf)
		if n > 0 {
			if first {
				ttfb, first = time.Since(t0), false
			}
			ended.write(rbuf[:n])
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return answered{}, fmt.Errorf("read answer: %w", rerr)
		}
	}
	lat := time.Since(t0)
	if res.StatusCode != want {
		return answered{}, fmt.Errorf("status %d", res.StatusCode)
	}
	if end != nil && !ended.seen && want == http.StatusOK {
		return answered{}, fmt.Errorf("stream lacks its last event (%q)", end)
	}
	return answered{lat: lat, ttfb: ttfb, guard: headerInt(res.Header, "X-Scar-Guard"), recall: headerInt(res.Header, "X-Scar-Recall"),
		degraded: res.Header.Get("X-Scar-Degraded") != ""}, nil
}

// endWatch watches a stream, read in pieces, for the marker of its last
// event, which may be split between two reads. A nil marker is never seen.
type endWatch struct {
	marker []byte
	seen   bool
	carry  []byte // the last len(marker)-1 bytes read, then the start of the next read
}

func (w *endWatch) write(p []byte) {
	if w.seen || len(w.marker) == 0 {
		return
	}
	k := len(w.marker) - 1
	w.carry = append(w.carry, p[:min(len(p), k)]...)
	if bytes.Contains(w.carry, w.marker) || bytes.Contains(p, w.marker) {
		w.seen = true
		return
	}
	if len(p) >= k {
		w.carry = append(w.carry[:0], p[len(p)-k:]...)
	} else if len(w.carry) > k {
		w.carry = append(w.carry[:0], w.carry[len(w.carry)-k:]...)
	}
}

func headerInt(h http.Header, name string) int {
	v, err := strconv.Atoi(h.Get(name))
	if err != nil {
		return -1
	}
	return v
}
