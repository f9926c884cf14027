package providers

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/scarproxy/scarproxy/providers/mock"
)

// TestMockProviderAnswersOffline: a provider of type mock is the offline
// mock, answering in-process.
func TestMockProviderAnswersOffline(t *testing.T) {
	p, err := New(Config{Name: "m", Type: TypeMock}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://ignored/models", nil)
	res, err := p.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"id":"`+mock.Models[0]+`"`) {
		t.Fatalf("GET /models: %d %s", res.StatusCode, b)
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
		{"unknown api", []Config{{Name: "a", Type: TypeMock, APIs: []string{"chat", "embeddings"}}}, `providers[0].apis[1]: "embeddings" is not chat, responses, messages or gemini`},
		{"anthropic without url", []Config{{Name: "a", Type: TypeAnthropic}}, "providers[0].base_url: required for type anthropic"},
		{"anthropic bad url", []Config{{Name: "a", Type: TypeAnthropic, BaseURL: "api.anthropic.com"}}, "providers[0].base_url"},
		{"gemini bad url", []Config{{Name: "g", Type: TypeGemini, BaseURL: "generativelanguage.googleapis.com"}}, "providers[0].base_url"},
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
		{"gemini", Config{Name: "g", Type: TypeGemini}, map[string]bool{APIGemini: true}},
		{"mock", Config{Name: "m", Type: TypeMock}, map[string]bool{APIChat: true, APIResponses: true, APIMessages: true, APIGemini: true}},
		{"listed", Config{Name: "o", Type: TypeOpenAI, BaseURL: "http://o/v1", APIs: []string{APIMessages}}, map[string]bool{APIMessages: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, api := range []string{APIChat, APIResponses, APIMessages, APIGemini, "embeddings", ""} {
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

// TestGeminiProvider: a provider of type gemini sends the Gemini API's
// paths below its host, with its key as x-goog-api-key in place of the
// client's (header or "key" parameter); without a key of its own the
// client's pass through.
func TestGeminiProvider(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Clone(context.Background())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(up.Close)
	for _, tc := range []struct {
		name, key string
		wantKey   string // x-goog-api-key upstream
		wantQuery string
	}{
		{"with key", "provider-key", "provider-key", "alt=sse&x=%6Bey"},
		{"without key", "", "client-key", "alt=sse&key=client-query-key&x=%6Bey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"GEMINI_API_KEY": tc.key}
			p, err := New(Config{Name: "g", Type: TypeGemini, BaseURL: up.URL, APIKeyEnv: "GEMINI_API_KEY"}, func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, "http://ignored/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key=client-query-key&x=%6Bey", strings.NewReader("{}"))
			req.Header.Set("X-Goog-Api-Key", "client-key")
			req.Header.Set("Authorization", "Bearer client-token")
			res, err := p.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if got.URL.Path != "/v1beta/models/gemini-2.5-flash:streamGenerateContent" || got.URL.RawQuery != tc.wantQuery {
				t.Errorf("sent to %s?%s", got.URL.Path, got.URL.RawQuery)
			}
			if k := got.Header.Values("X-Goog-Api-Key"); len(k) != 1 || k[0] != tc.wantKey {
				t.Errorf("x-goog-api-key %q, want %q", k, tc.wantKey)
			}
			if a := got.Header.Get("Authorization"); (tc.key != "") == (a != "") {
				t.Errorf("Authorization %q", a)
			}
		})
	}
	p, err := New(Config{Name: "g", Type: TypeGemini}, nil)
	if err != nil || p.Config().BaseURL != DefaultGeminiBaseURL || !p.ServesAPI(APIGemini) || p.ServesAPI(APIChat) {
		t.Fatalf("a gemini provider without base_url: %v, %+v", err, p.Config())
	}
}

func TestDropQueryKey(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"alt=sse":               "alt=sse",
		"key=k":                 "",
		"alt=sse&key=k":         "alt=sse",
		"key=k&alt=sse&key=k2":  "alt=sse",
		"%6Bey=k&alt=sse":       "alt=sse",
		"keys=1&monkey=2&a=%20": "keys=1&monkey=2&a=%20",
		"key":                   "",
	} {
		if got := DropQueryKey(in); got != want {
			t.Errorf("DropQueryKey(%q) = %q, want %q", in, got, want)
		}
	}
}
