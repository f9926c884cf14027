package providers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func mockDo(t *testing.T, ctx context.Context, method, path, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, "http://provider"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := NewMock().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(b)
}

func chat(content string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": "mock-gpt", "stream": stream,
		"messages": []map[string]any{{"role": "system", "content": "SYSTEM TEXT"}, {"role": "user", "content": content}},
	})
	return string(b)
}

func TestMockDirectives(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, content string
		stream        bool
		status        int
		has, hasNot   []string
	}{
		{"plain answer", "hello there", false, 200, []string{`"object":"chat.completion"`, `"finish_reason":"stop"`, `Mock answer to: hello there`, `"usage"`}, nil},
		{"429", "[[mock:status=429]] hi", false, 429, []string{`"code":"rate_limit_exceeded"`, "Rate limit reached for mock-gpt"}, nil},
		{"500", "[[mock:status=500]] hi", false, 500, []string{`"type":"server_error"`}, nil},
		{"tool call", "[[mock:tool=get_weather]] hi", false, 200, []string{`"tool_calls"`, `"name":"get_weather"`, `"finish_reason":"tool_calls"`}, nil},
		{"echo", "[[mock:echo]] hi", false, 200, []string{`"content":"SYSTEM TEXT"`}, nil},
		{"stream", "hello world one two three", true, 200, []string{"chat.completion.chunk", `"finish_reason":"stop"`, "data: [DONE]\n\n"}, nil},
		{"stream tool", "[[mock:tool=ls]] x", true, 200, []string{`"name":"ls"`, `"index":0`, "data: [DONE]"}, nil},
		{"truncate", "[[mock:truncate]] x", true, 200, []string{"chat.completion.chunk"}, []string{"[DONE]"}},
		{"stream error", "[[mock:stream_error]] x", true, 200, []string{`"error"`, "server_error"}, []string{"[DONE]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := mockDo(t, ctx, http.MethodPost, "/chat/completions", chat(tc.content, tc.stream))
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			for _, s := range tc.has {
				if !strings.Contains(body, s) {
					t.Errorf("missing %q in %s", s, body)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(body, s) {
					t.Errorf("unexpected %q in %s", s, body)
				}
			}
			if tc.stream && !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
				t.Errorf("content type %q", res.Header.Get("Content-Type"))
			}
		})
	}
}

func TestMockIsDeterministic(t *testing.T) {
	ctx := context.Background()
	_, a := mockDo(t, ctx, http.MethodPost, "/chat/completions", chat("same question", false))
	_, b := mockDo(t, ctx, http.MethodPost, "/chat/completions", chat("same question", false))
	strip := func(s string) string { // "created" is a clock
		var m map[string]any
		json.Unmarshal([]byte(s), &m)
		delete(m, "created")
		out, _ := json.Marshal(m)
		return string(out)
	}
	if strip(a) != strip(b) {
		t.Fatalf("same request, different answers:\n%s\n%s", a, b)
	}
}

func TestMockToolOnlyWhileUserIsLast(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"[[mock:tool=run]] go"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"run","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`
	_, out := mockDo(t, context.Background(), http.MethodPost, "/chat/completions", body)
	if strings.Contains(out, "tool_calls") || !strings.Contains(out, `"finish_reason":"stop"`) {
		t.Fatalf("after a tool result the mock must finish: %s", out)
	}
}

func TestMockDelayHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://provider/chat/completions", strings.NewReader(chat("[[mock:delay=1h]] x", false)))
	done := make(chan error, 1)
	go func() {
		_, err := NewMock().RoundTrip(req)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("delay did not end on cancellation")
	}
}

func TestMockModelsAndUnknownPath(t *testing.T) {
	ctx := context.Background()
	res, body := mockDo(t, ctx, http.MethodGet, "/models", "")
	if res.StatusCode != 200 || !strings.Contains(body, `"id":"mock-gpt"`) {
		t.Fatalf("models %d %s", res.StatusCode, body)
	}
	res, body = mockDo(t, ctx, http.MethodPost, "/audio/speech", "{}")
	if res.StatusCode != 404 || !strings.Contains(body, `"error"`) {
		t.Fatalf("unknown path %d %s", res.StatusCode, body)
	}
	res, body = mockDo(t, ctx, http.MethodPost, "/chat/completions", "{not json")
	if res.StatusCode != 400 || !strings.Contains(body, "invalid_request_error") {
		t.Fatalf("bad json %d %s", res.StatusCode, body)
	}
}

func TestHTTPProviderJoinsURLAndInjectsKey(t *testing.T) {
	var got *http.Request
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		w.WriteHeader(204)
	}))
	defer up.Close()
	p, err := New(Config{Name: "a", Type: TypeOpenAI, BaseURL: up.URL + "/api/v1/", APIKeyEnv: "K"}, func(string) string { return "sk-secret" })
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://ignored/models/ft%3Ax%2Fy?limit=3", nil)
	req.URL.Path, req.URL.RawPath = "/models/ft:x/y", "/models/ft%3Ax%2Fy"
	req.Header.Set("Authorization", "Bearer client")
	res, err := p.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got.URL.EscapedPath() != "/api/v1/models/ft%3Ax%2Fy" || got.URL.RawQuery != "limit=3" {
		t.Fatalf("upstream saw %s ?%s", got.URL.EscapedPath(), got.URL.RawQuery)
	}
	if got.Header.Get("Authorization") != "Bearer sk-secret" {
		t.Fatalf("auth %q", got.Header.Get("Authorization"))
	}
}

func TestRouter(t *testing.T) {
	cfgs := []Config{
		{Name: "openai", Type: TypeMock, Models: []string{"gpt-*", "o1*"}, Fallbacks: []string{"backup", "local"}},
		{Name: "local", Type: TypeMock, Models: []string{"llama*"}, Default: true},
		{Name: "backup", Type: TypeMock},
	}
	r, err := NewRouter(cfgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func(ps []*Provider) string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name())
		}
		return strings.Join(out, ",")
	}
	for model, want := range map[string]string{
		"gpt-4o":  "openai,backup,local",
		"o1-mini": "openai,backup,local",
		"llama3":  "local",
		"mistral": "local",
		"":        "local",
	} {
		if got := names(r.Route(APIChat, model)); got != want {
			t.Errorf("Route(%q) = %s, want %s", model, got, want)
		}
	}

	bad := []struct {
		name string
		cfgs []Config
		want string
	}{
		{"none", nil, "at least one"},
		{"unknown fallback", []Config{{Name: "a", Type: TypeMock, Fallbacks: []string{"zz"}}}, "providers[0].fallbacks[0]"},
		{"self fallback", []Config{{Name: "a", Type: TypeMock, Fallbacks: []string{"a"}}}, "itself"},
		{"duplicate", []Config{{Name: "a", Type: TypeMock}, {Name: "a", Type: TypeMock}}, "providers[1].name"},
		{"two defaults", []Config{{Name: "a", Type: TypeMock, Default: true}, {Name: "b", Type: TypeMock, Default: true}}, "providers[1].default"},
		{"bad type", []Config{{Name: "a", Type: "grpc"}}, "providers[0].type"},
		{"bad url", []Config{{Name: "a", Type: TypeOpenAI, BaseURL: "ftp://x"}}, "providers[0].base_url"},
		{"bad glob", []Config{{Name: "a", Type: TypeMock, Models: []string{"gpt-["}}}, "providers[0].models[0]"},
		{"unknown api", []Config{{Name: "a", Type: TypeMock, APIs: []string{"chat", "embeddings"}}}, `providers[0].apis[1]: "embeddings" is not chat, responses or messages`},
		{"anthropic without url", []Config{{Name: "a", Type: TypeAnthropic}}, "providers[0].base_url: required for type anthropic"},
		{"anthropic bad url", []Config{{Name: "a", Type: TypeAnthropic, BaseURL: "api.anthropic.com"}}, "providers[0].base_url"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRouter(tc.cfgs, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
}

func routeNames(ps []*Provider) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name())
	}
	return strings.Join(out, ",")
}

func TestDefaultAPIs(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want map[string]bool
	}{
		{"openai", Config{Name: "o", Type: TypeOpenAI, BaseURL: "http://o/v1"}, map[string]bool{APIChat: true, APIResponses: true}},
		{"anthropic", Config{Name: "a", Type: TypeAnthropic, BaseURL: "http://a/v1"}, map[string]bool{APIMessages: true}},
		{"mock", Config{Name: "m", Type: TypeMock}, map[string]bool{APIChat: true, APIResponses: true, APIMessages: true}},
		{"listed", Config{Name: "o", Type: TypeOpenAI, BaseURL: "http://o/v1", APIs: []string{APIMessages}}, map[string]bool{APIMessages: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, api := range []string{APIChat, APIResponses, APIMessages, "embeddings", ""} {
				if got := p.ServesAPI(api); got != tc.want[api] {
					t.Errorf("ServesAPI(%q) = %v, want %v", api, got, tc.want[api])
				}
			}
			if len(p.Config().APIs) != len(tc.want) {
				t.Errorf("Config().APIs = %v", p.Config().APIs)
			}
		})
	}
}

func TestRouteByAPI(t *testing.T) {
	cfgs := []Config{
		{Name: "openai", Type: TypeOpenAI, BaseURL: "http://o/v1", Models: []string{"gpt-*"}, Fallbacks: []string{"anthropic", "backup"}},
		{Name: "anthropic", Type: TypeAnthropic, BaseURL: "http://a/v1", Models: []string{"claude-*"}, Fallbacks: []string{"openai", "backup", "backup"}},
		{Name: "local", Type: TypeOpenAI, BaseURL: "http://l/v1", APIs: []string{APIChat}, Models: []string{"llama*"}, Default: true},
		{Name: "backup", Type: TypeMock, APIs: []string{APIChat, APIMessages}},
		{Name: "resp", Type: TypeMock, APIs: []string{APIResponses}, Models: []string{"gpt-*", "o3*"}},
	}
	r, err := NewRouter(cfgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, api, model, want string
	}{
		{"chat pattern, fallbacks that serve chat", APIChat, "gpt-4o", "openai,backup"},
		{"responses pattern, no fallback serves responses", APIResponses, "gpt-4o", "openai"},
		{"responses later pattern", APIResponses, "o3-mini", "resp"},
		{"messages pattern, repeated fallback once", APIMessages, "claude-sonnet-4", "anthropic,backup"},
		{"messages pattern of a chat-only provider", APIMessages, "gpt-4o", "anthropic,backup"},
		{"chat pattern of a messages-only provider goes to the default", APIChat, "claude-sonnet-4", "local"},
		{"chat no pattern", APIChat, "mistral", "local"},
		{"chat default pattern", APIChat, "llama3", "local"},
		{"responses default does not serve it: first that does", APIResponses, "llama3", "openai"},
		{"responses empty model", APIResponses, "", "openai"},
		{"messages no pattern: first that serves it", APIMessages, "mistral", "anthropic,backup"},
		{"unknown api", "embeddings", "gpt-4o", ""},
		{"empty api", "", "gpt-4o", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := routeNames(r.Route(tc.api, tc.model)); got != tc.want {
				t.Errorf("Route(%q, %q) = %q, want %q", tc.api, tc.model, got, tc.want)
			}
		})
	}

	only, err := NewRouter([]Config{{Name: "a", Type: TypeAnthropic, BaseURL: "http://a/v1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := only.Route(APIChat, "gpt-4o"); got != nil {
		t.Errorf("no provider serves chat, Route = %q, want nil", routeNames(got))
	}
	if got := routeNames(only.Route(APIMessages, "gpt-4o")); got != "a" {
		t.Errorf("Route(messages) = %q", got)
	}
}

// recorder is an upstream that keeps the headers of the last request.
func recorder(t *testing.T) (*httptest.Server, func() http.Header) {
	t.Helper()
	var mu sync.Mutex
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(up.Close)
	return up, func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

func TestProviderCredentials(t *testing.T) {
	client := http.Header{
		"Authorization":     {"Bearer client-token"},
		"Api-Key":           {"client-azure-key"},
		"X-Api-Key":         {"client-anthropic-key"},
		"Cookie":            {"session=client"},
		"Anthropic-Beta":    {"tools-2024"},
		"X-Scar-Session":    {"s1"},
		"Content-Type":      {"application/json"},
		"Anthropic-Version": nil, // set per case
	}
	tests := []struct {
		name      string
		typ, key  string
		version   string // the client's anthropic-version, if any
		want      map[string]string
		wantGone  []string
		wantSame  []string // headers passed through as the client sent them
		wantNoVer bool
	}{
		{
			name: "openai with key", typ: TypeOpenAI, key: "sk-provider",
			want:      map[string]string{"Authorization": "Bearer sk-provider"},
			wantGone:  []string{"Api-Key", "X-Api-Key", "Cookie"},
			wantSame:  []string{"Anthropic-Beta", "X-Scar-Session", "Content-Type"},
			wantNoVer: true,
		},
		{
			name: "openai without key", typ: TypeOpenAI,
			wantSame:  []string{"Authorization", "Api-Key", "X-Api-Key", "Cookie", "X-Scar-Session"},
			wantNoVer: true,
		},
		{
			name: "anthropic with key", typ: TypeAnthropic, key: "sk-ant-provider",
			want:     map[string]string{"X-Api-Key": "sk-ant-provider", "Anthropic-Version": AnthropicVersion},
			wantGone: []string{"Authorization", "Api-Key", "Cookie"},
			wantSame: []string{"Anthropic-Beta", "X-Scar-Session", "Content-Type"},
		},
		{
			name: "anthropic with key keeps the client's version", typ: TypeAnthropic, key: "sk-ant-provider", version: "2099-01-01",
			want:     map[string]string{"X-Api-Key": "sk-ant-provider", "Anthropic-Version": "2099-01-01"},
			wantGone: []string{"Authorization", "Api-Key", "Cookie"},
		},
		{
			name: "anthropic without key", typ: TypeAnthropic,
			want:     map[string]string{"Anthropic-Version": AnthropicVersion},
			wantSame: []string{"Authorization", "Api-Key", "X-Api-Key", "Cookie", "Anthropic-Beta"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up, seen := recorder(t)
			env := map[string]string{"PROVIDER_KEY": tc.key}
			p, err := New(Config{Name: "p", Type: tc.typ, BaseURL: up.URL + "/v1", APIKeyEnv: "PROVIDER_KEY"}, func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, "http://ignored/messages?beta=true", strings.NewReader("{}"))
			req.Header = client.Clone()
			req.Header.Del("Anthropic-Version")
			if tc.version != "" {
				req.Header.Set("Anthropic-Version", tc.version)
			}
			res, err := p.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			got := seen()
			for k, v := range tc.want {
				if got.Get(k) != v || len(got.Values(k)) != 1 {
					t.Errorf("%s = %q, want %q", k, got.Values(k), v)
				}
			}
			for _, k := range tc.wantGone {
				if v := got.Values(k); len(v) != 0 {
					t.Errorf("%s leaked upstream: %q", k, v)
				}
			}
			for _, k := range tc.wantSame {
				if got.Get(k) != client.Get(k) {
					t.Errorf("%s = %q, want the client's %q", k, got.Get(k), client.Get(k))
				}
			}
			if tc.wantNoVer && got.Get("Anthropic-Version") != "" {
				t.Errorf("anthropic-version %q sent by a %s provider", got.Get("Anthropic-Version"), tc.typ)
			}
		})
	}
}

func TestAnthropicProviderJoinsURL(t *testing.T) {
	var gotPath, gotQuery string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery = r.URL.Path, r.URL.RawQuery
		w.WriteHeader(http.StatusNoContent)
	}))
	defer up.Close()
	p, err := New(Config{Name: "a", Type: TypeAnthropic, BaseURL: up.URL + "/v1/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://ignored/messages?beta=true", strings.NewReader("{}"))
	res, err := p.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if gotPath != "/v1/messages" || gotQuery != "beta=true" {
		t.Fatalf("upstream saw %s ?%s", gotPath, gotQuery)
	}
}
