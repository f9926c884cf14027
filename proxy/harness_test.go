package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/bolt"
	"github.com/tidwall/gjson"
)

// received is one request as an upstream saw it.
type received struct {
	Method  string
	RawPath string // escaped path
	Query   string
	Header  http.Header
	Body    []byte
}

// recorder is an httptest upstream that records requests and answers
// with a handler of the test's choosing.
type recorder struct {
	mu   sync.Mutex
	reqs []received
	srv  *httptest.Server
}

func newRecorder(t *testing.T, answer http.HandlerFunc) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, received{Method: r.Method, RawPath: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		answer(w, r)
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

func (r *recorder) last(t *testing.T) received {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("upstream received no request")
	}
	return r.reqs[len(r.reqs)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// okCompletion answers a non-streaming chat completion.
func okCompletion(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
}

// tickingClock moves a second each time it is read, from a time the test
// sets.
type tickingClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *tickingClock) read() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Second)
	return c.now
}

func (c *tickingClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// harness is a proxy on a real bbolt file in front of test upstreams.
type harness struct {
	t     *testing.T
	srv   *Server
	http  *httptest.Server
	store store.Store
	now   time.Time
	mu    sync.Mutex

	inflight sync.WaitGroup
}

type harnessOpt func(*Options, *[]providers.Config)

func withProviders(cfgs ...providers.Config) harnessOpt {
	return func(_ *Options, p *[]providers.Config) { *p = cfgs }
}

func withOptions(f func(*Options)) harnessOpt {
	return func(o *Options, _ *[]providers.Config) { f(o) }
}

func providerAt(name, url string) providers.Config {
	return providers.Config{Name: name, Type: providers.TypeOpenAI, BaseURL: url}
}

func newHarness(t *testing.T, upstreamURL string, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarnessOn(t, tempBolt(t), upstreamURL, opts...)
}

// tempBolt opens a bbolt store in a temporary directory, closed when the
// test ends.
func tempBolt(t *testing.T) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "scarproxy.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// harnessStart is where a harness's clock starts.
var harnessStart = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func newHarnessOn(t *testing.T, st store.Store, upstreamURL string, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, store: st, now: harnessStart}
	g, err := guard.New(guard.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Options: memory.Options{Store: st, Guard: g, Now: h.clock}}
	var pcs []providers.Config
	if upstreamURL != "" {
		pcs = []providers.Config{providerAt("up", upstreamURL)}
	}
	for _, f := range opts {
		f(&o, &pcs)
	}
	router, err := providers.NewRouter(pcs, func(k string) string {
		if k == "TEST_PROVIDER_KEY" {
			return "sk-provider-secret"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	o.Router = router
	srv, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	h.srv = srv
	// Stores what the background writers hold; runs after the HTTP
	// server's close, before the store's.
	t.Cleanup(func() { srv.Close() })
	// Tests wait for the handler to return (the proxy records what it saw
	// after the client got the last byte) and for the incidents and
	// captures it queued to be stored, never for a duration.
	h.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.inflight.Add(1)
		defer h.inflight.Done()
		srv.Handler().ServeHTTP(w, r)
		srv.memory.Wait()
	}))
	t.Cleanup(h.http.Close)
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.now = h.now.Add(time.Second)
	return h.now
}

// do sends a request to the proxy.
func (h *harness) do(method, path string, body []byte, hdr map[string]string) *http.Response {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.http.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// chat posts a chat completion and returns the response with its body read.
func (h *harness) chat(body string, hdr map[string]string) (*http.Response, []byte) {
	h.t.Helper()
	res := h.do(http.MethodPost, "/v1/chat/completions", []byte(body), hdr)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	h.inflight.Wait()
	return res, b
}

func (h *harness) incidents(ws, proj string) []store.Incident {
	h.t.Helper()
	incs, err := h.store.ListIncidents(context.Background(), store.IncidentQuery{Workspace: ws, Project: proj, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	return incs
}

// assertOpenAIError checks an OpenAI-shaped error body.
func assertOpenAIError(t *testing.T, res *http.Response, body []byte, status int) {
	t.Helper()
	if res.StatusCode != status {
		t.Fatalf("status = %d, want %d; body %s", res.StatusCode, status, body)
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %s", body)
	}
	if e.Error.Message == "" || e.Error.Type == "" || e.Error.Code == "" {
		t.Fatalf("error body lacks message/type/code: %s", body)
	}
}

// chatBody builds a chat request body from role/content pairs.
func chatBody(t *testing.T, extra map[string]any, msgs ...map[string]any) string {
	t.Helper()
	m := map[string]any{"model": "gpt-test", "messages": msgs}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func msg(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func toolCall(id, name string) map[string]any {
	return map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{
		"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": "{}"},
	}}}
}

func toolResultMsg(id, content string) map[string]any {
	return map[string]any{"role": "tool", "tool_call_id": id, "content": content}
}

// toldOf returns what the proxy told the model in a chat request body the
// upstream saw: its system message's text, then each frame of blocks
// placed in its other messages (guard.placement: turn), after a blank
// line.
func toldOf(t *testing.T, body []byte) string {
	t.Helper()
	if !json.Valid(body) {
		t.Fatalf("upstream body is not JSON: %q", body)
	}
	return chatTold(body)
}

// chatTold is toldOf for a body known to be JSON.
func chatTold(body []byte) string {
	var told []string
	system := true
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		text := wire.ContentText(m.Get("content"))
		if r := m.Get("role").String(); system && (r == "system" || r == "developer") {
			told, system = append(told, text), false
			return true
		}
		for {
			i := strings.Index(text, wire.FrameStart+"\n"+wire.FrameNote)
			j := strings.Index(text[max(i, 0):], wire.FrameEnd)
			if i < 0 || j < 0 {
				return true
			}
			told = append(told, text[i:i+j+len(wire.FrameEnd)])
			text = text[i+j+len(wire.FrameEnd):]
		}
	})
	return strings.Join(told, "\n\n")
}

var _ = recall.BlockStart

// counter returns the value of one of the server's counters (a series
// without labels).
func (h *harness) counter(name string) float64 {
	h.t.Helper()
	families, err := h.srv.metrics.registry.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	h.t.Fatalf("no counter %s", name)
	return 0
}

// requests returns scarproxy_requests_total of a route and status, over
// every provider.
func (h *harness) requests(route, status string) float64 {
	h.t.Helper()
	families, err := h.srv.metrics.registry.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "scarproxy_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["status"] == status {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
