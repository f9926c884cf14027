package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/store"
	"google.golang.org/genai"
)

// The Gemini API end to end: the official Gen AI SDK against the proxy
// (an httptest server) in front of the mock.

// genaiClient is the SDK's client of the proxy of h, with key as its API
// key (sent as x-goog-api-key) and the tenant headers given.
func genaiClient(t *testing.T, h *harness, key string, hdr http.Header) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: h.http.URL + "/", Headers: hdr},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mockHarness(t *testing.T, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarness(t, "", append([]harnessOpt{withProviders(providers.Config{Name: "mock", Type: providers.TypeMock})}, opts...)...)
}

// TestGeminiSDK: JSON and streamed answers reach the SDK whole, with the
// proxy's headers, and their usage is counted.
func TestGeminiSDK(t *testing.T) {
	h := mockHarness(t)
	c := genaiClient(t, h, "any-key", nil)
	ctx := context.Background()
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText("Be brief.", genai.RoleUser)}

	res, err := c.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("Say hello"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.inflight.Wait()
	if res.Text() != "Mock answer to: Say hello" || res.UsageMetadata == nil || res.UsageMetadata.PromptTokenCount == 0 {
		t.Fatalf("answer %q, usage %+v", res.Text(), res.UsageMetadata)
	}
	if hd := res.SDKHTTPResponse.Headers; hd.Get(HeaderProvider) != "mock" || hd.Get(HeaderGuard) != "0" || hd.Get(HeaderConversation) == "" {
		t.Fatalf("headers %v", hd)
	}

	var text strings.Builder
	var last *genai.GenerateContentResponse
	for chunk, err := range c.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("Say hello in a stream of words"), cfg) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(chunk.Text())
		last = chunk
	}
	h.inflight.Wait()
	if text.String() != "Mock answer to: Say hello in a stream of words" || last.Candidates[0].FinishReason != genai.FinishReasonStop {
		t.Fatalf("stream %q, last %+v", text.String(), last)
	}
	// Both answers' tokens, as the SDK read them, reach the usage records.
	want := int64(res.UsageMetadata.TotalTokenCount + last.UsageMetadata.TotalTokenCount)
	if got := h.tokens("input") + h.tokens("output"); got != float64(want) {
		t.Fatalf("%v tokens counted, the answers said %d", got, want)
	}
	if n := len(h.incidents("default", "default")); n != 0 {
		t.Fatalf("%d incidents", n)
	}
}

// TestGeminiSDKFunctionCalls: a function call round trip in which the
// function fails. The model (the mock's scripted loop) calls run_shell
// until the guard appears; the SDK's client sends each failed response
// back, as an agent would. The first failure is recorded, the second
// brings the guard, and the model stops there.
func TestGeminiSDKFunctionCalls(t *testing.T) {
	h := mockHarness(t)
	c := genaiClient(t, h, "any-key", nil)
	ctx := context.Background()
	tools := []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
		Name: "run_shell", Description: "Runs a shell command.",
		Parameters: &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{"cmd": {Type: genai.TypeString}}},
	}}}}
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText("You are a coding agent.", genai.RoleUser), Tools: tools}
	history := genai.Text(`[[mock:tool=run_shell args={"cmd":"python3 hello.py"} until=guard]] Write hello.py and run it`)
	var guards []string
	for turn := 0; ; turn++ {
		res, err := c.Models.GenerateContent(ctx, "gemini-2.5-flash", history, cfg)
		if err != nil {
			t.Fatal(err)
		}
		h.inflight.Wait()
		guards = append(guards, res.SDKHTTPResponse.Headers.Get(HeaderGuard))
		calls := res.FunctionCalls()
		if len(calls) == 0 {
			if want := "Mock answer: stopped calling run_shell after 2 calls: the repeat-failure guard appeared."; res.Text() != want {
				t.Fatalf("turn %d: %q, want %q", turn, res.Text(), want)
			}
			break
		}
		if turn == 3 || calls[0].Name != "run_shell" || calls[0].Args["cmd"] != "python3 hello.py" {
			t.Fatalf("turn %d: calls %+v", turn, calls[0])
		}
		history = append(history, res.Candidates[0].Content, genai.NewContentFromFunctionResponse("run_shell",
			map[string]any{"error": "Traceback (most recent call last):\n  File \"hello.py\", line 1\nSyntaxError: '(' was never closed"}, genai.RoleUser))
	}
	if strings.Join(guards, ",") != "0,0,1" {
		t.Fatalf("X-Scar-Guard on each turn: %v", guards)
	}
	incs := h.incidents("default", "default")
	if len(incs) != 2 || incs[0].Type != store.TypeToolError || !strings.HasPrefix(incs[0].Message, "run_shell: Traceback") {
		t.Fatalf("incidents %+v", incs)
	}
}

// TestGeminiSDKErrors: the provider's errors and the proxy's own reach
// the SDK in Google's shape, as an APIError with the status it knows.
func TestGeminiSDKErrors(t *testing.T) {
	ctx := context.Background()
	h := mockHarness(t)
	c := genaiClient(t, h, "any-key", nil)
	_, err := c.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("[[mock:status=429]] hi"), nil)
	h.inflight.Wait()
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" {
		t.Fatalf("the provider's 429: %v", err)
	}
	if incs := h.incidents("default", "default"); len(incs) != 1 || incs[0].StatusCode != 429 || !strings.Contains(incs[0].Message, "exceeded your current quota") {
		t.Fatalf("incidents %+v", incs)
	}

	down := newHarness(t, "", withProviders(providers.Config{Name: "down", Type: providers.TypeGemini, BaseURL: "http://127.0.0.1:1"}))
	for chunk, err := range genaiClient(t, down, "any-key", nil).Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("hi"), nil) {
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadGateway || apiErr.Status != "UNAVAILABLE" || !strings.Contains(apiErr.Message, "provider unreachable") {
			t.Fatalf("an unreachable provider: %v, %+v", err, chunk)
		}
		break
	}
}

// TestGeminiSDKGatewayKey: on a gateway, the SDK's API key (its
// x-goog-api-key header) is the gateway key: it decides the workspace and
// never reaches the provider, which gets its own key instead; a key in
// the query string alike.
func TestGeminiSDKGatewayKey(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"done"}]},"finishReason":"STOP","index":0}]}`)
	})
	h := newHarness(t, "", withProviders(providers.Config{Name: "gemini", Type: providers.TypeGemini, BaseURL: up.srv.URL, APIKeyEnv: "TEST_PROVIDER_KEY"}),
		withOptions(func(o *Options) { o.GatewayKeys = []tenant.Key{{SHA256: sha("team-key"), Workspace: "team-a"}} }))
	ctx := context.Background()
	res, err := genaiClient(t, h, "team-key", nil).Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), nil)
	if err != nil || res.Text() != "done" {
		t.Fatalf("%v %+v", err, res)
	}
	got := up.last(t)
	if got.Header.Get("X-Goog-Api-Key") != "sk-provider-secret" || got.RawPath != "/v1beta/models/gemini-2.5-flash:generateContent" {
		t.Fatalf("the provider got %s with key %q", got.RawPath, got.Header.Get("X-Goog-Api-Key"))
	}
	if _, err := genaiClient(t, h, "other-key", nil).Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("hi"), nil); !errors.As(err, new(genai.APIError)) ||
		err.(genai.APIError).Code != 401 || err.(genai.APIError).Status != "UNAUTHENTICATED" {
		t.Fatalf("another key: %v", err)
	}
	// The key in the query, as some clients send it.
	hres := h.do(http.MethodPost, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?key=team-key&alt=sse", []byte(`{"contents":[{"parts":[{"text":"hi"}]}]}`), nil)
	io.Copy(io.Discard, hres.Body)
	hres.Body.Close()
	h.inflight.Wait()
	if got := up.last(t); hres.StatusCode != 200 || got.Query != "alt=sse" || got.Header.Get("X-Goog-Api-Key") != "sk-provider-secret" {
		t.Fatalf("key in the query: %d, the provider got ?%s", hres.StatusCode, got.Query)
	}
}

// TestClientKeysStayWhenTheProviderHasOne: without gateway keys, a
// provider that holds its own key gets it alone: the client's
// x-goog-api-key header and "key" query parameter (its other credentials
// too) are dropped, on the rewritten routes and passed-through paths, for
// a Gemini provider and for an OpenAI one alike.
func TestClientKeysStayWhenTheProviderHasOne(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"done"}]},"finishReason":"STOP","index":0}]}`)
	})
	openai := providerAt("openai", up.srv.URL)
	openai.APIKeyEnv = "TEST_PROVIDER_KEY"
	h := newHarness(t, "", withProviders(providers.Config{Name: "gemini", Type: providers.TypeGemini, BaseURL: up.srv.URL, APIKeyEnv: "TEST_PROVIDER_KEY"}, openai))
	client := map[string]string{"X-Goog-Api-Key": "client-key", "Authorization": "Bearer client-token", "X-Api-Key": "client-x"}
	for _, tc := range []struct{ path, body, wantHeader, wantValue, wantQuery string }{
		{"/v1beta/models/gemini-2.5-flash:generateContent?key=client-query&alt=sse", `{"contents":[{"parts":[{"text":"hi"}]}]}`, "X-Goog-Api-Key", "sk-provider-secret", "alt=sse"},
		{"/v1beta/models/gemini-2.5-flash:countTokens?%6Bey=client-query", `{"contents":[]}`, "X-Goog-Api-Key", "sk-provider-secret", ""},
		{"/v1/chat/completions?key=client-query", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer sk-provider-secret", ""},
		{"/v1/embeddings?key=client-query&dims=3", `{"model":"m","input":"x"}`, "Authorization", "Bearer sk-provider-secret", "dims=3"},
	} {
		res := h.do(http.MethodPost, tc.path, []byte(tc.body), client)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		h.inflight.Wait()
		got := up.last(t)
		if v := got.Header.Values(tc.wantHeader); len(v) != 1 || v[0] != tc.wantValue || got.Query != tc.wantQuery {
			t.Errorf("%s: the provider got %s %q, query %q", tc.path, tc.wantHeader, v, got.Query)
		}
		for _, k := range []string{"X-Goog-Api-Key", "Authorization", "X-Api-Key"} {
			for _, v := range got.Header.Values(k) {
				if strings.Contains(v, "client") {
					t.Errorf("%s: the client's %s reached the provider: %q", tc.path, k, v)
				}
			}
		}
	}
}
