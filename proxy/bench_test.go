package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
	"weak"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/upstream"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/bolt"
	"github.com/tidwall/gjson"
)

// The hot pieces of the request path, measured on a realistic agent
// request: a ~20 KB chat body with a system prompt, tool definitions and
// eleven tool rounds, some of them failures.

// The memory of the handler benchmarks: 10k incidents (5k of them inside
// the guard's one-hour window, so each request reads the 1,000 the proxy
// reads at most) and 10k solutions.
const (
	benchIncidents = 10_000
	benchSolutions = 10_000
)

// benchStorePath seeds a bench file removed when b ends. bbolt fsyncs every
// write, so it is written on a memory file system (/dev/shm) when there is
// one; reads come from the page cache either way.
func benchStorePath(b *testing.B) string {
	b.Helper()
	dir := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dir = "/dev/shm"
	}
	d, err := os.MkdirTemp(dir, "scarproxy-bench-*")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	path := filepath.Join(d, "scarproxy.db")
	if err := seedBench(path, time.Now()); err != nil {
		b.Fatalf("seed bench store: %v", err)
	}
	return path
}

func seedBench(path string, now time.Time) error {
	st, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	ctx := context.Background()
	msgs := []string{
		"run_shell:   File \"/work/app/module_%d.py\", line %d\n    def handler(:\n               ^\nSyntaxError: invalid syntax",
		"apply_patch: <tool_use_error>String to replace not found in file.\nString:     return nil%d%d\n</tool_use_error>",
		"run_tests: KeyError: 'session_%d' while loading /var/cache/app/%08x.json",
		"run_tests: assertion failed in test case %d: expected %d",
	}
	for i := benchIncidents - 1; i >= 0; i-- {
		inc := store.Incident{
			Time: now.Add(-time.Duration(i) * 2 * time.Hour / benchIncidents), Workspace: "default", Project: "default",
			Type: store.TypeToolError, Message: fmt.Sprintf(msgs[i%len(msgs)], i%5, i*7),
		}
		switch i % 10 {
		case 8:
			inc.Type, inc.StatusCode, inc.Message = store.TypeHTTPError, 429, "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29750. Please try again in 2.4s."
		case 9:
			inc.Type, inc.StatusCode, inc.Message = store.TypeTimeout, 504, "no response from provider within 60s"
		}
		inc.Fingerprint = guard.Fingerprint(inc.Message)
		if err := st.AddIncident(ctx, &inc); err != nil {
			return err
		}
	}
	verbs := []string{"fix", "add", "remove", "parse", "refactor", "test", "deploy", "cache", "retry", "migrate"}
	objects := []string{"config loader", "unit tests", "http client", "database schema", "login handler", "rate limiter", "csv exports", "search index", "webhook handler", "cron jobs"}
	for i := range benchSolutions {
		goal := fmt.Sprintf("%s the %s (case %d)", verbs[i%len(verbs)], objects[(i/len(verbs))%len(objects)], i)
		if i == 0 {
			goal = "fix the config loader when the file is missing"
		}
		s := store.Solution{Workspace: "default", Key: recall.GoalKey(goal), Goal: goal,
			Approach: "Tools: read_file -> apply_patch -> run_tests.", Outcome: "Completed; tests pass.",
			Confidence: 0.8, Source: store.SourceAPI}
		if err := st.PutSolution(ctx, &s); err != nil {
			return err
		}
	}
	return nil
}

// benchUpstream answers every chat completion at once with a small fixed
// tool call, as JSON or as SSE: the agent's loop goes on, so the proxy
// captures no solution.
func benchUpstream(b *testing.B) *httptest.Server {
	json := []byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_next","type":"function","function":{"name":"run_tests","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`)
	reads := agenttest.ChatStream(8, "tool_calls")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !gjson.GetBytes(body, "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			w.Write(json)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range reads {
			w.Write(p)
			w.(http.Flusher).Flush()
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkChatHandler runs whole proxied requests in-process (the client
// side is an httptest.ResponseRecorder; the upstream a loopback httptest
// server): "bare" through an httputil.ReverseProxy, "scar" through the
// proxy with memory on. The difference of the two is the proxy's cost:
// allocs/op of "scar" minus those of "bare" are its allocations per
// proxied request (both include the upstream's, which run in-process).
func BenchmarkChatHandler(b *testing.B) {
	up := benchUpstream(b)
	target, _ := url.Parse(up.URL)
	bare := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
	}
	st, err := bolt.Open(benchStorePath(b), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	router, err := providers.NewRouter([]providers.Config{{Name: "up", Type: providers.TypeOpenAI, BaseURL: up.URL + "/v1"}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	g, err := guard.New(guard.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(context.Background(), Options{Router: router, Options: memory.Options{Store: st, Guard: g}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	scar := srv.Handler()

	for _, stream := range []bool{false, true} {
		for _, c := range []struct {
			name string
			h    http.Handler
		}{{"bare", bare}, {"scar", scar}} {
			name := c.name + "/json"
			if stream {
				name = c.name + "/sse"
			}
			b.Run(name, func(b *testing.B) {
				bodies := make([][]byte, 4096)
				for i := range bodies {
					bodies[i] = agenttest.ChatBody(stream, "call_b"+strconv.Itoa(i))
				}
				do := func(i int) *httptest.ResponseRecorder {
					req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(bodies[i%len(bodies)]))
					req.Header.Set("Content-Type", "application/json")
					w := httptest.NewRecorder()
					c.h.ServeHTTP(w, req)
					return w
				}
				// The conversation's first request, as the agent sends it:
				// recall is decided there, and re-sent on every later turn.
				first := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(agenttest.ChatFirstBody(stream)))
				first.Header.Set("Content-Type", "application/json")
				fw := httptest.NewRecorder()
				c.h.ServeHTTP(fw, first)
				if fw.Code != http.StatusOK {
					b.Fatalf("first request: status %d: %s", fw.Code, fw.Body)
				}
				if c.name == "scar" && fw.Header().Get(HeaderRecall) == "0" {
					b.Fatalf("first request: nothing recalled: X-Scar-Recall %s", fw.Header().Get(HeaderRecall))
				}
				w := do(0)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
				if c.name == "scar" && (w.Header().Get(HeaderGuard) == "0" || w.Header().Get(HeaderRecall) == "0") {
					b.Fatalf("memory not used: X-Scar-Guard %s, X-Scar-Recall %s", w.Header().Get(HeaderGuard), w.Header().Get(HeaderRecall))
				}
				b.SetBytes(int64(len(bodies[0])))
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					do(i)
				}
			})
		}
	}
}

// Memory held by open streams. A stream may stay open for minutes; what a
// request keeps alive while its answer streams is multiplied by the open
// streams. These tests pin down what the benchmarks above measure.

// TestProviderRequestLetsGoOfTheBody checks that, once the provider
// answered, the request kept by the response (for the whole stream) holds
// no reference to the request body, and that the provider got every byte.
func TestProviderRequestLetsGoOfTheBody(t *testing.T) {
	got := make(chan []byte, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer up.Close()
	h := newHarness(t, up.URL+"/v1")
	body := agenttest.ChatBody(true, "call_1")
	sent := append([]byte(nil), body...)
	bodyRef := weak.Make(&body[0])
	ur := &upstream.Request{Method: http.MethodPost, Path: "/chat/completions", Header: http.Header{}, Body: body}
	a, f := upstream.Try(context.Background(), h.srv.providers().Default(), ur)
	if f != nil {
		t.Fatalf("try: %+v", f)
	}
	defer a.Release()
	if b := <-got; !bytes.Equal(b, sent) {
		t.Fatalf("provider received %d bytes, want the %d sent", len(b), len(sent))
	}
	// The answer (a) is still open: the body must be garbage by now, once
	// the transport's writer has returned from its write of it (the
	// provider may have read it all and answered first): the writer is
	// let run between collections, a body kept stays reachable through
	// them all.
	body, ur = nil, nil
	runtime.GC()
	for i := 0; i < 100 && bodyRef.Value() != nil; i++ {
		runtime.Gosched()
		runtime.GC()
	}
	if bodyRef.Value() != nil {
		t.Error("the request body is still reachable while the answer streams")
	}
	req := a.Res.Request
	if req.GetBody == nil {
		t.Fatal("no GetBody: the transport could not replay the body on a dead connection")
	}
	rc, err := req.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(rc); len(rest) != 0 {
		t.Errorf("after the answer, GetBody still replays %d bytes: the body stays in memory while the answer streams", len(rest))
	}
}
