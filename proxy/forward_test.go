package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/store"
)

func TestPassThroughIsByteForByte(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"ok":true}`)
	})
	h := newHarness(t, up.srv.URL+"/v1")

	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("file", "train.jsonl")
	fw.Write([]byte("{\"a\":1}\n{\"b\":\"\\u00e9\"}\n"))
	mw.WriteField("purpose", "fine-tune")
	mw.Close()

	tests := []struct {
		name, method, path, ctype string
		body                      []byte
		wantPath, wantQuery       string
	}{
		{"embeddings json", http.MethodPost, "/v1/embeddings", "application/json", []byte(`{"model":"text-embedding-3-small",  "input":["a","b"] , "x":1.50}`), "/v1/embeddings", ""},
		{"multipart upload streams", http.MethodPost, "/v1/files", mw.FormDataContentType(), mp.Bytes(), "/v1/files", ""},
		{"get with query", http.MethodGet, "/v1/files?limit=2&order=desc", "", nil, "/v1/files", "limit=2&order=desc"},
		{"escaped path", http.MethodGet, "/v1/models/ft%3Agpt-4o%3Aacme%3Ax%20y", "", nil, "/v1/models/ft%3Agpt-4o%3Aacme%3Ax%20y", ""},
		{"delete", http.MethodDelete, "/v1/files/file-abc", "", nil, "/v1/files/file-abc", ""},
		{"tenant path form", http.MethodPost, "/w/team/api/v1/moderations", "application/json", []byte(`{"input":"hi"}`), "/v1/moderations", ""},
		{"chat completions GET passes through", http.MethodGet, "/v1/chat/completions?limit=1", "", nil, "/v1/chat/completions", "limit=1"},
		{"messages count_tokens", http.MethodPost, "/v1/messages/count_tokens?beta=true", "application/json", []byte(`{"model":"claude", "system":"x","messages":[{"role":"user","content":"hi"}]}`), "/v1/messages/count_tokens", "beta=true"},
		{"messages batches", http.MethodGet, "/v1/messages/batches/msgbatch_1", "", nil, "/v1/messages/batches/msgbatch_1", ""},
		{"responses retrieve", http.MethodGet, "/v1/responses/resp_123?include[]=x", "", nil, "/v1/responses/resp_123", "include[]=x"},
		{"responses delete", http.MethodDelete, "/v1/responses/resp_123", "", nil, "/v1/responses/resp_123", ""},
		{"responses cancel", http.MethodPost, "/v1/responses/resp_123/cancel", "application/json", []byte(`{}`), "/v1/responses/resp_123/cancel", ""},
		{"responses input items", http.MethodGet, "/v1/responses/resp_123/input_items?limit=5", "", nil, "/v1/responses/resp_123/input_items", "limit=5"},
		{"responses compact", http.MethodPost, "/v1/responses/compact", "application/json", []byte(`{"model":"gpt-5", "input":[{"role":"user","content":"x"}],"instructions":"keep"}`), "/v1/responses/compact", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr map[string]string
			if tc.ctype != "" {
				hdr = map[string]string{"Content-Type": tc.ctype, "X-Custom": "kept", "X-Scar-Workspace": "w1"}
			}
			res := h.do(tc.method, tc.path, tc.body, hdr)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || string(b) != `{"ok":true}` || res.Header.Get("X-Upstream") != "yes" {
				t.Fatalf("answer = %d %q %v", res.StatusCode, b, res.Header)
			}
			got := up.last(t)
			if got.Method != tc.method || got.RawPath != tc.wantPath || got.Query != tc.wantQuery {
				t.Fatalf("upstream saw %s %s ?%s, want %s %s ?%s", got.Method, got.RawPath, got.Query, tc.method, tc.wantPath, tc.wantQuery)
			}
			if !bytes.Equal(got.Body, tc.body) {
				t.Fatalf("upstream body differs:\n got %q\nwant %q", got.Body, tc.body)
			}
			if tc.ctype != "" {
				if got.Header.Get("X-Custom") != "kept" {
					t.Error("custom header not forwarded")
				}
				if got.Header.Get("X-Scar-Workspace") != "" {
					t.Error("X-Scar-* header forwarded to the provider")
				}
			}
		})
	}
}

// TestChatWithoutMemoryIsForwardedUnchanged: a chat request with nothing to
// inject reaches the provider as the exact bytes the client sent.
func TestChatWithoutMemoryIsForwardedUnchanged(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	body := "{\"model\":\"gpt-4o\",  \"messages\":[{\"role\":\"system\",\"content\":\"Be terse.\\u00e9\"},{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":0.20}"
	res, _ := h.chat(body, nil)
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if got := up.last(t).Body; string(got) != body {
		t.Fatalf("upstream body changed:\n got %s\nwant %s", got, body)
	}
	if res.Header.Get(HeaderGuard) != "0" || res.Header.Get(HeaderRecall) != "0" {
		t.Fatalf("headers %v", res.Header)
	}
}

// sseUpstream streams events and waits on release between the first event
// and the rest, so a test can see what the client got meanwhile.
func TestStreamingFlushesEachEvent(t *testing.T) {
	// SSE, and any other answer of unknown length (chunked), are streams.
	for _, ct := range []string{"text/event-stream", "application/x-ndjson"} {
		t.Run(ct, func(t *testing.T) {
			release := make(chan struct{})
			up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", ct)
				fl := w.(http.Flusher)
				io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"first\"}}]}\n\n")
				fl.Flush()
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			})
			h := newHarness(t, up.srv.URL)
			res := h.do(http.MethodPost, "/v1/chat/completions", []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`), nil)
			defer res.Body.Close()
			if got := res.Header.Get("Content-Type"); got != ct {
				t.Fatalf("content type %q", got)
			}
			rd := bufio.NewReader(res.Body)
			line, err := rd.ReadString('\n')
			if err != nil || !strings.Contains(line, "first") {
				t.Fatalf("first event not delivered before the upstream finished: %q %v", line, err)
			}
			close(release)
			rest, _ := io.ReadAll(rd)
			if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
				t.Fatalf("stream end %q", rest)
			}
			if n := len(h.incidents("default", "default")); n != 0 {
				t.Fatalf("%d incidents for a clean stream", n)
			}
		})
	}
}

func TestHugeSSELinePassesIntact(t *testing.T) {
	args := strings.Repeat("x", 1<<20)
	event := `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + args + `"}}]}}]}` + "\n\n"
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, event)
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
	})
	h := newHarness(t, up.srv.URL)
	res, body := h.chat(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if res.StatusCode != 200 || !bytes.HasPrefix(body, []byte(event)) {
		t.Fatalf("1 MiB line damaged: status %d, %d bytes", res.StatusCode, len(body))
	}
	if n := len(h.incidents("default", "default")); n != 0 {
		t.Fatalf("%d incidents for a clean stream", n)
	}
}

func TestClientDisconnectCancelsUpstreamAndIsNoIncident(t *testing.T) {
	upstreamDone := make(chan struct{})
	started := make(chan struct{})
	var once sync.Once
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		first := false
		once.Do(func() { first = true })
		if !first {
			okCompletion(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		close(upstreamDone)
	})
	h := newHarness(t, up.srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.http.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(res.Body).ReadString('\n')
	<-started
	cancel()
	res.Body.Close()
	select {
	case <-upstreamDone:
	case <-time.After(10 * time.Second):
		t.Fatal("upstream request was not cancelled after the client left")
	}
	// The handler records after the stream ends; a later request on the
	// same tenant is served after it, so its guard read sees any record.
	h.chat(`{"model":"m","messages":[{"role":"user","content":"next"}]}`, nil)
	for _, in := range h.incidents("default", "default") {
		t.Errorf("client disconnect recorded as incident: %+v", in)
	}
}

func TestTimeoutsAndUnreachable(t *testing.T) {
	hang := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	idle := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String()
	ln.Close()

	t.Run("no headers in time is 504", func(t *testing.T) {
		p := providerAt("slow", hang.srv.URL)
		p.ResponseHeaderTimeout = 50 * time.Millisecond
		h := newHarness(t, "", withProviders(p))
		res, body := h.chat(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
		assertOpenAIError(t, res, body, http.StatusGatewayTimeout)
		incs := h.incidents("default", "default")
		if len(incs) != 1 || incs[0].Type != store.TypeTimeout || incs[0].StatusCode != 504 || incs[0].Provider != "slow" {
			t.Fatalf("incidents %+v", incs)
		}
	})
	t.Run("idle stream is cut and recorded as timeout", func(t *testing.T) {
		p := providerAt("idle", idle.srv.URL)
		p.IdleTimeout = 50 * time.Millisecond
		h := newHarness(t, "", withProviders(p))
		res, body := h.chat(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
		if res.StatusCode != 200 || bytes.Contains(body, []byte("[DONE]")) {
			t.Fatalf("status %d body %q", res.StatusCode, body)
		}
		incs := h.incidents("default", "default")
		if len(incs) != 1 || incs[0].Type != store.TypeTimeout {
			t.Fatalf("incidents %+v", incs)
		}
	})
	t.Run("unreachable is 502", func(t *testing.T) {
		h := newHarness(t, closedURL)
		res, body := h.chat(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
		assertOpenAIError(t, res, body, http.StatusBadGateway)
		incs := h.incidents("default", "default")
		if len(incs) != 1 || incs[0].Type != store.TypeUnreachable || incs[0].StatusCode != 502 {
			t.Fatalf("incidents %+v", incs)
		}
		res = h.do(http.MethodGet, "/v1/files", nil, nil)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assertOpenAIError(t, res, b, http.StatusBadGateway)
	})
}

func TestBodyTooLargeIs413(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL, withOptions(func(o *Options) { o.MaxBodyBytes = 1024 }))
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 2048) + `"}]}`
	res, body := h.chat(big, nil)
	assertOpenAIError(t, res, body, http.StatusRequestEntityTooLarge)

	// A streamed upload without Content-Length is cut at the limit too.
	pr, pw := io.Pipe()
	go func() {
		pw.Write(bytes.Repeat([]byte("z"), 4096))
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, h.http.URL+"/v1/files", pr)
	req.Header.Set("Content-Type", "application/octet-stream")
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	assertOpenAIError(t, r2, b2, http.StatusRequestEntityTooLarge)
	if up.count() != 0 {
		for _, r := range up.reqs {
			if len(r.Body) > 1024 {
				t.Fatalf("upstream received %d bytes, over the limit", len(r.Body))
			}
		}
	}
	if n := len(h.incidents("default", "default")); n != 0 {
		t.Fatalf("a client's oversized body was recorded as %d incident(s)", n)
	}
}

func TestInvalidJSONIs400(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	res, body := h.chat(`{"model":"m","messages":[`, nil)
	assertOpenAIError(t, res, body, http.StatusBadRequest)
	if up.count() != 0 {
		t.Fatal("invalid JSON was forwarded")
	}
}

// A body nested deeper than any JSON decoder allows is a 400, and the
// proxy keeps serving: an unbounded recursive check of this 8 MiB body
// would end the process with a stack overflow.
func TestDeeplyNestedBodyIs400(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	deep := `{"model":"m","messages":[{"role":"user","content":` + strings.Repeat("[", 8<<20) + `}]}`
	res, body := h.chat(deep, nil)
	assertOpenAIError(t, res, body, http.StatusBadRequest)
	if !strings.Contains(string(body), "nested more than") {
		t.Errorf("error does not say why: %s", body)
	}
	if res, body := h.chat(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil); res.StatusCode != http.StatusOK {
		t.Fatalf("next request: %d %s", res.StatusCode, body)
	}
	if up.count() != 1 {
		t.Fatalf("upstream saw %d requests, want only the valid one", up.count())
	}
}

func TestModelsMergesProviders(t *testing.T) {
	a := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4o","object":"model","owned_by":"openai"},{"id":"shared","object":"model"}]}`)
	})
	b := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"llama3","object":"model"},{"id":"shared","object":"model"}]}`)
	})
	h := newHarness(t, "", withProviders(providerAt("a", a.srv.URL), providerAt("b", b.srv.URL), providers.Config{Name: "m", Type: providers.TypeMock}))
	res := h.do(http.MethodGet, "/v1/models", nil, nil)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, id := range []string{"gpt-4o", "llama3", "mock-gpt"} {
		if !bytes.Contains(body, []byte(`"id":"`+id+`"`)) {
			t.Errorf("model %s missing from %s", id, body)
		}
	}
	if n := bytes.Count(body, []byte(`"shared"`)); n != 1 {
		t.Errorf("shared listed %d times", n)
	}
}

func TestRoutingAndFallback(t *testing.T) {
	limited := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-4o","type":"requests","code":"rate_limit_exceeded"}}`)
	})
	backup := newRecorder(t, okCompletion)
	local := newRecorder(t, okCompletion)
	p1 := providerAt("primary", limited.srv.URL)
	p1.Models = []string{"gpt-*"}
	p1.Fallbacks = []string{"backup"}
	p2 := providerAt("backup", backup.srv.URL)
	p3 := providerAt("local", local.srv.URL)
	p3.Models = []string{"llama*"}
	h := newHarness(t, "", withProviders(p1, p2, p3))

	res, body := h.chat(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, nil)
	if res.StatusCode != 200 || res.Header.Get(HeaderProvider) != "backup" || !bytes.Contains(body, []byte("done")) {
		t.Fatalf("fallback answer %d %s %s", res.StatusCode, res.Header.Get(HeaderProvider), body)
	}
	incs := h.incidents("default", "default")
	if len(incs) != 1 || incs[0].Provider != "primary" || incs[0].StatusCode != 429 || !strings.Contains(incs[0].Message, "Rate limit") {
		t.Fatalf("the failed provider's 429 was not recorded: %+v", incs)
	}
	if string(backup.last(t).Body) != string(limited.last(t).Body) {
		t.Fatal("fallback received other bytes than the primary")
	}

	res, _ = h.chat(`{"model":"llama3","messages":[{"role":"user","content":"hi"}]}`, nil)
	if res.Header.Get(HeaderProvider) != "local" || local.count() != 1 {
		t.Fatalf("llama3 routed to %s", res.Header.Get(HeaderProvider))
	}
}

func TestProviderKeyInjectionAndPassThrough(t *testing.T) {
	up := newRecorder(t, okCompletion)
	withKey := providerAt("keyed", up.srv.URL)
	withKey.APIKeyEnv = "TEST_PROVIDER_KEY"
	h := newHarness(t, "", withProviders(withKey))
	h.chat(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Authorization": "Bearer client-key"})
	if got := up.last(t).Header.Get("Authorization"); got != "Bearer sk-provider-secret" {
		t.Fatalf("provider key not injected: %q", got)
	}
	h2 := newHarness(t, up.srv.URL)
	h2.chat(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Authorization": "Bearer client-key"})
	if got := up.last(t).Header.Get("Authorization"); got != "Bearer client-key" {
		t.Fatalf("client key not passed through: %q", got)
	}
}

func TestFallbackNeverSeesThePrimaryKey(t *testing.T) {
	limited := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	backup := newRecorder(t, okCompletion)
	primary := providerAt("primary", limited.srv.URL)
	primary.APIKeyEnv = "TEST_PROVIDER_KEY"
	primary.Fallbacks = []string{"backup"}
	h := newHarness(t, "", withProviders(primary, providerAt("backup", backup.srv.URL)))
	res, _ := h.chat(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Authorization": "Bearer client-key"})
	if res.StatusCode != 200 || res.Header.Get(HeaderProvider) != "backup" {
		t.Fatalf("status %d from %q", res.StatusCode, res.Header.Get(HeaderProvider))
	}
	if got := limited.last(t).Header.Get("Authorization"); got != "Bearer sk-provider-secret" {
		t.Fatalf("primary got %q", got)
	}
	// The keyless fallback gets the client's headers as they came.
	if got := backup.last(t).Header.Get("Authorization"); got != "Bearer client-key" {
		t.Fatalf("fallback got Authorization %q", got)
	}
}

func TestMockThroughProxy(t *testing.T) {
	h := newHarness(t, "", withProviders(providers.Config{Name: "mock", Type: providers.TypeMock}))
	res, body := h.chat(`{"model":"mock-gpt","messages":[{"role":"system","content":"SYS"},{"role":"user","content":"[[mock:echo]] hi"}]}`, nil)
	if res.StatusCode != 200 || !bytes.Contains(body, []byte(`"content":"SYS"`)) {
		t.Fatalf("echo: %d %s", res.StatusCode, body)
	}
	res, body = h.chat(`{"model":"mock-gpt","messages":[{"role":"user","content":"[[mock:status=429]] hi"}]}`, nil)
	if res.StatusCode != 429 || !bytes.Contains(body, []byte("rate_limit_exceeded")) {
		t.Fatalf("429: %d %s", res.StatusCode, body)
	}
	for _, d := range []string{"truncate", "stream_error"} {
		res, _ = h.chat(fmt.Sprintf(`{"model":"mock-gpt","stream":true,"messages":[{"role":"user","content":"[[mock:%s]] hi"}]}`, d), nil)
		if res.StatusCode != 200 {
			t.Fatalf("%s: status %d", d, res.StatusCode)
		}
	}
	var types []string
	for _, in := range h.incidents("default", "default") {
		types = append(types, in.Type)
	}
	want := []string{store.TypeStreamError, store.TypeStreamError, store.TypeHTTPError}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("incident types %v, want %v (newest first)", types, want)
	}
}

// TestAClientThatLeavesAfterTheLastEventGotTheAnswer: Codex CLI closes the
// connection as soon as it reads response.completed, while the provider's
// stream is still open. The answer was whole: it counts as answered, its
// conversation is captured and its access line says 200, not a client
// that left (499). A client that leaves before the last event still is
// one.
func TestAClientThatLeavesAfterTheLastEventGotTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		complete bool
	}{{"after response.completed", true}, {"before it", false}} {
		t.Run(tc.name, func(t *testing.T) {
			sent := make(chan struct{})
			up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Parser fixed.\"}\n\n")
				if tc.complete {
					io.WriteString(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\","+
						"\"output\":[{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Parser fixed.\"}]}]}}\n\n")
				}
				w.(http.Flusher).Flush()
				close(sent)
				<-r.Context().Done() // the provider keeps the stream open
			})
			var logs logLines
			h := newHarness(t, "", withProviders(allAPIs(up.srv.URL)), withLog(&logs))
			body := `{"model":"m","stream":true,"instructions":"You are Codex.","input":[` +
				`{"type":"message","role":"user","content":[{"type":"input_text","text":"Fix the YAML parser of the config loader"}]},` +
				`{"type":"function_call","name":"run_tests","arguments":"{}","call_id":"c1"},` +
				`{"type":"function_call_output","call_id":"c1","output":"ok  \tgithub.com/acme/app\t0.4s"}]}`
			res := h.do(http.MethodPost, "/v1/responses", []byte(body), nil)
			<-sent
			buf := make([]byte, 4096)
			for got := ""; tc.complete && !strings.Contains(got, "response.completed"); {
				n, err := res.Body.Read(buf)
				if err != nil {
					t.Fatalf("stream ended before response.completed: %v", err)
				}
				got += string(buf[:n])
			}
			res.Body.Close() // as Codex does
			h.inflight.Wait()
			sols, err := h.store.ListSolutions(context.Background(), "default")
			if err != nil {
				t.Fatal(err)
			}
			answered, left := h.requests("responses", "200"), h.requests("responses", "499")
			if tc.complete && (len(sols) != 1 || answered != 1 || left != 0) {
				t.Fatalf("%d solutions captured; %v answered, %v left", len(sols), answered, left)
			}
			if !tc.complete && (len(sols) != 0 || answered != 0 || left != 1) {
				t.Fatalf("%d solutions captured; %v answered, %v left", len(sols), answered, left)
			}
			want := float64(200)
			if !tc.complete {
				want = 499
			}
			if lines := logs.lines(t, "request"); len(lines) != 1 || lines[0]["status"] != want {
				t.Fatalf("access lines %v, want one of status %v", lines, want)
			}
		})
	}
}
