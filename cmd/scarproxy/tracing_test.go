package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP traces receiver: it decodes the protobuf
// exports it gets and keeps their spans.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	srv   *httptest.Server
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "not an OTLP/HTTP protobuf export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// attrs returns a span's attributes as strings.
func attrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(v.IntValue)
		}
	}
	return m
}

// TestTracesToOTLP: with tracing.otlp_endpoint, each proxied request is
// one trace: a server span, and a client span for the provider call
// under it with the GenAI attributes and the tokens the answer reported.
// A client's traceparent is continued.
func TestTracesToOTLP(t *testing.T) {
	col := newCollector(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("mock: true\ndata_dir: "+dir+"\ntracing:\n  otlp_endpoint: "+col.srv.URL+"\n"), 0o644)
	in := start(t, "--config", cfg)
	chat := `{"model":"mock-gpt","messages":[{"role":"user","content":"SECRET-PROMPT say hello"}]}`
	for range 2 {
		if r := do(t, "POST", in.BaseURL+"/v1/chat/completions", chat, nil); r.status != 200 {
			t.Fatalf("chat: %d %s", r.status, r.body)
		}
	}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if r := do(t, "POST", in.BaseURL+"/v1/chat/completions", chat, map[string]string{"traceparent": parent}); r.status != 200 {
		t.Fatalf("chat: %d %s", r.status, r.body)
	}
	if err := in.Stop(); err != nil { // sends the spans left
		t.Fatal(err)
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	traces := map[string][]*tracepb.Span{}
	for _, s := range col.spans {
		id := hex.EncodeToString(s.TraceId)
		traces[id] = append(traces[id], s)
	}
	if len(traces) != 3 {
		t.Fatalf("%d traces for 3 requests (%d spans)", len(traces), len(col.spans))
	}
	if _, ok := traces["4bf92f3577b34da6a3ce929d0e0e4736"]; !ok {
		t.Fatalf("the client's trace was not continued: %v", traces)
	}
	for id, spans := range traces {
		if len(spans) != 2 {
			t.Fatalf("trace %s has %d spans", id, len(spans))
		}
		server, client := spans[0], spans[1]
		if server.Kind != tracepb.Span_SPAN_KIND_SERVER {
			server, client = client, server
		}
		if server.Kind != tracepb.Span_SPAN_KIND_SERVER || client.Kind != tracepb.Span_SPAN_KIND_CLIENT ||
			string(client.ParentSpanId) != string(server.SpanId) {
			t.Fatalf("trace %s: server %v, client %v (parent %x, want %x)", id, server.Kind, client.Kind, client.ParentSpanId, server.SpanId)
		}
		sa, ca := attrs(server), attrs(client)
		if server.Name != "POST /v1/chat/completions" || sa["http.response.status_code"] != "200" || sa["scarproxy.workspace"] != "default" {
			t.Fatalf("server span %q %v", server.Name, sa)
		}
		if client.Name != "chat mock-gpt" || ca["gen_ai.system"] != "mock" || ca["gen_ai.request.model"] != "mock-gpt" ||
			ca["gen_ai.operation.name"] != "chat" || ca["gen_ai.usage.input_tokens"] == "" || ca["gen_ai.usage.input_tokens"] == "0" ||
			ca["gen_ai.usage.output_tokens"] == "" || ca["scarproxy.provider"] != "mock" {
			t.Fatalf("client span %q %v", client.Name, ca)
		}
		for _, s := range spans {
			for k, v := range attrs(s) {
				if strings.Contains(v, "SECRET-PROMPT") {
					t.Fatalf("span %q holds the prompt in %s", s.Name, k)
				}
			}
		}
	}
}

func TestTracingEndpointValidated(t *testing.T) {
	for _, tc := range []struct{ endpoint, want, err string }{
		{"http://collector:4318", "http://collector:4318/v1/traces", ""},
		{"https://collector:4318/", "https://collector:4318/v1/traces", ""},
		{"http://collector:4318/otlp/v1/traces", "http://collector:4318/otlp/v1/traces", ""},
		{"collector:4318", "", "tracing.otlp_endpoint"},
	} {
		got, err := TracingConfig{OTLPEndpoint: tc.endpoint}.tracesURL()
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %q %v", tc.endpoint, got, err)
		}
	}
}
