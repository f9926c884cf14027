package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
)

// TestMain lets the test binary play the child roles scarbench re-executes
// itself for (the end-to-end tests start it as the upstream and bare proxy).
func TestMain(m *testing.M) {
	if os.Getenv(envRole) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, nil, os.Getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestConversationIsARealisticAgentTurn(t *testing.T) {
	sols := seedSolutions(200, time.Now())
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			cv := newConversation(3, stream, sols)
			body := cv.requestBody(nil, 3, 41, false)
			if !json.Valid(body) {
				t.Fatalf("body is not valid JSON: %.200s", body)
			}
			if n := len(body); n < 18<<10 || n > 24<<10 {
				t.Errorf("body is %d bytes, want about 20 KB", n)
			}
			if got := gjson.GetBytes(body, "stream").Bool(); got != stream {
				t.Errorf("stream = %v, want %v", got, stream)
			}
			msgs := gjson.GetBytes(body, "messages").Array()
			if len(msgs) < 20 || msgs[0].Get("role").Str != "system" || msgs[1].Get("role").Str != "user" {
				t.Fatalf("want a system prompt, the task and 10+ turns; got %d messages", len(msgs))
			}
			if goal := msgs[1].Get("content").Str; goal != cv.goal {
				t.Errorf("first user message %q, want the goal %q", goal, cv.goal)
			}
			failed, ok := 0, 0
			for _, m := range msgs {
				if m.Get("role").Str != "tool" {
					continue
				}
				if guard.ToolFailed(m.Get("content").Str) {
					failed++
				} else {
					ok++
				}
			}
			if failed < 3 || ok < 3 {
				t.Errorf("tool results: %d failed, %d succeeded; want a mix with at least 3 of each", failed, ok)
			}
			last := msgs[len(msgs)-1]
			if id := last.Get("tool_call_id").Str; id != "call_new_c3s41" {
				t.Errorf("newest tool_call_id = %q, want call_new_c3s41", id)
			}
			if call := msgs[len(msgs)-2].Get("tool_calls.0.id").Str; call != "call_new_c3s41" {
				t.Errorf("newest tool call id = %q, want call_new_c3s41", call)
			}
			if guard.ToolFailed(last.Get("content").Str) {
				t.Errorf("newest tool result %q reads as failed; want success", last.Get("content").Str)
			}
			failedBody := cv.requestBody(nil, 3, 42, true)
			fl := gjson.GetBytes(failedBody, "messages").Array()
			if c := fl[len(fl)-1].Get("content").Str; !guard.ToolFailed(c) {
				t.Errorf("failed newest tool result %q does not read as failed", c)
			}
		})
	}
}

func TestConversationGoalsAreRecalled(t *testing.T) {
	sols := seedSolutions(10_000, time.Now())
	ix := recall.NewIndex()
	for i, s := range sols {
		s.ID = fmt.Sprint(i)
		ix.Put(s)
	}
	for c := range 32 {
		cv := newConversation(c, false, sols)
		m := ix.Search(recall.Query{Workspace: benchWorkspace, Goal: cv.goal, K: 1, MinSimilarity: recall.DefaultMinSimilarity})
		if len(m) == 0 {
			t.Errorf("client %d: goal %q recalls nothing", c, cv.goal)
		}
	}
}

func TestSeedSolutionsAreDistinct(t *testing.T) {
	sols := seedSolutions(5000, time.Now())
	keys := map[string]bool{}
	for _, s := range sols {
		if keys[s.Key] {
			t.Fatalf("key %s used twice", s.Key)
		}
		keys[s.Key] = true
		if s.Key != recall.GoalKey(s.Goal) || s.Workspace != benchWorkspace {
			t.Fatalf("solution %+v: key or workspace wrong", s)
		}
	}
}

func TestSeedIncidentsRepeatInsideTheGuardWindow(t *testing.T) {
	now := time.Now()
	g, err := guard.New(guard.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	var newest []store.Incident
	for i := range 1000 {
		inc := seedIncident(i, n, now, incidentSpan)
		if now.Sub(inc.Time) > guard.DefaultWindow {
			t.Fatalf("incident %d is %s old; the newest 1000 must be inside the guard window", i, now.Sub(inc.Time))
		}
		newest = append(newest, inc)
	}
	if got := seedIncident(n-1, n, now, incidentSpan); now.Sub(got.Time) < 23*time.Hour {
		t.Errorf("oldest incident is %s old, want about %s", now.Sub(got.Time), incidentSpan)
	}
	if entries := g.Detect(newest, now); len(entries) < 3 {
		t.Errorf("guard found %d repeated patterns in the newest incidents, want at least 3", len(entries))
	}
}

func TestFakeUpstream(t *testing.T) {
	up := newFakeUpstream()
	srv := httptest.NewServer(up)
	defer srv.Close()
	body := newConversation(0, false, nil).requestBody(nil, 0, 1, false)
	streamBody := newConversation(0, true, nil).requestBody(nil, 0, 1, false)
	tests := []struct {
		name       string
		body       []byte
		final      bool
		wantType   string
		wantFinish string
	}{
		{"json tool call", body, false, "application/json", "tool_calls"},
		{"json final", body, true, "application/json", "stop"},
		{"sse tool call", streamBody, false, "text/event-stream", "tool_calls"},
		{"sse final", streamBody, true, "text/event-stream", "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", bytes.NewReader(tt.body))
			if tt.final {
				req.Header.Set(headerFinal, "1")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != tt.wantType {
				t.Fatalf("status %d, type %q", res.StatusCode, res.Header.Get("Content-Type"))
			}
			var finish string
			if tt.wantType == "application/json" {
				finish = gjson.GetBytes(b, "choices.0.finish_reason").Str
			} else {
				if !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
					t.Fatalf("stream does not end with [DONE]: %q", b)
				}
				for _, ev := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
					data := strings.TrimPrefix(ev, "data: ")
					if data == "[DONE]" {
						continue
					}
					if !gjson.Valid(data) {
						t.Fatalf("event %q is not JSON", data)
					}
					if f := gjson.Get(data, "choices.0.finish_reason").Str; f != "" {
						finish = f
					}
				}
			}
			if finish != tt.wantFinish {
				t.Errorf("finish_reason %q, want %q", finish, tt.wantFinish)
			}
		})
	}
}

func TestFakeUpstreamHoldsStreamsUntilRelease(t *testing.T) {
	up := newFakeUpstream()
	srv := httptest.NewServer(up)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
		bytes.NewReader(newConversation(0, true, nil).requestBody(nil, 0, 1, false)))
	req.Header.Set(headerHold, "1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Connection") != "close" && !res.Close {
		t.Error("a held stream must close its connection when done")
	}
	br := bufio.NewReader(res.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("first event: %q, %v", first, err)
	}
	// The stream is held: release it, then it must finish.
	rel, err := http.Post(srv.URL+"/bench/release", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rel.Body.Close()
	rest, err := io.ReadAll(br)
	if err != nil || !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		t.Fatalf("rest of the stream: %q, %v", rest, err)
	}
}

func TestBareProxyStreamsThrough(t *testing.T) {
	up := httptest.NewServer(newFakeUpstream())
	defer up.Close()
	u, _ := url.Parse(up.URL)
	bare := httptest.NewServer(newBareProxy(u))
	defer bare.Close()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			wl := newWorkload(2, stream, 0, 0, []conversation{newConversation(0, stream, nil), newConversation(1, stream, nil)})
			// A closed loop bounded by a short duration: it ends by itself.
			res := drive(context.Background(), newTarget("bare", bare.URL+"/v1", 2), wl, 200*time.Millisecond)
			if res.Errors != 0 || res.Requests == 0 {
				t.Fatalf("%d requests, %d errors (%s)", res.Requests, res.Errors, res.FirstError)
			}
			if l := res.Latency; !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) {
				t.Errorf("latency percentiles out of order: %+v", l)
			}
			if stream != (res.TTFB != nil) {
				t.Errorf("ttfb reported = %v, want %v", res.TTFB != nil, stream)
			}
			if res.Guard != -1 || res.Recall != -1 {
				t.Errorf("bare proxy answered X-Scar headers: guard %d recall %d", res.Guard, res.Recall)
			}
		})
	}
}

func TestDriveCountsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	wl := newWorkload(1, false, 0, 0, []conversation{newConversation(0, false, nil)})
	res := drive(context.Background(), newTarget("broken", srv.URL+"/v1", 1), wl, 100*time.Millisecond)
	if res.Errors == 0 || res.Requests != 0 || !strings.Contains(res.FirstError, "500") {
		t.Fatalf("requests %d, errors %d, first error %q; want only errors naming the status", res.Requests, res.Errors, res.FirstError)
	}
}

func TestNewDist(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: newDist sorts
	}
	tests := []struct {
		name string
		in   []time.Duration
		want dist
	}{
		{"empty", nil, dist{}},
		{"one", ms(7), dist{P50: 7, P90: 7, P99: 7, Max: 7}},
		{"hundred", ms(hundred...), dist{P50: 50, P90: 90, P99: 99, Max: 100}},
		{"two", ms(1, 3), dist{P50: 1, P90: 3, P99: 3, Max: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newDist(tt.in); got != tt.want {
				t.Errorf("newDist = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSpreadOf(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want spread
	}{
		{"empty", nil, spread{}},
		{"odd", []float64{3, 1, 2}, spread{1, 2, 3}},
		{"even", []float64{4, 1, 3, 2}, spread{1, 2.5, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spreadOf(tt.in); got != tt.want {
				t.Errorf("spreadOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(options) bool
	}{
		{"defaults", nil, "", func(o options) bool {
			return o.conc == 1 && o.rounds == 3 && o.incidents == 100_000 && o.solutions == 10_000 && len(o.targets) == 3
		}},
		{"targets deduplicated", []string{"-targets", "scar, bare,scar"}, "", func(o options) bool {
			return strings.Join(o.targets, ",") == "scar,bare"
		}},
		{"bad target", []string{"-targets", "nginx"}, "not direct, bare or scar", nil},
		{"zero clients", []string{"-c", "0"}, "-c", nil},
		{"unbounded duration", []string{"-d", "1h"}, "-d", nil},
		{"stray argument", []string{"extra"}, "unexpected argument", nil},
		{"negative fail-every", []string{"-fail-every", "-1"}, "must not be negative", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(o) {
				t.Fatalf("parseFlags = %+v, %v", o, err)
			}
		})
	}
}

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:80": true, "0.0.0.0:80": false, "10.1.2.3:80": false, "localhost": false,
	} {
		if err := checkLoopback(addr); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 17\n"+
			"scarproxy_overhead_seconds_bucket{le=\"1e-05\"} 3\nscarproxy_overhead_seconds_sum 0.25\nscarproxy_overhead_seconds_count 100\n")
	}))
	defer srv.Close()
	m, err := scrape(context.Background(), srv.URL, "go_goroutines", "scarproxy_overhead_seconds_sum", "scarproxy_overhead_seconds_count")
	if err != nil {
		t.Fatal(err)
	}
	if m["go_goroutines"] != 17 || m["scarproxy_overhead_seconds_sum"] != 0.25 || m["scarproxy_overhead_seconds_count"] != 100 {
		t.Errorf("scrape = %v", m)
	}
	if _, err := scrape(context.Background(), srv.URL, "go_threads"); err == nil {
		t.Error("a missing series must be an error")
	}
}

func TestProcStatus(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	rss, err := procStatus(os.Getpid(), "VmRSS")
	if err != nil || rss < 1<<20 {
		t.Fatalf("VmRSS = %d, %v", rss, err)
	}
	if _, err := procStatus(os.Getpid(), "NoSuchField"); err == nil {
		t.Error("a missing field must be an error")
	}
}

// TestEndToEnd runs the tool as a user does, small: it builds scarproxy,
// seeds a small store, and runs one round of each target, then a soak.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds scarproxy and starts servers")
	}
	out := filepath.Join(t.TempDir(), "result.json")
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"-c", "2", "-d", "300ms", "-warmup", "100ms", "-rounds", "2", "-stream",
		"-incidents", "3000", "-solutions", "300", "-out", out}, func(string) string { return "" }, &stdout, io.Discard)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 2 || len(rep.Rounds[0]) != 3 || rep.Summary == nil || rep.Summary.Comparison == nil {
		t.Fatalf("report: %d rounds, summary %+v\n%s", len(rep.Rounds), rep.Summary, stdout.String())
	}
	for _, runs := range rep.Rounds {
		for _, r := range runs {
			if r.Requests == 0 || r.Errors != 0 || r.TTFB == nil {
				t.Errorf("%s: %d requests, %d errors (%s)", r.Target, r.Requests, r.Errors, r.FirstError)
			}
			if r.Target == "scar" && (r.Guard < 1 || r.Recall < 1 || r.OverheadUS <= 0) {
				t.Errorf("scarproxy ran without memory: guard %d, recall %d, overhead %.1f µs", r.Guard, r.Recall, r.OverheadUS)
			}
		}
	}
	for _, want := range []string{"throughput (c)/(b)", "added p50", "added ttfb p50", "target stream time to first byte"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}

	stdout.Reset()
	err = run(context.Background(), []string{"-soak", "50", "-incidents", "3000", "-solutions", "300", "-out", out},
		func(string) string { return "" }, &stdout, io.Discard)
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, stdout.String())
	}
	b, _ = os.ReadFile(out)
	rep = report{}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Soak) != 2 {
		t.Fatalf("soak results: %d, want scar and bare", len(rep.Soak))
	}
	s := rep.Soak[0]
	if s.Target != "scar" || s.Opened != 50 || s.Completed != 50 || s.Errors != 0 || s.RSSOpenMB <= 0 || s.GoroutinesOpen <= s.GoroutinesBefore {
		t.Errorf("scar soak: %+v", s)
	}
	if s.LeftBehind > 0 {
		t.Errorf("scarproxy kept %d goroutines after the streams closed", s.LeftBehind)
	}
}

// strictBody fails any read once its data is exhausted, as a request body
// the server already closed does.
type strictBody struct {
	data   []byte
	closed bool
}

func (b *strictBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, http.ErrBodyReadAfterClose
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *strictBody) Close() error { b.closed = true; return nil }

func TestLengthBodyNeverReadsPastItsLength(t *testing.T) {
	for _, bufSize := range []int{1, 7, 64, 4096} {
		t.Run(fmt.Sprintf("buf=%d", bufSize), func(t *testing.T) {
			inner := &strictBody{data: []byte("0123456789abcdef")}
			lb := &lengthBody{rc: inner, left: 16}
			var got []byte
			buf := make([]byte, bufSize)
			for {
				n, err := lb.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
			}
			// The transport's check for extra bytes: one more read.
			if n, err := lb.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("read past the length = %d, %v; want 0, EOF", n, err)
			}
			if string(got) != "0123456789abcdef" {
				t.Errorf("read %q", got)
			}
			if lb.Close() != nil || !inner.closed {
				t.Error("Close must close the inner body")
			}
		})
	}
}
