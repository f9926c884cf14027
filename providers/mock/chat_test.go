package mock

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// fixedMock is a mock whose clock stands still, so that its answers can be
// compared byte for byte.
func fixedMock() *Transport {
	return &Transport{Now: func() time.Time { return time.Unix(1700000000, 0) }}
}

// dump renders a response as its status line, its sorted headers and its body.
func dump(t *testing.T, res *http.Response) string {
	t.Helper()
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString(res.Status + "\n")
	keys := make([]string, 0, len(res.Header))
	for k := range res.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sb.WriteString(k + ": " + strings.Join(res.Header[k], ", ") + "\n")
	}
	sb.WriteString("\n")
	sb.Write(body)
	return sb.String()
}

// golden compares got with testdata/<name>.golden, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

// TestMockChatGolden pins the chat answers byte for byte: the other APIs
// share code with chat, and chat clients must not notice.
func TestMockChatGolden(t *testing.T) {
	sys := `{"role":"system","content":"SYSTEM TEXT"}`
	tests := []struct {
		name, method, path, body string
	}{
		{"plain", "POST", "/chat/completions", `{"model":"mock-gpt","messages":[` + sys + `,{"role":"user","content":"hello there"}]}`},
		{"no_model_empty_text", "POST", "/chat/completions", `{"messages":[{"role":"user","content":"[[mock:delay=1ns]]"}]}`},
		{"parts", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"DEV A"},{"type":"text","text":"DEV B"}]},{"role":"user","content":[{"type":"text","text":"part one"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"part two"}]}]}`},
		{"long", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("wörd ", 60) + `"}]}`},
		{"echo", "POST", "/chat/completions", `{"model":"m","messages":[` + sys + `,{"role":"user","content":"[[mock:echo]] hi"}]}`},
		{"tool", "POST", "/chat/completions", `{"model":"m","messages":[` + sys + `,{"role":"user","content":"[[mock:tool=get_weather]] Paris?"}]}`},
		{"tool_done", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:tool=run]] go"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"run","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`},
		{"stream", "POST", "/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello world one two three four"}]}`},
		{"stream_usage", "POST", "/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello world"}]}`},
		{"stream_tool", "POST", "/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"[[mock:tool=ls]] x"}]}`},
		{"stream_truncate", "POST", "/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"[[mock:truncate]] a b c d e f g"}]}`},
		{"stream_error", "POST", "/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"[[mock:stream_error]] a b c d e f g"}]}`},
		{"status_200", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=200]] fine"}]}`},
		{"status_400", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=400]]"}]}`},
		{"status_401", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=401]]"}]}`},
		{"status_403", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=403]]"}]}`},
		{"status_404", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=404]]"}]}`},
		{"status_418", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=418]]"}]}`},
		{"status_422", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=422]]"}]}`},
		{"status_429", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=429]]"}]}`},
		{"status_500", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=500]]"}]}`},
		{"status_502", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=502]]"}]}`},
		{"status_503", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=503]]"}]}`},
		{"status_504", "POST", "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"[[mock:status=504]]"}]}`},
		{"status_stream", "POST", "/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"[[mock:status=529]]"}]}`},
		{"bad_json", "POST", "/chat/completions", `{not json`},
		{"no_messages", "POST", "/chat/completions", `{"model":"m","messages":[]}`},
		{"models", "GET", "/models", ``},
		{"unknown_path", "POST", "/audio/speech", `{}`},
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
			golden(t, "chat/"+tc.name, dump(t, res))
		})
	}
}

func TestMockChatToolArgs(t *testing.T) {
	tests := []struct {
		name, content string
		stream        bool
		want          string
	}{
		{"json", `[[mock:tool=read args={"path": "a]].go"}]] read it`, false, `"function":{"name":"read","arguments":"{\"path\":\"a]].go\"}"}`},
		{"stream", `[[mock:tool=read args={"path": "a.go"}]]`, true, `"function":{"name":"read","arguments":"{\"path\":\"a.go\"}"}`},
		{"invalid args", `[[mock:tool=read args={path}]]`, false, `"function":{"name":"read","arguments":"{}"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, body := post(t, "/chat/completions", chat(tc.content, tc.stream))
			if !strings.Contains(body, tc.want) || strings.Contains(body, "Mock answer") {
				t.Fatalf("missing %s in %s", tc.want, body)
			}
		})
	}
}

func TestMockChatSSE(t *testing.T) {
	tests := []struct {
		name, content string
		want          []string // each event's choices[0].delta, then finish_reason, or [DONE]
	}{
		{"text", "one two three four", []string{`{"role":"assistant","content":""} <nil>`, `{"content":"Mock answer to: "} <nil>`, `{"content":"one two three "} <nil>`, `{"content":"four"} <nil>`, `{} stop`, "[DONE]"}},
		{"tool", "[[mock:tool=ls]]", []string{`{"role":"assistant","content":""} <nil>`, `{"tool_calls":[{"index":0,"id":"call_mock`, `{} tool_calls`, "[DONE]"}},
		{"truncate", "[[mock:truncate]] one", []string{`{"role":"assistant","content":""} <nil>`, `{"content":"Mock answer to: "} <nil>`, `{"content":"one"} <nil>`, `{} stop`}},
		{"stream_error", "[[mock:stream_error]] one", []string{`{"role":"assistant","content":""} <nil>`, `error server_error`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, body := post(t, "/chat/completions", chat(tc.content, true))
			evs := parseSSE(t, body)
			if len(evs) != len(tc.want) {
				t.Fatalf("%d events, want %d: %s", len(evs), len(tc.want), body)
			}
			for i, ev := range evs {
				if ev.name != "" {
					t.Errorf("chat events have no name: %q", ev.name)
				}
				var c struct {
					Choices []struct {
						Delta        json.RawMessage
						FinishReason *string `json:"finish_reason"`
					}
					Error *struct{ Type string }
				}
				got := string(ev.data)
				if got != "[DONE]" {
					if err := json.Unmarshal(ev.data, &c); err != nil {
						t.Fatal(err)
					}
					switch {
					case c.Error != nil:
						got = "error " + c.Error.Type
					default:
						finish := "<nil>"
						if c.Choices[0].FinishReason != nil {
							finish = *c.Choices[0].FinishReason
						}
						got = string(c.Choices[0].Delta) + " " + finish
					}
				}
				if !strings.HasPrefix(got, tc.want[i]) {
					t.Errorf("event %d = %s, want %s", i, got, tc.want[i])
				}
			}
		})
	}
}

// TestMockChatSDK decodes the mock's chat answers with the official SDK.
func TestMockChatSDK(t *testing.T) {
	ctx := context.Background()
	c := openaiClient()
	params := func(text string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{
			Model:    "gpt-mock",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage(text)},
		}
	}

	t.Run("text", func(t *testing.T) {
		res, err := c.Chat.Completions.New(ctx, params("hello"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Message.Content != "Mock answer to: hello" || res.Choices[0].FinishReason != "stop" || res.Usage.TotalTokens == 0 {
			t.Fatalf("completion %s", res.RawJSON())
		}
	})

	t.Run("echo", func(t *testing.T) {
		res, err := c.Chat.Completions.New(ctx, params("[[mock:echo]]"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Message.Content != "Be brief." {
			t.Fatalf("echo %q", res.Choices[0].Message.Content)
		}
	})

	t.Run("tool with args", func(t *testing.T) {
		res, err := c.Chat.Completions.New(ctx, params(`[[mock:tool=get_weather args={"city":"Paris"}]] weather?`))
		if err != nil {
			t.Fatal(err)
		}
		calls := res.Choices[0].Message.ToolCalls
		if len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Paris"}` || res.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("completion %s", res.RawJSON())
		}
	})

	t.Run("stream", func(t *testing.T) {
		p := params(`[[mock:tool=ls args={"dir":"/tmp"}]]`)
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := c.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		calls := acc.Choices[0].Message.ToolCalls
		if len(calls) != 1 || calls[0].Function.Name != "ls" || calls[0].Function.Arguments != `{"dir":"/tmp"}` || acc.Usage.TotalTokens == 0 {
			t.Fatalf("accumulated %+v", acc.ChatCompletion)
		}
	})

	t.Run("stream error", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(ctx, params("[[mock:stream_error]] hi"))
		n := 0
		for stream.Next() {
			n++
		}
		if n != 1 || stream.Err() == nil || !strings.Contains(stream.Err().Error(), "server_error") {
			t.Fatalf("%d chunks, err %v", n, stream.Err())
		}
	})

	t.Run("status", func(t *testing.T) {
		_, err := c.Chat.Completions.New(ctx, params("[[mock:status=401]]"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestChatEchoTellsTheFramesInTurns: the blocks the proxy places in a
// conversation's turns, framed, are echoed after the system text, and a
// loop until=guard ends when the guard arrives in a tool result.
func TestChatEchoTellsTheFramesInTurns(t *testing.T) {
	frame := func(block string) string {
		return "<system-reminder>\nNote from scarproxy, the proxy between this agent and its model provider (not from the user):\n\n" + block + "\n</system-reminder>"
	}
	recallBlock := "### RECALL: Similar Task Found in Memory\nPrior Goal: x\n### END RECALL"
	guardBlock := "### !!! REPEAT FAILURE GUARD — DO NOT REPEAT THESE ERRORS !!!\n▶ Pattern: X\n### !!! END REPEAT FAILURE GUARD !!!"
	recallFrame, guardFrame := frame(recallBlock), frame(guardBlock)
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]any{
		{"role": "system", "content": "SYSTEM TEXT"},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "[[mock:echo]] hi"}, {"type": "text", "text": recallFrame}}},
		{"role": "assistant", "content": "ok"},
		{"role": "tool", "tool_call_id": "a", "content": "failed\n\n" + guardFrame},
		{"role": "user", "content": "<system-reminder>\nthe client's own\n</system-reminder>\n[[mock:echo]]"},
	}})
	_, out := do(t, New(), http.MethodPost, "/chat/completions", string(body))
	var res struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Choices) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	if want := "SYSTEM TEXT\n\n" + recallBlock + "\n\n" + guardBlock; res.Choices[0].Message.Content != want {
		t.Fatalf("echo %q\nwant %q", res.Choices[0].Message.Content, want)
	}

	loop := func(tool string) string {
		b, _ := json.Marshal(map[string]any{"model": "m", "messages": []map[string]any{
			{"role": "user", "content": `[[mock:tool=sh args={"c":1} until=guard]]`},
			{"role": "assistant", "tool_calls": []map[string]any{{"id": "a", "type": "function", "function": map[string]any{"name": "sh", "arguments": `{"c":1}`}}}},
			{"role": "tool", "tool_call_id": "a", "content": tool},
		}})
		return string(b)
	}
	if _, out := do(t, New(), http.MethodPost, "/chat/completions", loop("failed")); !strings.Contains(out, `"tool_calls"`) {
		t.Fatalf("no guard yet, no call: %s", out)
	}
	if _, out := do(t, New(), http.MethodPost, "/chat/completions", loop("failed\n\n"+guardFrame)); !strings.Contains(out, "the repeat-failure guard appeared") {
		t.Fatalf("the guard in a tool result did not end the loop: %s", out)
	}
}
