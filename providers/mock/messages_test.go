package mock

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
)

// messagesBody is a Messages request with a system of two text blocks
// whose last message is a user message with text.
func messagesBody(text string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": "claude-mock", "max_tokens": 1024, "stream": stream,
		"system": []map[string]any{
			{"type": "text", "text": "SYSTEM ONE"},
			{"type": "text", "text": "SYSTEM TWO", "cache_control": map[string]any{"type": "ephemeral"}},
		},
		"messages": []map[string]any{
			{"role": "user", "content": "earlier turn [[mock:status=500]]"},
			{"role": "assistant", "content": "ok"},
			{"role": "user", "content": []map[string]any{{"type": "text", "text": text}}},
		},
	})
	return string(b)
}

func TestMockMessagesJSON(t *testing.T) {
	const toolTurn = `{"model":"claude-mock","max_tokens":10,"messages":[` +
		`{"role":"user","content":"[[mock:tool=run args={\"cmd\":\"make\"}]] build it"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"run","input":{"cmd":"make"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}`
	tests := []struct {
		name        string
		path        string // default /messages
		body        string
		status      int
		has, hasNot []string
		header      map[string]string
	}{
		{
			name: "text", body: messagesBody("hello there", false), status: 200,
			has:    []string{`{"id":"msg_mock`, `","type":"message","role":"assistant","model":"claude-mock","content":[{"type":"text","text":"Mock answer to: hello there"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":`},
			header: map[string]string{"Content-Type": "application/json"},
		},
		{
			name: "query string", path: "/messages?beta=true", body: messagesBody("with beta", false), status: 200,
			has: []string{`"text":"Mock answer to: with beta"`},
		},
		{
			name: "string content, no system", body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"plain"}]}`, status: 200,
			has: []string{`"text":"Mock answer to: plain"`},
		},
		{
			name: "tool with args", body: messagesBody(`[[mock:tool=get_weather args={"city": "Paris"}]] weather?`, false), status: 200,
			has: []string{`"content":[{"type":"tool_use","id":"toolu_mock`, `","name":"get_weather","input":{"city":"Paris"}}],"stop_reason":"tool_use"`},
		},
		{
			// Claude Code sends a system message after the user's (its
			// agents or skills): the user's message is still the last word.
			name: "a system message after the user's", body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"[[mock:tool=Bash args={\"command\":\"ls\"}]] go"},{"role":"system","content":"Available agents: ..."}]}`, status: 200,
			has: []string{`"name":"Bash","input":{"command":"ls"}}`},
		},
		{
			name: "tool without args", body: messagesBody("[[mock:tool=ls]]", false), status: 200,
			has: []string{`"name":"ls","input":{}}`},
		},
		{
			name: "after only tool results the mock is done", body: toolTurn + `]}]}`, status: 200,
			has: []string{`"text":"Mock answer to: build it"`, `"stop_reason":"end_turn"`}, hasNot: []string{"tool_use"},
		},
		{
			name: "tool results with user text call again", body: toolTurn + `,{"type":"text","text":"[[mock:tool=run]] again"}]}]}`, status: 200,
			has: []string{`"type":"tool_use"`, `"name":"run","input":{}`},
		},
		{
			name: "echo joins text blocks with a blank line", body: messagesBody("[[mock:echo]]", false), status: 200,
			has: []string{`"content":[{"type":"text","text":"SYSTEM ONE\n\nSYSTEM TWO"}]`},
		},
		{
			name: "echo string system", body: `{"model":"m","max_tokens":5,"system":"THE SYSTEM\n","messages":[{"role":"user","content":"[[mock:echo]]"}]}`, status: 200,
			has: []string{`"text":"THE SYSTEM\n"`},
		},
		{
			name: "echo without system", body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"[[mock:echo]]"}]}`, status: 200,
			has: []string{`"content":[{"type":"text","text":""}]`},
		},
		{"status 400", "", messagesBody("[[mock:status=400]]", false), 400, []string{`{"type":"error","error":{"type":"invalid_request_error","message":`}, nil, nil},
		{"status 401", "", messagesBody("[[mock:status=401]]", false), 401, []string{`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}`}, nil, nil},
		{"status 403", "", messagesBody("[[mock:status=403]]", false), 403, []string{`"type":"permission_error"`}, nil, nil},
		{"status 404", "", messagesBody("[[mock:status=404]]", false), 404, []string{`"type":"not_found_error","message":"model: claude-mock"`}, nil, nil},
		{"status 413", "", messagesBody("[[mock:status=413]]", false), 413, []string{`"type":"request_too_large"`}, nil, nil},
		{"status 418", "", messagesBody("[[mock:status=418]]", false), 418, []string{`"type":"invalid_request_error"`}, nil, nil},
		{"status 429", "", messagesBody("[[mock:status=429]]", false), 429, []string{`"type":"rate_limit_error"`}, nil, map[string]string{"Retry-After": "20"}},
		{"status 500", "", messagesBody("[[mock:status=500]]", false), 500, []string{`"type":"api_error"`}, nil, nil},
		{"status 503", "", messagesBody("[[mock:status=503]]", false), 503, []string{`"type":"api_error"`}, nil, nil},
		{"status 529", "", messagesBody("[[mock:status=529]]", false), 529, []string{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}`}, nil, nil},
		{"status while streaming", "", messagesBody("[[mock:status=529]]", true), 529, []string{`"overloaded_error"`}, nil, map[string]string{"Content-Type": "application/json"}},
		{"bad json", "", `{"messages":`, 400, []string{`"type":"invalid_request_error"`}, nil, nil},
		{"no messages", "", `{"model":"m","max_tokens":5}`, 400, []string{`"message":"messages: Field required"`}, nil, nil},
		{"empty messages", "", `{"model":"m","max_tokens":5,"messages":[]}`, 400, []string{`"type":"invalid_request_error"`}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = "/messages"
			}
			res, body := post(t, path, tc.body)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			if !json.Valid([]byte(body)) {
				t.Fatalf("not JSON: %s", body)
			}
			if id := res.Header.Get("Request-Id"); !strings.HasPrefix(id, "req_") {
				t.Errorf("request-id %q", id)
			}
			for _, s := range tc.has {
				if !strings.Contains(body, s) {
					t.Errorf("missing %s in %s", s, body)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(body, s) {
					t.Errorf("unexpected %s in %s", s, body)
				}
			}
			for k, v := range tc.header {
				if res.Header.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, res.Header.Get(k), v)
				}
			}
		})
	}
}

func TestMockMessagesSSE(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		events []string
		check  func(t *testing.T, events []sseEvent)
	}{
		{
			name: "text", text: "one two three four five six",
			events: []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
			check: func(t *testing.T, evs []sseEvent) {
				if got := string(evs[1].data); got != `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` {
					t.Errorf("content_block_start %s", got)
				}
				var text strings.Builder
				for _, ev := range evs {
					if ev.name == "content_block_delta" {
						var d struct {
							Delta struct{ Type, Text string }
						}
						json.Unmarshal(ev.data, &d)
						if d.Delta.Type != "text_delta" {
							t.Errorf("delta %s", ev.data)
						}
						text.WriteString(d.Delta.Text)
					}
				}
				if text.String() != "Mock answer to: one two three four five six" {
					t.Errorf("deltas add up to %q", text.String())
				}
				if got := string(evs[7].data); !strings.HasPrefix(got, `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":`) {
					t.Errorf("message_delta %s", got)
				}
				if got := string(evs[0].data); !strings.Contains(got, `"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`) {
					t.Errorf("message_start %s", got)
				}
			},
		},
		{
			name: "tool with args", text: `[[mock:tool=read_file args={"path": "main.go"}]]`,
			events: []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
			check: func(t *testing.T, evs []sseEvent) {
				if got := string(evs[1].data); !strings.HasPrefix(got, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_mock`) || !strings.HasSuffix(got, `","name":"read_file","input":{}}}`) {
					t.Errorf("content_block_start %s", got)
				}
				var args strings.Builder
				for _, ev := range evs {
					if ev.name == "content_block_delta" {
						var d struct {
							Delta struct {
								Type        string
								PartialJSON string `json:"partial_json"`
							}
						}
						json.Unmarshal(ev.data, &d)
						if d.Delta.Type != "input_json_delta" {
							t.Errorf("delta %s", ev.data)
						}
						args.WriteString(d.Delta.PartialJSON)
					}
				}
				if args.String() != `{"path":"main.go"}` {
					t.Errorf("partial_json adds up to %q", args.String())
				}
				if !strings.Contains(string(evs[7].data), `"stop_reason":"tool_use"`) {
					t.Errorf("message_delta %s", evs[7].data)
				}
			},
		},
		{
			name: "stream_error", text: "[[mock:stream_error]] a b c d e f", events: []string{"message_start", "error"},
			check: func(t *testing.T, evs []sseEvent) {
				if got, want := string(evs[1].data), `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`; got != want {
					t.Errorf("error event %s, want %s", got, want)
				}
			},
		},
		{
			name: "truncate", text: "[[mock:truncate]] one",
			events: []string{"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, "/messages?beta=true", messagesBody(tc.text, true))
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" || !strings.HasPrefix(res.Header.Get("Request-Id"), "req_") {
				t.Fatalf("%d %v", res.StatusCode, res.Header)
			}
			evs := parseSSE(t, body)
			if got := eventNames(t, evs); !reflect.DeepEqual(got, tc.events) {
				t.Fatalf("events\n%q\nwant\n%q", got, tc.events)
			}
			if tc.check != nil {
				tc.check(t, evs)
			}
		})
	}
}

func anthropicClient() anthropic.Client {
	return anthropic.NewClient(anthropicoption.WithBaseURL("http://mock/"), anthropicoption.WithAPIKey("sk-ant-test"),
		anthropicoption.WithMaxRetries(0), anthropicoption.WithHTTPClient(mockHTTPClient()))
}

// TestMockMessagesSDK decodes the mock's answers with the official SDK.
func TestMockMessagesSDK(t *testing.T) {
	ctx := context.Background()
	c := anthropicClient()
	params := func(text string) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{
			Model:     "claude-mock",
			MaxTokens: 1024,
			System:    []anthropic.TextBlockParam{{Text: "Be brief."}, {Text: "Use tools."}},
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
		}
	}

	t.Run("text", func(t *testing.T) {
		msg, err := c.Messages.New(ctx, params("hello"))
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != "Mock answer to: hello" {
			t.Fatalf("message %s", msg.RawJSON())
		}
		if msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 || !strings.HasPrefix(msg.ID, "msg_") || msg.Model != "claude-mock" {
			t.Fatalf("message %s", msg.RawJSON())
		}
	})

	t.Run("echo", func(t *testing.T) {
		msg, err := c.Messages.New(ctx, params("[[mock:echo]]"))
		if err != nil {
			t.Fatal(err)
		}
		if msg.Content[0].Text != "Be brief.\n\nUse tools." {
			t.Fatalf("echo %q", msg.Content[0].Text)
		}
	})

	t.Run("tool call then done", func(t *testing.T) {
		first := params(`[[mock:tool=get_weather args={"city":"Paris","days":[1,2]}]] weather?`)
		msg, err := c.Messages.New(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.StopReason != anthropic.StopReasonToolUse {
			t.Fatalf("message %s", msg.RawJSON())
		}
		use := msg.Content[0].AsToolUse()
		if use.Name != "get_weather" || string(use.Input) != `{"city":"Paris","days":[1,2]}` || !strings.HasPrefix(use.ID, "toolu_") {
			t.Fatalf("tool_use %s", msg.Content[0].RawJSON())
		}
		next := first
		next.Messages = append(next.Messages, msg.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "21 degrees", false)))
		msg, err = c.Messages.New(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		if msg.StopReason != anthropic.StopReasonEndTurn || msg.Content[0].Text != "Mock answer to: weather?" {
			t.Fatalf("after the tool result: %s", msg.RawJSON())
		}
	})

	accumulate := func(t *testing.T, text string) (anthropic.Message, []string, error) {
		t.Helper()
		stream := c.Messages.NewStreaming(ctx, params(text))
		var msg anthropic.Message
		var types []string
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			if err := msg.Accumulate(ev); err != nil {
				t.Fatal(err)
			}
		}
		return msg, types, stream.Err()
	}

	t.Run("stream", func(t *testing.T) {
		msg, types, err := accumulate(t, "one two three four five")
		if err != nil {
			t.Fatal(err)
		}
		if msg.Content[0].Text != "Mock answer to: one two three four five" || msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens == 0 {
			t.Fatalf("accumulated %s", msg.RawJSON())
		}
		if types[0] != "message_start" || types[len(types)-1] != "message_stop" {
			t.Fatalf("events %q", types)
		}
	})

	t.Run("stream tool", func(t *testing.T) {
		msg, _, err := accumulate(t, `[[mock:tool=ls args={"dir":"/tmp","all":true}]]`)
		if err != nil {
			t.Fatal(err)
		}
		use := msg.Content[0].AsToolUse()
		if msg.StopReason != anthropic.StopReasonToolUse || use.Name != "ls" || string(use.Input) != `{"dir":"/tmp","all":true}` {
			t.Fatalf("accumulated %s", msg.RawJSON())
		}
	})

	t.Run("stream error", func(t *testing.T) {
		_, types, err := accumulate(t, "[[mock:stream_error]] hi")
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || string(apiErr.Type()) != "overloaded_error" || !strings.HasPrefix(apiErr.RequestID, "req_") {
			t.Fatalf("err = %v", err)
		}
		if !reflect.DeepEqual(types, []string{"message_start"}) {
			t.Fatalf("events %q", types)
		}
	})

	t.Run("truncate", func(t *testing.T) {
		msg, types, err := accumulate(t, "[[mock:truncate]] hi")
		if err != nil || types[len(types)-1] != "message_delta" || msg.StopReason != anthropic.StopReasonEndTurn {
			t.Fatalf("events %q, err %v", types, err)
		}
	})

	statuses := []struct {
		status int
		typ    string
	}{
		{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"}, {404, "not_found_error"},
		{413, "request_too_large"}, {429, "rate_limit_error"}, {500, "api_error"}, {529, "overloaded_error"},
	}
	for _, s := range statuses {
		t.Run("status "+s.typ, func(t *testing.T) {
			_, err := c.Messages.New(ctx, params("[[mock:status="+strconv.Itoa(s.status)+"]]"))
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != s.status || string(apiErr.Type()) != s.typ || !strings.HasPrefix(apiErr.RequestID, "req_") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}
