package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/tidwall/gjson"
)

// The Responses API and the Messages API, end to end: the real program,
// driven by the official SDKs, against the mock and against an upstream.

const failedRun = "Exit code 1\n  File \"hello.py\", line 1\n    print(1\n         ^\nSyntaxError: '(' was never closed"

// incidentCount is the number of incidents of a workspace, read through
// the memory API.
func incidentCount(t *testing.T, in *instance, ws string) int {
	t.Helper()
	res, err := http.Get(in.BaseURL + "/scar/v1/incidents?workspace=" + ws)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	n := 0
	gjson.GetBytes(b, "incidents").ForEach(func(_, v gjson.Result) bool { n++; return true })
	if !gjson.GetBytes(b, "incidents").Exists() {
		t.Fatalf("incidents: %s", b)
	}
	return n
}

func responsesClient(in *instance, ws string) openai.Client {
	return openai.NewClient(option.WithBaseURL(in.BaseURL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0),
		option.WithHeader("X-Scar-Workspace", ws))
}

func TestResponsesWithTheOpenAISDK(t *testing.T) {
	in := start(t, "--mock", "--data", t.TempDir())
	ctx := context.Background()
	c := responsesClient(in, "codex")
	t.Run("non-streaming", func(t *testing.T) {
		var hres *http.Response
		res, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model:        "mock-gpt",
			Instructions: openai.String("Be brief."),
			Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello")},
		}, option.WithResponseInto(&hres))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != "completed" || !strings.Contains(res.OutputText(), "Say hello") || res.Usage.TotalTokens == 0 {
			t.Fatalf("answer %+v", res)
		}
		if hres.Header.Get("X-Scar-Guard") != "0" || hres.Header.Get("X-Scar-Provider") != "mock" {
			t.Fatalf("headers %v", hres.Header)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		stream := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "mock-gpt",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello in a stream")},
		})
		var text strings.Builder
		var last string
		for stream.Next() {
			ev := stream.Current()
			last = ev.Type
			if ev.Type == "response.output_text.delta" {
				text.WriteString(ev.Delta.OfString)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if last != "response.completed" || !strings.Contains(text.String(), "Say hello in a stream") {
			t.Fatalf("last event %q, text %q", last, text.String())
		}
	})
	t.Run("failed function call output, twice", func(t *testing.T) {
		ws := "codex-loop"
		c := responsesClient(in, ws)
		user := responses.ResponseInputItemParamOfMessage(`[[mock:tool=run_shell args={"cmd":"python3 hello.py"}]] [[mock:echo]] Run hello.py`, responses.EasyInputMessageRoleUser)
		params := responses.ResponseNewParams{
			Model:        "mock-gpt",
			Instructions: openai.String("You are a coding agent."),
			Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
				Name: "run_shell", Parameters: map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}},
			}}},
		}
		input := responses.ResponseInputParam{user}
		// Turn 1: the model calls the tool.
		params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
		res, err := c.Responses.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Output) != 1 || res.Output[0].Type != "function_call" || res.Output[0].Name != "run_shell" || !strings.Contains(res.Output[0].Arguments, "hello.py") {
			t.Fatalf("turn 1 output %+v", res.Output)
		}
		var hres *http.Response
		for turn := 2; turn <= 3; turn++ {
			id := fmt.Sprintf("call_%d", turn)
			input = append(input,
				responses.ResponseInputItemParamOfFunctionCall(`{"cmd":"python3 hello.py"}`, id, "run_shell"),
				responses.ResponseInputItemParamOfFunctionCallOutput(id, failedRun))
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
			if res, err = c.Responses.New(ctx, params, option.WithResponseInto(&hres)); err != nil {
				t.Fatal(err)
			}
		}
		// The mock echoes the instructions it received, then the blocks
		// the proxy placed in the input: the guard follows them.
		if got := incidentCount(t, in, ws); got != 2 {
			t.Fatalf("%d incidents, want 2", got)
		}
		if !strings.HasPrefix(res.OutputText(), "You are a coding agent.\n\n"+guard.BlockStart) || hres.Header.Get("X-Scar-Guard") != "1" {
			t.Fatalf("instructions the model got: %q (guard header %s)", res.OutputText(), hres.Header.Get("X-Scar-Guard"))
		}
	})
	t.Run("provider error", func(t *testing.T) {
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{
			Model: "mock-gpt", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("[[mock:status=429]] hi")},
		})
		var apiErr *openai.Error
		if err == nil || !asOpenAIError(err, &apiErr) || apiErr.StatusCode != 429 {
			t.Fatalf("err = %v", err)
		}
	})
}

func asOpenAIError(err error, dst **openai.Error) bool {
	e, ok := err.(*openai.Error)
	*dst = e
	return ok
}

func anthropicClient(in *instance, ws string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(in.BaseURL), aoption.WithAPIKey("x"), aoption.WithMaxRetries(0),
		aoption.WithHeader("X-Scar-Workspace", ws)}, opts...)...)
}

func TestMessagesWithTheAnthropicSDK(t *testing.T) {
	in := start(t, "--mock", "--data", t.TempDir())
	ctx := context.Background()
	c := anthropicClient(in, "claude")
	t.Run("non-streaming", func(t *testing.T) {
		var hres *http.Response
		msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{
			Model: "mock-claude", MaxTokens: 100,
			System:   []anthropic.TextBlockParam{{Text: "Be brief."}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
		}, aoption.WithResponseInto(&hres))
		if err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) == 0 || !strings.Contains(msg.Content[0].Text, "Say hello") {
			t.Fatalf("answer %+v", msg)
		}
		if hres.Header.Get("X-Scar-Guard") != "0" {
			t.Fatalf("headers %v", hres.Header)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		stream := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: "mock-claude", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello in a stream"))},
		})
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) == 0 || !strings.Contains(msg.Content[0].Text, "Say hello in a stream") {
			t.Fatalf("accumulated %+v", msg)
		}
	})
	t.Run("tool_use, then a tool_result with is_error, twice", func(t *testing.T) {
		ws := "claude-loop"
		c := anthropicClient(in, ws)
		params := anthropic.MessageNewParams{
			Model: "mock-claude", MaxTokens: 100,
			System: []anthropic.TextBlockParam{{Text: "You are Claude Code.", CacheControl: anthropic.NewCacheControlEphemeralParam()}},
			Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
				Name: "Bash", InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}},
			}}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(`[[mock:tool=Bash args={"command":"python3 hello.py"}]] [[mock:echo]] Run hello.py`))},
		}
		msg, err := c.Messages.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) == 0 || msg.Content[0].Type != "tool_use" || msg.Content[0].Name != "Bash" ||
			!strings.Contains(string(msg.Content[0].Input), "hello.py") {
			t.Fatalf("turn 1 %+v", msg)
		}
		var hres *http.Response
		for turn := 2; turn <= 3; turn++ {
			id := fmt.Sprintf("toolu_%d", turn)
			params.Messages = append(params.Messages,
				anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(id, map[string]any{"command": "python3 hello.py"}, "Bash")),
				anthropic.NewUserMessage(anthropic.NewToolResultBlock(id, failedRun, true)))
			if msg, err = c.Messages.New(ctx, params, aoption.WithResponseInto(&hres)); err != nil {
				t.Fatal(err)
			}
		}
		if got := incidentCount(t, in, ws); got != 2 {
			t.Fatalf("%d incidents, want 2", got)
		}
		// The mock echoes what the proxy told the model: the system text,
		// unchanged, then the guard it placed in the newest turn.
		if len(msg.Content) == 0 || !strings.HasPrefix(msg.Content[0].Text, "You are Claude Code.\n\n"+guard.BlockStart) ||
			!strings.Contains(msg.Content[0].Text, "(Failed 2 times)") || hres.Header.Get("X-Scar-Guard") != "1" {
			t.Fatalf("system text the model got: %+v (guard header %s)", msg.Content, hres.Header.Get("X-Scar-Guard"))
		}
	})
	t.Run("errors in Anthropic's shape", func(t *testing.T) {
		_, err := c.Messages.New(ctx, anthropic.MessageNewParams{
			Model: "mock-claude", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("[[mock:status=529]] hi"))},
		})
		var apiErr *anthropic.Error
		if e, ok := err.(*anthropic.Error); ok {
			apiErr = e
		}
		if apiErr == nil || apiErr.StatusCode != 529 || !strings.Contains(apiErr.RawJSON(), "overloaded_error") {
			t.Fatalf("err = %v", err)
		}
		// An error of the proxy's own, on a Messages path, has the same shape.
		res, err := http.Post(in.BaseURL+"/v1/messages", "application/json", strings.NewReader(`{"messages":[`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 400 || gjson.GetBytes(b, "type").Str != "error" || gjson.GetBytes(b, "error.type").Str != "invalid_request_error" {
			t.Fatalf("%d %s", res.StatusCode, b)
		}
	})
	// Claude Code probes its base URL, which may be a tenant's root.
	t.Run("HEAD and GET /", func(t *testing.T) {
		for _, root := range []string{"/", "/w/team-a/api", "/w/team-a/api/"} {
			for _, m := range []string{http.MethodHead, http.MethodGet} {
				req, _ := http.NewRequest(m, in.BaseURL+root, nil)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || (m == http.MethodGet && !strings.Contains(string(b), "/v1/messages")) {
					t.Fatalf("%s %s: %d %s", m, root, res.StatusCode, b)
				}
			}
		}
	})
}

// agentSSE is an answer a real agent accepted, as captured (see
// proxy/messages/testdata/agents and proxy/responses/testdata/agents).
func agentSSE(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "proxy", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUpstreamsOfEachAPI: an anthropic provider and an openai provider in
// one configuration; each request goes to the one that serves its API,
// with the provider's key in the header that API uses and the client's
// own credentials dropped.
func TestUpstreamsOfEachAPI(t *testing.T) {
	claudeSSE := agentSSE(t, "messages/testdata/agents/claude-sse-turn3.txt")
	codexSSE := agentSSE(t, "responses/testdata/agents/codex-gpt-5.5-sse-turn3.txt")
	type seen struct {
		path, auth, key, version string
		body                     []byte
	}
	got := make(chan seen, 8)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.Header.Get("Anthropic-Version"), body}
		w.Header().Set("Content-Type", "text/event-stream")
		switch r.URL.Path {
		case "/anthropic/v1/messages":
			w.Write(claudeSSE)
		case "/openai/v1/responses":
			w.Write(codexSSE)
		default:
			w.WriteHeader(404)
		}
	}))
	t.Cleanup(up.Close)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
data_dir: %s
providers:
  - name: openai
    type: openai
    base_url: %s/openai/v1
    api_key_env: OPENAI_KEY
  - name: anthropic
    type: anthropic
    base_url: %s/anthropic/v1
    api_key_env: ANTHROPIC_KEY
`, t.TempDir(), up.URL, up.URL)), 0o644)
	env := map[string]string{"OPENAI_KEY": "sk-openai", "ANTHROPIC_KEY": "sk-ant-secret"}
	in, err := startServe(context.Background(), []string{"--config", cfg}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop()
	ctx := context.Background()

	ac := anthropicClient(in, "team", aoption.WithAPIKey("sk-ant-client"))
	stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "claude-opus-4-8", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Write hello.py"))},
	})
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil || msg.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("messages: %v, %+v", err, msg)
	}
	s := <-got
	if s.path != "/anthropic/v1/messages" || s.key != "sk-ant-secret" || s.auth != "" || s.version == "" {
		t.Fatalf("the anthropic upstream got %s with x-api-key %q, authorization %q, version %q", s.path, s.key, s.auth, s.version)
	}

	oc := responsesClient(in, "team")
	rs := oc.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "gpt-5.5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Write hello.py")},
	})
	last := ""
	for rs.Next() {
		last = rs.Current().Type
	}
	if err := rs.Err(); err != nil || last != "response.completed" {
		t.Fatalf("responses: %v, last event %q", err, last)
	}
	s = <-got
	if s.path != "/openai/v1/responses" || s.auth != "Bearer sk-openai" || s.key != "" {
		t.Fatalf("the openai upstream got %s with authorization %q, x-api-key %q", s.path, s.auth, s.key)
	}
	var body map[string]any
	if json.Unmarshal(s.body, &body) != nil || body["input"] != "Write hello.py" {
		t.Fatalf("body %s", s.body)
	}
}
