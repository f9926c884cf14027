package mock

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
)

// responsesBody is a Responses request whose last input item is a user
// message with text.
func responsesBody(text string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": "gpt-mock", "stream": stream, "instructions": "SYSTEM TEXT\nsecond line",
		"input": []map[string]any{
			{"role": "developer", "content": "not the user [[mock:status=500]]"},
			{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": text}}},
		},
	})
	return string(b)
}

func TestMockResponsesJSON(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		status      int
		has, hasNot []string
		header      map[string]string
	}{
		{
			name: "text", body: responsesBody("hello there", false), status: 200,
			has: []string{
				`{"id":"resp_mock`, `"object":"response","created_at":1700000000,"status":"completed",`,
				`"instructions":"SYSTEM TEXT\nsecond line"`, `"model":"gpt-mock"`,
				`"output":[{"type":"message","id":"msg_mock`, `"status":"completed","role":"assistant","content":[{"type":"output_text","text":"Mock answer to: hello there","annotations":[]}]}]`,
				`"usage":{"input_tokens":`, `"total_tokens":`,
			},
			header: map[string]string{"Content-Type": "application/json"},
		},
		{
			name: "input string", body: `{"model":"m","input":"[[mock:delay=1ns]] as a string"}`, status: 200,
			has: []string{`"text":"Mock answer to: as a string"`, `"instructions":null`},
		},
		{
			name: "no input", body: `{"model":"m","previous_response_id":"resp_1"}`, status: 200,
			has: []string{`"text":"Mock answer."`, `"previous_response_id":"resp_1"`},
		},
		{
			name: "tool with args", body: responsesBody(`[[mock:tool=get_weather args={"city": "Paris"}]] weather?`, false), status: 200,
			has:    []string{`"output":[{"type":"function_call","id":"fc_mock`, `"call_id":"call_mock`, `"name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"}]`},
			hasNot: []string{`"type":"message"`},
		},
		{
			name: "tool without args", body: responsesBody(`[[mock:tool=ls]]`, false), status: 200,
			has: []string{`"name":"ls","arguments":"{}"`},
		},
		{
			name:   "after the tool's output the mock is done",
			body:   `{"model":"m","input":[{"role":"user","content":"[[mock:tool=run]] go"},{"type":"function_call","call_id":"call_1","name":"run","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"ok"}]}`,
			status: 200, has: []string{`"text":"Mock answer to: go"`}, hasNot: []string{`"function_call"`},
		},
		{
			name: "echo", body: responsesBody("[[mock:echo]] hi", false), status: 200,
			has: []string{`"content":[{"type":"output_text","text":"SYSTEM TEXT\nsecond line","annotations":[]}]`},
		},
		{
			name: "echo without instructions", body: `{"input":"[[mock:echo]]"}`, status: 200,
			has: []string{`"content":[{"type":"output_text","text":"","annotations":[]}]`},
		},
		{
			name: "parameters echoed", body: `{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":{}}],"tool_choice":"required","temperature":0.2,"store":false,"metadata":{"k":"v"},"max_output_tokens":99}`, status: 200,
			has: []string{`"max_output_tokens":99`, `"store":false,"temperature":0.2`, `"tool_choice":"required","tools":[{"type":"function","name":"f","parameters":{}}]`, `"metadata":{"k":"v"}`},
		},
		{"status 400", responsesBody("[[mock:status=400]]", false), 400, []string{`"type":"invalid_request_error"`}, nil, nil},
		{"status 401", responsesBody("[[mock:status=401]]", false), 401, []string{`"code":"invalid_api_key"`}, nil, nil},
		{"status 403", responsesBody("[[mock:status=403]]", false), 403, []string{`"code":"model_not_allowed"`}, nil, nil},
		{"status 404", responsesBody("[[mock:status=404]]", false), 404, []string{"The model `gpt-mock` does not exist", `"code":"model_not_found"`}, nil, nil},
		{"status 429", responsesBody("[[mock:status=429]]", false), 429, []string{`"code":"rate_limit_exceeded"`}, nil, map[string]string{"Retry-After": "20"}},
		{"status 500", responsesBody("[[mock:status=500]]", false), 500, []string{`"type":"server_error"`}, nil, nil},
		{"status 503", responsesBody("[[mock:status=503]]", false), 503, []string{`overloaded`, `"type":"server_error"`}, nil, nil},
		{"status 504", responsesBody("[[mock:status=504]]", false), 504, []string{`"type":"timeout"`}, nil, nil},
		{"status while streaming", responsesBody("[[mock:status=429]]", true), 429, []string{`"code":"rate_limit_exceeded"`}, nil, map[string]string{"Content-Type": "application/json"}},
		{"status 2xx ignored", responsesBody("[[mock:status=201]] fine", false), 200, []string{`"text":"Mock answer to: fine"`}, nil, nil},
		{"bad json", `{"input":`, 400, []string{`"type":"invalid_request_error"`}, nil, nil},
		{"bad input", `{"input":42}`, 400, []string{`"code":"invalid_type"`}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, "/responses", tc.body)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			if !json.Valid([]byte(body)) {
				t.Fatalf("not JSON: %s", body)
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

func TestMockResponsesSSE(t *testing.T) {
	textEvents := []string{
		"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed",
	}
	toolEvents := []string{
		"response.created", "response.in_progress", "response.output_item.added",
		"response.function_call_arguments.delta", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done", "response.completed",
	}
	tests := []struct {
		name   string
		text   string
		events []string
		check  func(t *testing.T, events []sseEvent)
	}{
		{
			name: "text", text: "one two three four five six", events: textEvents,
			check: func(t *testing.T, evs []sseEvent) {
				var deltas strings.Builder
				for _, ev := range evs {
					if ev.name == "response.output_text.delta" {
						var d struct{ Delta string }
						json.Unmarshal(ev.data, &d)
						deltas.WriteString(d.Delta)
					}
				}
				if deltas.String() != "Mock answer to: one two three four five six" {
					t.Errorf("deltas add up to %q", deltas.String())
				}
				last := string(evs[len(evs)-1].data)
				if !strings.Contains(last, `"status":"completed"`) || !strings.Contains(last, `"usage":{"input_tokens"`) {
					t.Errorf("response.completed: %s", last)
				}
				if first := string(evs[0].data); !strings.Contains(first, `"status":"in_progress"`) || !strings.Contains(first, `"output":[]`) || !strings.Contains(first, `"usage":null`) {
					t.Errorf("response.created: %s", first)
				}
			},
		},
		{
			name: "tool with args", text: `[[mock:tool=read_file args={"path": "main.go"}]]`, events: toolEvents,
			check: func(t *testing.T, evs []sseEvent) {
				var args strings.Builder
				for _, ev := range evs {
					if ev.name == "response.function_call_arguments.delta" {
						var d struct{ Delta string }
						json.Unmarshal(ev.data, &d)
						args.WriteString(d.Delta)
					}
				}
				if args.String() != `{"path":"main.go"}` {
					t.Errorf("argument deltas add up to %q", args.String())
				}
				if added := string(evs[2].data); !strings.Contains(added, `"item":{"type":"function_call","id":"fc_mock`) || !strings.Contains(added, `"name":"read_file","arguments":"","status":"in_progress"}`) {
					t.Errorf("output_item.added: %s", added)
				}
			},
		},
		{
			name: "stream_error", text: "[[mock:stream_error]] a b c d e f", events: []string{"response.created", "error"},
			check: func(t *testing.T, evs []sseEvent) {
				want := `{"type":"error","code":"server_error","message":"The server had an error while processing your request. Sorry about that!","param":null,"sequence_number":1}`
				if string(evs[1].data) != want {
					t.Errorf("error event %s, want %s", evs[1].data, want)
				}
			},
		},
		{
			name: "truncate", text: "[[mock:truncate]] one two three four five six", events: textEvents[:len(textEvents)-1],
		},
		{
			name: "truncate tool", text: "[[mock:truncate]] [[mock:tool=ls]]", events: []string{
				"response.created", "response.in_progress", "response.output_item.added",
				"response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := post(t, "/responses", responsesBody(tc.text, true))
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
				t.Fatalf("%d %q", res.StatusCode, res.Header.Get("Content-Type"))
			}
			if strings.Contains(body, "[DONE]") {
				t.Errorf("a Responses stream has no [DONE]: %s", body)
			}
			evs := parseSSE(t, body)
			if got := eventNames(t, evs); !reflect.DeepEqual(got, tc.events) {
				t.Fatalf("events\n%q\nwant\n%q", got, tc.events)
			}
			for i, ev := range evs {
				var s struct {
					SequenceNumber *int `json:"sequence_number"`
				}
				json.Unmarshal(ev.data, &s)
				if s.SequenceNumber == nil || *s.SequenceNumber != i {
					t.Errorf("event %d %s: sequence_number %v", i, ev.name, s.SequenceNumber)
				}
			}
			if tc.check != nil {
				tc.check(t, evs)
			}
		})
	}
}

func openaiClient() openai.Client {
	return openai.NewClient(option.WithBaseURL("http://mock/v1/"), option.WithAPIKey("sk-test"),
		option.WithMaxRetries(0), option.WithHTTPClient(mockHTTPClient()))
}

// TestMockResponsesSDK decodes the mock's answers with the official SDK.
func TestMockResponsesSDK(t *testing.T) {
	ctx := context.Background()
	c := openaiClient()
	params := func(text string) responses.ResponseNewParams {
		return responses.ResponseNewParams{
			Model:        "gpt-mock",
			Instructions: openai.String("Be brief."),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser),
			}},
		}
	}

	t.Run("text", func(t *testing.T) {
		res, err := c.Responses.New(ctx, params("hello"))
		if err != nil {
			t.Fatal(err)
		}
		if res.OutputText() != "Mock answer to: hello" || res.Status != responses.ResponseStatusCompleted || res.Usage.TotalTokens != res.Usage.InputTokens+res.Usage.OutputTokens || res.Usage.OutputTokens == 0 {
			t.Fatalf("response %s", res.RawJSON())
		}
		if !strings.HasPrefix(res.ID, "resp_") || res.Model != "gpt-mock" || res.Instructions.OfString != "Be brief." {
			t.Fatalf("response %s", res.RawJSON())
		}
	})

	t.Run("echo", func(t *testing.T) {
		res, err := c.Responses.New(ctx, params("[[mock:echo]]"))
		if err != nil {
			t.Fatal(err)
		}
		if res.OutputText() != "Be brief." {
			t.Fatalf("echo %q", res.OutputText())
		}
	})

	t.Run("tool call then done", func(t *testing.T) {
		first := params(`[[mock:tool=get_weather args={"city":"Paris","days":[1,2]}]] weather?`)
		res, err := c.Responses.New(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Output) != 1 || res.Output[0].Type != "function_call" {
			t.Fatalf("output %s", res.RawJSON())
		}
		call := res.Output[0].AsFunctionCall()
		if call.Name != "get_weather" || call.Arguments != `{"city":"Paris","days":[1,2]}` || !strings.HasPrefix(call.CallID, "call_") || !strings.HasPrefix(call.ID, "fc_") || call.Status != "completed" {
			t.Fatalf("call %+v", call)
		}
		next := first
		next.Input.OfInputItemList = append(next.Input.OfInputItemList,
			responses.ResponseInputItemParamOfFunctionCall(call.Arguments, call.CallID, call.Name),
			responses.ResponseInputItemParamOfFunctionCallOutput(call.CallID, `{"temp":21}`),
		)
		res, err = c.Responses.New(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		if res.OutputText() != "Mock answer to: weather?" {
			t.Fatalf("after the tool output: %s", res.RawJSON())
		}
	})

	t.Run("stream", func(t *testing.T) {
		stream := c.Responses.NewStreaming(ctx, params("one two three four five"))
		var types []string
		var text strings.Builder
		var done responses.Response
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			switch ev.Type {
			case "response.output_text.delta":
				text.WriteString(ev.AsResponseOutputTextDelta().Delta)
			case "response.completed":
				done = ev.AsResponseCompleted().Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != "Mock answer to: one two three four five" || done.OutputText() != text.String() || done.Usage.TotalTokens == 0 {
			t.Fatalf("deltas %q, completed %s", text.String(), done.RawJSON())
		}
		if types[0] != "response.created" || types[len(types)-1] != "response.completed" {
			t.Fatalf("events %q", types)
		}
	})

	t.Run("stream tool", func(t *testing.T) {
		stream := c.Responses.NewStreaming(ctx, params(`[[mock:tool=ls args={"dir":"/tmp"}]]`))
		var args strings.Builder
		var item responses.ResponseOutputItemUnion
		for stream.Next() {
			ev := stream.Current()
			switch ev.Type {
			case "response.function_call_arguments.delta":
				args.WriteString(ev.AsResponseFunctionCallArgumentsDelta().Delta)
			case "response.output_item.done":
				item = ev.AsResponseOutputItemDone().Item
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if args.String() != `{"dir":"/tmp"}` || item.AsFunctionCall().Arguments != args.String() || item.AsFunctionCall().Name != "ls" {
			t.Fatalf("args %q, item %s", args.String(), item.RawJSON())
		}
	})

	t.Run("stream error", func(t *testing.T) {
		stream := c.Responses.NewStreaming(ctx, params("[[mock:stream_error]] hi"))
		var types []string
		var failure responses.ResponseErrorEvent
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			if ev.Type == "error" {
				failure = ev.AsError()
			}
		}
		if !reflect.DeepEqual(types, []string{"response.created", "error"}) || failure.Code != "server_error" || failure.Message == "" {
			t.Fatalf("events %q, error %+v, err %v", types, failure, stream.Err())
		}
	})

	t.Run("status", func(t *testing.T) {
		_, err := c.Responses.New(ctx, params("[[mock:status=429]]"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests || apiErr.Code != "rate_limit_exceeded" {
			t.Fatalf("err = %v", err)
		}
	})
}
