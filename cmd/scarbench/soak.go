package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// soakResult is what the streaming soak measured of one proxy process.
type soakResult struct {
	Target    string  `json:"target"`
	Streams   int     `json:"streams"`
	Opened    int     `json:"opened"`    // received their first event
	Completed int     `json:"completed"` // ended with the API's last event
	Errors    int     `json:"errors"`
	OpenSecs  float64 `json:"open_seconds"` // until every stream had its first event
	TTFB      dist    `json:"ttfb"`

	RSSBeforeMB float64 `json:"rss_before_mb"`
	RSSOpenMB   float64 `json:"rss_open_mb"`
	RSSAfterMB  float64 `json:"rss_after_mb"`
	RSSPeakMB   float64 `json:"rss_peak_mb"` // VmHWM: the high-water mark
	// RSSAnonOpenMB and RSSFileOpenMB split RSSOpenMB into anonymous memory
	// (heap, stacks) and file pages (the bbolt file is memory-mapped: the
	// pages the process read count in its RSS, and the kernel may reclaim
	// them).
	RSSAnonOpenMB float64 `json:"rss_anon_open_mb"`
	RSSFileOpenMB float64 `json:"rss_file_open_mb"`
	// HeapInuseMB and StackInuseMB split the memory while the streams are
	// open (Go runtime statistics from /metrics; scarproxy only).
	HeapInuseMB  float64 `json:"heap_inuse_open_mb,omitempty"`
	StackInuseMB float64 `json:"stack_inuse_open_mb,omitempty"`
	// HeapGoalMB is the heap size at which the next GC starts: with the
	// default GOGC=100, twice the heap that was live after the last one.
	HeapGoalMB float64 `json:"heap_goal_open_mb,omitempty"`

	// Goroutines of the process from go_goroutines (scarproxy only).
	GoroutinesBefore int `json:"goroutines_before,omitempty"`
	GoroutinesOpen   int `json:"goroutines_open,omitempty"`
	GoroutinesAfter  int `json:"goroutines_after,omitempty"`
	// LeftBehind is GoroutinesAfter - GoroutinesBefore once the streams
	// closed (waiting up to 10s for connections to wind down).
	LeftBehind int    `json:"left_behind"`
	FirstError string `json:"first_error,omitempty"`
}

// Soak limits of the target.
const soakMaxRSS = 200 << 20

// soak holds o.soak streams open at once through scarproxy, then through
// the bare proxy for reference, and reports what each process held.
func soak(ctx context.Context, e *benchEnv, o options, w io.Writer) ([]*soakResult, error) {
	var out []*soakResult
	for _, name := range []string{"scar", "bare"} {
		p := e.scar
		metrics := e.metricsURL()
		if name == "bare" {
			p, metrics = e.bare, ""
		}
		r, err := soakTarget(ctx, e, name, p.pid(), metrics, o.soak, w)
		if err != nil {
			return out, fmt.Errorf("soak %s: %w", name, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// soakTarget holds n streams open through one proxy at once, then releases
// them, and reads the proxy's RSS (/proc/PID/status) before, while open and
// after; with a metrics URL also its goroutines (go_goroutines) and heap
// and stack in use.
func soakTarget(ctx context.Context, e *benchEnv, name string, pid int, metrics string, n int, w io.Writer) (*soakResult, error) {
	res := &soakResult{Target: name, Streams: n}
	url := e.base(name) + e.api.pathOf(true)
	upstreamRelease := "http://" + e.upstream.addr + "/bench/release"
	// No keep-alive: after the soak no connection is left open, so any
	// goroutine still running in scarproxy is one left behind.
	client := &http.Client{Transport: &http.Transport{
		DialContext:        (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		DisableKeepAlives:  true,
		DisableCompression: true,
	}}
	hdr := e.api.header

	// Warm up with a few ordinary streams (loads the code paths and pools).
	for i := range 4 {
		body := e.convs[i].requestBody(nil, i, 1_000_000+i, false)
		if _, err := once(ctx, client, url, hdr, body, make([]byte, 32<<10), e.api.end, http.StatusOK); err != nil {
			return nil, fmt.Errorf("soak warm-up: %w", err)
		}
	}
	if metrics != "" {
		g, err := goroutines(ctx, metrics)
		if err != nil {
			return nil, err
		}
		res.GoroutinesBefore = g
	}
	rss, err := procStatus(pid, "VmRSS")
	if err != nil {
		return nil, err
	}
	res.RSSBeforeMB = mb(rss)

	fmt.Fprintf(w, "\nopening %d concurrent streams through %s…\n", n, name)
	holdHdr := hdr.Clone()
	holdHdr.Set(headerHold, "1")
	var opened, done sync.WaitGroup
	var errs atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if errs.Add(1) == 1 {
			firstErr.Store(err.Error())
		}
	}
	ttfbs := make([]time.Duration, n)
	completed := make([]bool, n)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	opened.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			openedOnce := sync.OnceFunc(opened.Done)
			defer openedOnce()
			conv := &e.convs[i%len(e.convs)]
			req, err := http.NewRequestWithContext(sctx, http.MethodPost, url, bytes.NewReader(conv.requestBody(nil, i, 2_000_000+i, false)))
			if err != nil {
				fail(err)
				return
			}
			req.Header = holdHdr
			t0 := time.Now()
			r, err := client.Do(req)
			if err != nil {
				fail(err)
				return
			}
			defer r.Body.Close()
			if r.StatusCode != http.StatusOK {
				fail(fmt.Errorf("status %d", r.StatusCode))
				return
			}
			buf := make([]byte, 4096)
			ended := endWatch{marker: e.api.end}
			for {
				k, err := r.Body.Read(buf)
				if k > 0 {
					if ttfbs[i] == 0 {
						ttfbs[i] = time.Since(t0)
						openedOnce()
					}
					ended.write(buf[:k])
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					fail(fmt.Errorf("read stream: %w", err))
					return
				}
			}
			if ended.seen {
				completed[i] = true
			} else {
				fail(fmt.Errorf("stream lacks its last event (%q)", e.api.end))
			}
		}()
	}
	if !waitGroup(ctx, &opened, 2*time.Minute) {
		cancel()
		done.Wait()
		return nil, fmt.Errorf("soak: streams not open after 2 minutes")
	}
	res.OpenSecs = time.Since(start).Seconds()
	var got []time.Duration
	for _, d := range ttfbs {
		if d > 0 {
			got = append(got, d)
		}
	}
	res.Opened = len(got)
	res.TTFB = newDist(got)
	if rss, err = procStatus(pid, "VmRSS"); err != nil {
		return nil, err
	}
	res.RSSOpenMB = mb(rss)
	if rss, err = procStatus(pid, "RssAnon"); err != nil {
		return nil, err
	}
	res.RSSAnonOpenMB = mb(rss)
	if rss, err = procStatus(pid, "RssFile"); err != nil {
		return nil, err
	}
	res.RSSFileOpenMB = mb(rss)
	if metrics != "" {
		m, err := scrape(ctx, metrics, "go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_next_gc_bytes")
		if err != nil {
			return nil, err
		}
		res.GoroutinesOpen = int(m["go_goroutines"])
		res.HeapInuseMB = m["go_memstats_heap_inuse_bytes"] / (1 << 20)
		res.StackInuseMB = m["go_memstats_stack_inuse_bytes"] / (1 << 20)
		res.HeapGoalMB = m["go_memstats_next_gc_bytes"] / (1 << 20)
	}

	// Release the streams and let them finish.
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, upstreamRelease, nil)
	req.Close = true
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("soak: release streams: %w", err)
	}
	r.Body.Close()
	if !waitGroup(ctx, &done, 2*time.Minute) {
		cancel()
		done.Wait()
		return nil, fmt.Errorf("soak: streams not finished 2 minutes after release")
	}
	for _, ok := range completed {
		if ok {
			res.Completed++
		}
	}
	res.Errors = int(errs.Load())
	if s, ok := firstErr.Load().(string); ok {
		res.FirstError = s
	}

	// Give the server up to 10s to wind the connections down.
	deadline := time.Now().Add(10 * time.Second)
	for metrics != "" {
		if res.GoroutinesAfter, err = goroutines(ctx, metrics); err != nil {
			return nil, err
		}
		if res.GoroutinesAfter <= res.GoroutinesBefore || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	res.LeftBehind = res.GoroutinesAfter - res.GoroutinesBefore
	if rss, err = procStatus(pid, "VmRSS"); err != nil {
		return nil, err
	}
	res.RSSAfterMB = mb(rss)
	if rss, err = procStatus(pid, "VmHWM"); err != nil {
		return nil, err
	}
	res.RSSPeakMB = mb(rss)
	printSoak(w, res)
	return res, nil
}

func printSoak(w io.Writer, s *soakResult) {
	fmt.Fprintf(w, "streams: %d opened, %d completed, %d errors; all open after %.2fs; ttfb p50 %.2f ms p99 %.2f ms max %.2f ms\n",
		s.Opened, s.Completed, s.Errors, s.OpenSecs, s.TTFB.P50, s.TTFB.P99, s.TTFB.Max)
	if s.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", s.FirstError)
	}
	fmt.Fprintf(w, "%s RSS: before %.1f MB, %d streams open %.1f MB (anonymous %.1f, file %.1f), after %.1f MB, peak (VmHWM) %.1f MB\n",
		s.Target, s.RSSBeforeMB, s.Opened, s.RSSOpenMB, s.RSSAnonOpenMB, s.RSSFileOpenMB, s.RSSAfterMB, s.RSSPeakMB)
	if s.Target != "scar" {
		return
	}
	fmt.Fprintf(w, "%s while open: heap in use %.1f MB (next GC at %.1f MB), stacks %.1f MB\n", s.Target, s.HeapInuseMB, s.HeapGoalMB, s.StackInuseMB)
	fmt.Fprintf(w, "%s goroutines: before %d, open %d, after %d (left behind: %d)\n",
		s.Target, s.GoroutinesBefore, s.GoroutinesOpen, s.GoroutinesAfter, s.LeftBehind)
	verdict := func(name string, ok bool) {
		word := "MISSED"
		if ok {
			word = "met"
		}
		fmt.Fprintf(w, "target %s: %s\n", name, word)
	}
	verdict(fmt.Sprintf("%d open streams with RSS under 200 MB", s.Streams), s.Opened == s.Streams && s.RSSPeakMB < mb(soakMaxRSS))
	verdict("no goroutine left behind", s.Completed == s.Streams && s.LeftBehind <= 0)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func goroutines(ctx context.Context, metricsURL string) (int, error) {
	m, err := scrape(ctx, metricsURL, "go_goroutines")
	if err != nil {
		return 0, err
	}
	return int(m["go_goroutines"]), nil
}

// waitGroup waits for wg, at most timeout; it reports whether wg finished.
func waitGroup(ctx context.Context, wg *sync.WaitGroup, timeout time.Duration) bool {
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	case <-time.After(timeout):
	}
	return false
}
