package providers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
		if got := names(r.Route(model)); got != want {
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
