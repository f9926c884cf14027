package mock

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"google.golang.org/genai"
)

// TestMockGeminiGolden pins the Gemini API's answers byte for byte.
func TestMockGeminiGolden(t *testing.T) {
	const (
		gen    = "/v1beta/models/gemini-mock:generateContent"
		stream = "/v1beta/models/gemini-mock:streamGenerateContent?alt=sse"
		array  = "/v1beta/models/gemini-mock:streamGenerateContent"
		sys    = `"systemInstruction":{"parts":[{"text":"SYSTEM ONE"},{"text":"SYSTEM TWO"}]},`
	)
	user := func(text string) string {
		return `{` + sys + `"contents":[{"role":"user","parts":[{"text":` + jsonText(text) + `}]}]}`
	}
	tests := []struct {
		name, method, path, body string
	}{
		{"plain", "POST", gen, user("hello there")},
		{"v1", "POST", "/v1/models/gemini-mock:generateContent", `{"contents":[{"parts":[{"text":"no role"}]}]}`},
		{"echo", "POST", gen, user("[[mock:echo]] hi")},
		{"tool", "POST", gen, user(`[[mock:tool=run_shell_command args={"command":"ls"}]] list`)},
		{"tool_done", "POST", gen, `{"contents":[{"role":"user","parts":[{"text":"[[mock:tool=run]] go"}]},{"role":"model","parts":[{"functionCall":{"name":"run","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"run","response":{"output":"ok"}}}]}]}`},
		{"proto_names", "POST", gen, `{"system_instruction":{"parts":[{"text":"SYS"}]},"contents":[{"role":"user","parts":[{"text":"[[mock:echo]]"}]}],"tool_config":{"function_calling_config":{"mode":"NONE"}}}`},
		{"tools_forbidden", "POST", gen, `{"contents":[{"role":"user","parts":[{"text":"[[mock:tool=run]] go"}]}],"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`},
		{"stream", "POST", stream, user("hello world one two three four")},
		{"stream_tool", "POST", stream, user("[[mock:tool=ls]] x")},
		{"stream_truncate", "POST", stream, user("[[mock:truncate]] a b c d e f g")},
		{"stream_error", "POST", stream, user("[[mock:stream_error]] a b c d e f g")},
		{"array", "POST", array, user("hello world one two three four")},
		{"array_truncate", "POST", array, user("[[mock:truncate]] a b c d e f g")},
		{"array_error", "POST", array, user("[[mock:stream_error]] a b c d e f g")},
		{"status_200", "POST", gen, user("[[mock:status=200]] fine")},
		{"status_400", "POST", gen, user("[[mock:status=400]]")},
		{"status_401", "POST", gen, user("[[mock:status=401]]")},
		{"status_403", "POST", gen, user("[[mock:status=403]]")},
		{"status_404", "POST", gen, user("[[mock:status=404]]")},
		{"status_418", "POST", gen, user("[[mock:status=418]]")},
		{"status_429", "POST", gen, user("[[mock:status=429]]")},
		{"status_500", "POST", gen, user("[[mock:status=500]]")},
		{"status_502", "POST", gen, user("[[mock:status=502]]")},
		{"status_503", "POST", gen, user("[[mock:status=503]]")},
		{"status_504", "POST", gen, user("[[mock:status=504]]")},
		{"status_stream", "POST", stream, user("[[mock:status=503]]")},
		{"bad_json", "POST", gen, `{not json`},
		{"no_contents", "POST", gen, `{"contents":[]}`},
		{"count_tokens", "POST", "/v1beta/models/gemini-mock:countTokens", `{"contents":[{"parts":[{"text":"count me"}]}]}`},
		{"models", "GET", "/v1beta/models", ``},
		{"model", "GET", "/v1beta/models/gemini-mock", ``},
		{"unknown_method", "POST", "/v1beta/models/gemini-mock:embedContent", `{}`},
		{"unknown_path", "GET", "/v1beta/files", ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), tc.method, "http://provider"+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			res, err := fixedMock().RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "gemini/"+tc.name, dump(t, res))
		})
	}
}

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestMockGeminiErrorShape: every error of the Gemini API has Google's
// shape, its code the HTTP status.
func TestMockGeminiErrorShape(t *testing.T) {
	for _, s := range []int{400, 401, 403, 404, 429, 500, 503, 504} {
		res, body := post(t, "/v1beta/models/m:generateContent", `{"contents":[{"parts":[{"text":"[[mock:status=`+jsonInt(s)+`]]"}]}]}`)
		e := gjson.Get(body, "error")
		if res.StatusCode != s || e.Get("code").Int() != int64(s) || e.Get("status").Str == "" || e.Get("message").Str == "" {
			t.Errorf("%d: %d %s", s, res.StatusCode, body)
		}
	}
}

func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// geminiClient is the Gen AI SDK's client of a fixed mock.
func geminiClient(t *testing.T) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey: "mock", Backend: genai.BackendGeminiAPI,
		HTTPClient:  &http.Client{Transport: fixedMock()},
		HTTPOptions: genai.HTTPOptions{BaseURL: "http://provider/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMockGeminiSDK: the official Gen AI SDK reads the mock's answers,
// JSON and streamed, text and function calls, its usage and its errors.
func TestMockGeminiSDK(t *testing.T) {
	ctx := context.Background()
	c := geminiClient(t)
	cfg := &genai.GenerateContentConfig{SystemInstruction: genai.NewContentFromText("Be brief.", genai.RoleUser)}

	res, err := c.Models.GenerateContent(ctx, "gemini-mock", genai.Text("Say hello"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text() != "Mock answer to: Say hello" || res.Candidates[0].FinishReason != genai.FinishReasonStop || res.UsageMetadata.PromptTokenCount == 0 {
		t.Fatalf("answer %q, %+v", res.Text(), res.UsageMetadata)
	}

	var text strings.Builder
	var last *genai.GenerateContentResponse
	for chunk, err := range c.Models.GenerateContentStream(ctx, "gemini-mock", genai.Text("Say hello in a stream please"), cfg) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(chunk.Text())
		last = chunk
	}
	if text.String() != "Mock answer to: Say hello in a stream please" || last.Candidates[0].FinishReason != genai.FinishReasonStop || last.UsageMetadata.CandidatesTokenCount == 0 {
		t.Fatalf("stream %q, last %+v", text.String(), last)
	}

	res, err = c.Models.GenerateContent(ctx, "gemini-mock", genai.Text(`[[mock:tool=get_weather args={"city":"Paris"}]] weather?`), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if fc := res.FunctionCalls(); len(fc) != 1 || fc[0].Name != "get_weather" || fc[0].Args["city"] != "Paris" {
		t.Fatalf("function calls %+v", fc)
	}

	_, err = c.Models.GenerateContent(ctx, "gemini-mock", genai.Text("[[mock:status=429]]"), cfg)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 429 || apiErr.Status != "RESOURCE_EXHAUSTED" {
		t.Fatalf("a 429 reads as %v", err)
	}
}
