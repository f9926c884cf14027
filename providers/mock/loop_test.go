package mock

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// loopCall is a tool call an agent made and whose result it sends back.
type loopCall struct {
	name, args string // args: a function's JSON arguments, a custom tool's input
	custom     bool
}

// convo is a conversation of an agent running a scripted mock: the user
// text with its directive, then the calls made so far, each followed by
// its (failing) result.
type convo struct {
	system     string
	user       string
	calls      []loopCall
	toolsNone  bool     // the request forbids tools
	customs    []string // Responses: tools declared as custom (freeform)
	additional bool     // Responses: the custom tools come in a Codex additional_tools item, in a namespace
	stream     bool
	// placed is text the proxy placed in the newest turn, in each API's
	// idiom: chat, a trailing user message; responses, a developer item
	// at the end of input; messages, a text block at the end of the last
	// user message; gemini, a text part at the end of the last user
	// content.
	placed string
}

func (c convo) body(t *testing.T, api string) string {
	t.Helper()
	req := map[string]any{"model": "m", "stream": c.stream}
	var msgs []any
	switch api {
	case "chat":
		if c.system != "" {
			msgs = append(msgs, map[string]any{"role": "system", "content": c.system})
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": c.user})
		for i, call := range c.calls {
			id := fmt.Sprint("call_", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
					"id": id, "type": "function", "function": map[string]any{"name": call.name, "arguments": call.args}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": "Error: exit status 1"})
		}
		if c.placed != "" {
			msgs = append(msgs, map[string]any{"role": "user", "content": c.placed})
		}
		req["messages"] = msgs
		req["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "run", "parameters": map[string]any{}}}}
		if c.toolsNone {
			req["tool_choice"] = "none"
		}
	case "responses":
		if c.system != "" {
			req["instructions"] = c.system
		}
		tools := []any{map[string]any{"type": "function", "name": "run", "parameters": map[string]any{}}}
		var customs []any
		for _, name := range c.customs {
			customs = append(customs, map[string]any{"type": "custom", "name": name, "description": "freeform"})
		}
		if c.additional {
			msgs = append(msgs, map[string]any{"type": "additional_tools", "role": "developer", "tools": []any{
				map[string]any{"type": "namespace", "name": "functions", "tools": customs}}})
		} else {
			tools = append(tools, customs...)
		}
		req["tools"] = tools
		msgs = append(msgs, map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": c.user}}})
		for i, call := range c.calls {
			id := fmt.Sprint("call_", i)
			if call.custom {
				msgs = append(msgs,
					map[string]any{"type": "custom_tool_call", "call_id": id, "name": call.name, "input": call.args},
					map[string]any{"type": "custom_tool_call_output", "call_id": id, "output": "Error: exit status 1"})
			} else {
				msgs = append(msgs,
					map[string]any{"type": "function_call", "call_id": id, "name": call.name, "arguments": call.args},
					map[string]any{"type": "function_call_output", "call_id": id, "output": "Error: exit status 1"})
			}
		}
		if c.placed != "" {
			msgs = append(msgs, map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": c.placed}}})
		}
		req["input"] = msgs
		if c.toolsNone {
			req["tool_choice"] = "none"
		}
	case "messages":
		req["max_tokens"] = 1024
		if c.system != "" {
			req["system"] = []any{map[string]any{"type": "text", "text": c.system}}
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": c.user})
		for i, call := range c.calls {
			id := fmt.Sprint("toolu_", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": call.name, "input": json.RawMessage(call.args)}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "Error: exit status 1", "is_error": true}}})
		}
		if c.placed != "" {
			last := msgs[len(msgs)-1].(map[string]any)
			content, ok := last["content"].([]any)
			if !ok {
				content = []any{map[string]any{"type": "text", "text": last["content"]}}
			}
			last["content"] = append(content, map[string]any{"type": "text", "text": c.placed})
		}
		req["messages"] = msgs
		req["tools"] = []any{map[string]any{"name": "run", "input_schema": map[string]any{"type": "object"}}}
		if c.toolsNone {
			req["tool_choice"] = map[string]any{"type": "none"}
		}
	case "gemini":
		if c.system != "" {
			req["systemInstruction"] = map[string]any{"parts": []any{map[string]any{"text": c.system}}}
		}
		msgs = append(msgs, map[string]any{"role": "user", "parts": []any{map[string]any{"text": c.user}}})
		for _, call := range c.calls {
			msgs = append(msgs,
				map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": call.name, "args": json.RawMessage(call.args)}}}},
				map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": call.name, "response": map[string]any{"error": "Error: exit status 1"}}}}})
		}
		if c.placed != "" {
			last := msgs[len(msgs)-1].(map[string]any)
			last["parts"] = append(last["parts"].([]any), map[string]any{"text": c.placed})
		}
		req["contents"] = msgs
		req["tools"] = []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "run", "parameters": map[string]any{"type": "object"}}}}}
		if c.toolsNone {
			req["toolConfig"] = map[string]any{"functionCallingConfig": map[string]any{"mode": "NONE"}}
		}
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mockAnswer is what the mock answered, whatever the API: a call or words.
type mockAnswer struct {
	Tool, Args string // the call's tool and arguments (a custom tool's input)
	Custom     bool
	Text       string
}

func (a mockAnswer) String() string {
	if a.Tool != "" {
		return fmt.Sprintf("call %s(%s) custom=%v", a.Tool, a.Args, a.Custom)
	}
	return fmt.Sprintf("text %q", a.Text)
}

var apiPaths = map[string]string{"chat": "/chat/completions", "responses": "/responses", "messages": "/messages", "gemini": "/v1beta/models/m:generateContent"}

// apis are the APIs the mock speaks.
var apis = []string{"chat", "responses", "messages", "gemini"}

// pathOf is where a test request of api goes: the API's path; for gemini,
// the path names the model and the method, streamGenerateContent with
// alt=sse when the request says stream. The test requests of every API
// carry "model" and "stream" in their body, which the mock's Gemini API
// does not read.
func pathOf(api, body string) string {
	if api != "gemini" {
		return apiPaths[api]
	}
	p := "/v1beta/models/" + gjson.Get(body, "model").Str
	if gjson.Get(body, "stream").Bool() {
		return p + ":streamGenerateContent?alt=sse"
	}
	return p + ":generateContent"
}

// ask sends the conversation to a fixed mock in one API and reads its
// answer: from the JSON body, or by adding up the events of a stream.
func ask(t *testing.T, api string, c convo) mockAnswer {
	t.Helper()
	return askBody(t, api, c.body(t, api), c.stream)
}

// askBody sends a request body to a fixed mock in one API and reads its
// answer, as ask does.
func askBody(t *testing.T, api, request string, stream bool) mockAnswer {
	t.Helper()
	res, body := post(t, pathOf(api, request), request)
	if res.StatusCode != 200 {
		t.Fatalf("%s: status %d: %s", api, res.StatusCode, body)
	}
	var a mockAnswer
	if !stream {
		j := gjson.Parse(body)
		switch api {
		case "chat":
			if tc := j.Get("choices.0.message.tool_calls.0"); tc.Exists() {
				a.Tool, a.Args = tc.Get("function.name").Str, tc.Get("function.arguments").Str
			} else {
				a.Text = j.Get("choices.0.message.content").Str
			}
		case "responses":
			switch out := j.Get("output.0"); out.Get("type").Str {
			case "function_call":
				a.Tool, a.Args = out.Get("name").Str, out.Get("arguments").Str
			case "custom_tool_call":
				a.Tool, a.Args, a.Custom = out.Get("name").Str, out.Get("input").Str, true
			default:
				a.Text = out.Get("content.0.text").Str
			}
		case "messages":
			if b := j.Get("content.0"); b.Get("type").Str == "tool_use" {
				a.Tool, a.Args = b.Get("name").Str, b.Get("input").Raw
			} else {
				a.Text = b.Get("text").Str
			}
		case "gemini":
			if fc := j.Get("candidates.0.content.parts.0.functionCall"); fc.Exists() {
				a.Tool, a.Args = fc.Get("name").Str, fc.Get("args").Raw
			} else {
				a.Text = j.Get("candidates.0.content.parts.0.text").Str
			}
		}
		return a
	}
	var args, text strings.Builder
	for _, ev := range parseSSE(t, body) {
		j := gjson.ParseBytes(ev.data)
		switch api {
		case "chat":
			if string(ev.data) == "[DONE]" {
				continue
			}
			d := j.Get("choices.0.delta")
			if tc := d.Get("tool_calls.0"); tc.Exists() {
				a.Tool = tc.Get("function.name").Str
				args.WriteString(tc.Get("function.arguments").Str)
			}
			text.WriteString(d.Get("content").Str)
		case "responses":
			switch ev.name {
			case "response.output_item.added":
				if it := j.Get("item"); it.Get("type").Str != "message" {
					a.Tool, a.Custom = it.Get("name").Str, it.Get("type").Str == "custom_tool_call"
				}
			case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta", "response.output_text.delta":
				if ev.name == "response.output_text.delta" {
					text.WriteString(j.Get("delta").Str)
				} else {
					args.WriteString(j.Get("delta").Str)
				}
			}
		case "messages":
			switch ev.name {
			case "content_block_start":
				if b := j.Get("content_block"); b.Get("type").Str == "tool_use" {
					a.Tool = b.Get("name").Str
				}
			case "content_block_delta":
				args.WriteString(j.Get("delta.partial_json").Str)
				text.WriteString(j.Get("delta.text").Str)
			}
		case "gemini":
			j.Get("candidates.0.content.parts").ForEach(func(_, part gjson.Result) bool {
				if fc := part.Get("functionCall"); fc.Exists() {
					a.Tool = fc.Get("name").Str
					args.WriteString(fc.Get("args").Raw)
				}
				text.WriteString(part.Get("text").Str)
				return true
			})
		}
	}
	if a.Tool != "" {
		a.Args = args.String()
	} else {
		a.Text = text.String()
	}
	return a
}

// failedCalls is n calls of run with args, each answered with a failure.
func failedCalls(n int, args string) []loopCall {
	calls := make([]loopCall, n)
	for i := range calls {
		calls[i] = loopCall{name: "run", args: args}
	}
	return calls
}

const (
	guardBlock = "### !!! REPEAT FAILURE GUARD — DO NOT REPEAT THESE ERRORS !!!\n▶ Pattern: REPEATED ERROR (Failed 2 times)\n### !!! END REPEAT FAILURE GUARD !!!\n\nYou are an agent."
	stopBlock  = "### !!! STOP — RECURSIVE ERROR LOOP !!!\nYou are in a recursive error loop.\n### !!! END STOP !!!\n\nYou are an agent."
)

// TestMockLoops runs the scripted model in every API, streaming and
// not: the same call while fewer calls than repeat have results, then
// words; an end as soon as the guard (or STOP block) is in the system
// text, with one fixed call first when fix is given; no call at all when
// the request forbids tools.
func TestMockLoops(t *testing.T) {
	const args = `{"cmd":"make"}`
	const fixArgs = `{"cmd":"make -j1"}`
	call := func(a string) mockAnswer { return mockAnswer{Tool: "run", Args: a} }
	text := func(s string) mockAnswer { return mockAnswer{Text: s} }
	tests := []convoCase{
		{"repeat: first call", convo{user: `[[mock:tool=run args={"cmd": "make"} repeat=3]] build it`}, call(args)},
		{"repeat: after one result", convo{user: `[[mock:tool=run args={"cmd": "make"} repeat=3]] build it`, calls: failedCalls(1, args)}, call(args)},
		{"repeat: after two results", convo{user: `[[mock:tool=run args={"cmd": "make"} repeat=3]] build it`, calls: failedCalls(2, args)}, call(args)},
		{"repeat: gives up after three", convo{user: `[[mock:tool=run args={"cmd": "make"} repeat=3]] build it`, calls: failedCalls(3, args)},
			text("Mock answer: gave up after 3 calls of run.")},
		{"repeat=1", convo{user: `[[mock:tool=run repeat=1]]`, calls: failedCalls(1, "{}")}, text("Mock answer: gave up after 1 calls of run.")},
		{"without a loop, no call after a result", convo{user: `[[mock:tool=run args={"cmd": "make"}]] build it`, calls: failedCalls(1, args)},
			text("Mock answer to: build it")},

		{"until guard: no guard yet", convo{system: "You are an agent.", user: `[[mock:tool=run args={"cmd":"make"} until=guard]]`, calls: failedCalls(2, args)}, call(args)},
		{"until guard: the guard appears", convo{system: guardBlock, user: `[[mock:tool=run args={"cmd":"make"} until=guard]]`, calls: failedCalls(2, args)},
			text("Mock answer: stopped calling run after 2 calls: the repeat-failure guard appeared.")},
		{"until guard: the STOP block it escalates to", convo{system: stopBlock, user: `[[mock:tool=run args={"cmd":"make"} until=guard]]`, calls: failedCalls(4, args)},
			text("Mock answer: stopped calling run after 4 calls: the STOP block appeared.")},
		{"until guard: repeat defaults to 10", convo{user: `[[mock:tool=run args={"cmd":"make"} until=guard]]`, calls: failedCalls(9, args)}, call(args)},
		{"until guard: gives up at 10", convo{user: `[[mock:tool=run args={"cmd":"make"} until=guard]]`, calls: failedCalls(10, args)},
			text("Mock answer: gave up after 10 calls of run.")},
		{"until guard with repeat", convo{user: `[[mock:tool=run args={"cmd":"make"} until=guard repeat=2]]`, calls: failedCalls(2, args)},
			text("Mock answer: gave up after 2 calls of run.")},
		{"until stop: the guard is not enough", convo{system: guardBlock, user: `[[mock:tool=run args={"cmd":"make"} until=stop]]`, calls: failedCalls(3, args)}, call(args)},
		{"until stop: the STOP block appears", convo{system: stopBlock, user: `[[mock:tool=run args={"cmd":"make"} until=stop]]`, calls: failedCalls(4, args)},
			text("Mock answer: stopped calling run after 4 calls: the STOP block appeared.")},

		{"fix: not before the guard", convo{system: "You are an agent.", user: `[[mock:tool=run args={"cmd":"make"} until=guard fix={"cmd": "make -j1"}]]`, calls: failedCalls(1, args)}, call(args)},
		{"fix: the fixed call once the guard appears", convo{system: guardBlock, user: `[[mock:tool=run args={"cmd":"make"} until=guard fix={"cmd": "make -j1"}]]`, calls: failedCalls(2, args)},
			call(fixArgs)},
		{"fix: words after the fixed call's result", convo{system: guardBlock, user: `[[mock:tool=run args={"cmd":"make"} until=guard fix={"cmd": "make -j1"}]]`,
			calls: append(failedCalls(2, args), loopCall{name: "run", args: fixArgs})},
			text(`Mock answer: fixed run by calling it with {"cmd":"make -j1"}.`)},
		{"fix: words even once the guard is gone", convo{system: "You are an agent.", user: `[[mock:tool=run args={"cmd":"make"} until=guard fix={"cmd": "make -j1"}]]`,
			calls: append(failedCalls(2, args), loopCall{name: "run", args: `{ "cmd" : "make -j1" }`})},
			text(`Mock answer: fixed run by calling it with {"cmd":"make -j1"}.`)},

		{"tools forbidden", convo{user: `[[mock:tool=run args={"cmd":"make"}]] build it`, toolsNone: true},
			text("Mock answer: tools were forbidden, so run was not called.")},
		{"tools forbidden in a loop", convo{system: "You are an agent.", user: `[[mock:tool=run args={"cmd":"make"} until=stop]]`, calls: failedCalls(4, args), toolsNone: true},
			text("Mock answer: tools were forbidden, so run was not called again after 4 calls.")},
		{"tools forbidden: the fixed call is not made", convo{system: guardBlock, user: `[[mock:tool=run args={"cmd":"make"} until=guard fix={"cmd":"make -j1"}]]`, calls: failedCalls(2, args), toolsNone: true},
			text("Mock answer: tools were forbidden, so run was not called again after 2 calls.")},
	}
	askEveryAPI(t, tests)
}

// convoCase is a conversation and the answer the mock must give it.
type convoCase struct {
	name string
	c    convo
	want mockAnswer
}

// askEveryAPI asks each case's conversation in every API, streaming and
// not, and checks the answer.
func askEveryAPI(t *testing.T, tests []convoCase) {
	t.Helper()
	for _, api := range apis {
		for _, stream := range []bool{false, true} {
			for _, tc := range tests {
				t.Run(fmt.Sprintf("%s/stream=%v/%s", api, stream, tc.name), func(t *testing.T) {
					c := tc.c
					c.stream = stream
					if got := ask(t, api, c); !reflect.DeepEqual(got, tc.want) {
						t.Fatalf("answer %v, want %v", got, tc.want)
					}
				})
			}
		}
	}
}

// TestMockLoopIsDeterministic: a loop turn gets the same bytes every time.
func TestMockLoopIsDeterministic(t *testing.T) {
	c := convo{system: guardBlock, user: `[[mock:tool=run args={"cmd":"make"} until=guard fix={"cmd":"make -j1"}]]`, calls: failedCalls(2, `{"cmd":"make"}`), stream: true}
	for _, api := range apis {
		path := pathOf(api, c.body(t, api))
		_, a := post(t, path, c.body(t, api))
		_, b := post(t, path, c.body(t, api))
		if a != b {
			t.Fatalf("%s: two answers to one turn:\n%s\n%s", api, a, b)
		}
	}
}

// TestMockResponsesCustomToolCall: a tool the request declares as custom
// (freeform), in its tools or, as Codex sends it, in a namespace of an
// additional_tools item, gets a custom_tool_call with the input text,
// with the event sequence of a captured Codex stream; loops count its
// custom_tool_call_output items.
func TestMockResponsesCustomToolCall(t *testing.T) {
	const patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"
	const js = `const r = await tools.exec_command({ cmd: "python3 -c \"print(1\"" }); text([r]);`
	customCall := func(name, input string) mockAnswer { return mockAnswer{Tool: name, Args: input, Custom: true} }
	tests := []convoCase{
		{"string input", convo{user: `[[mock:tool=apply_patch args="*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"]]`, customs: []string{"apply_patch"}},
			customCall("apply_patch", patch)},
		{"input object, in a Codex namespace", convo{user: `[[mock:tool=exec args={"input": "const r = await tools.exec_command({ cmd: \"python3 -c \\\"print(1\\\"\" }); text([r]);"}]]`,
			customs: []string{"exec"}, additional: true}, customCall("exec", js)},
		{"object input: its JSON", convo{user: `[[mock:tool=exec args={"cmd": "ls"}]]`, customs: []string{"exec"}}, customCall("exec", `{"cmd":"ls"}`)},
		{"not declared custom: a function call", convo{user: `[[mock:tool=run args={"cmd": "ls"}]]`, customs: []string{"exec"}}, mockAnswer{Tool: "run", Args: `{"cmd":"ls"}`}},
		{"loop counts custom outputs", convo{user: `[[mock:tool=exec args="ls" repeat=2]]`, customs: []string{"exec"}, additional: true,
			calls: []loopCall{{name: "exec", args: "ls", custom: true}}}, customCall("exec", "ls")},
		{"loop gives up", convo{user: `[[mock:tool=exec args="ls" repeat=2]]`, customs: []string{"exec"}, additional: true,
			calls: []loopCall{{name: "exec", args: "ls", custom: true}, {name: "exec", args: "ls", custom: true}}},
			mockAnswer{Text: "Mock answer: gave up after 2 calls of exec."}},
		{"loop fixed with a custom input", convo{system: guardBlock, user: `[[mock:tool=exec args="ls" until=guard fix="ls -la"]]`, customs: []string{"exec"},
			calls: []loopCall{{name: "exec", args: "ls", custom: true}, {name: "exec", args: "ls", custom: true}}}, customCall("exec", "ls -la")},
		{"loop fixed", convo{system: guardBlock, user: `[[mock:tool=exec args="ls" until=guard fix="ls -la"]]`, customs: []string{"exec"},
			calls: []loopCall{{name: "exec", args: "ls", custom: true}, {name: "exec", args: "ls -la", custom: true}}},
			mockAnswer{Text: "Mock answer: fixed exec by calling it with ls -la."}},
	}
	for _, stream := range []bool{false, true} {
		for _, tc := range tests {
			t.Run(fmt.Sprintf("stream=%v/%s", stream, tc.name), func(t *testing.T) {
				c := tc.c
				c.stream = stream
				if got := ask(t, "responses", c); !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("answer %v, want %v", got, tc.want)
				}
			})
		}
	}

	// The wire shapes, as Codex receives them.
	c := convo{user: `[[mock:tool=apply_patch args="*** Begin Patch\n*** End Patch"]]`, customs: []string{"apply_patch"}}
	_, body := post(t, "/responses", c.body(t, "responses"))
	item := gjson.Get(body, "output.0")
	if keys := objectKeys(t, item.Raw); strings.Join(keys, ",") != "id,type,status,call_id,input,name" ||
		!strings.HasPrefix(item.Get("id").Str, "ctc_mock") || !strings.HasPrefix(item.Get("call_id").Str, "call_mock") ||
		item.Get("status").Str != "completed" || item.Get("input").Str != "*** Begin Patch\n*** End Patch" {
		t.Fatalf("custom_tool_call item: %s", item.Raw)
	}
	c.stream = true
	_, stream := post(t, "/responses", c.body(t, "responses"))
	events := parseSSE(t, stream)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.custom_tool_call_input.delta",
		"response.custom_tool_call_input.done", "response.output_item.done", "response.completed"}
	if got := eventNames(t, events); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i, ev := range events {
		if n := gjson.GetBytes(ev.data, "sequence_number").Int(); n != int64(i) {
			t.Fatalf("event %d has sequence_number %d", i, n)
		}
	}
	added, delta, done := gjson.ParseBytes(events[2].data), gjson.ParseBytes(events[3].data), gjson.ParseBytes(events[4].data)
	streamed := gjson.GetBytes(events[5].data, "item")
	if keys := objectKeys(t, streamed.Raw); strings.Join(keys, ",") != "id,type,status,call_id,input,name" ||
		streamed.Get("status").Str != "completed" || streamed.Get("input").Str != "*** Begin Patch\n*** End Patch" {
		t.Fatalf("output_item.done: %s", events[5].data)
	}
	if it := added.Get("item"); it.Get("type").Str != "custom_tool_call" || it.Get("status").Str != "in_progress" || it.Get("input").Str != "" ||
		it.Get("name").Str != "apply_patch" || it.Get("id").Str != streamed.Get("id").Str || delta.Get("item_id").Str != streamed.Get("id").Str {
		t.Fatalf("output_item.added: %s", events[2].data)
	}
	if keys := objectKeys(t, string(delta.Raw)); strings.Join(keys, ",") != "type,sequence_number,item_id,output_index,delta" {
		t.Fatalf("custom_tool_call_input.delta: %s", delta.Raw)
	}
	if keys := objectKeys(t, string(done.Raw)); strings.Join(keys, ",") != "type,sequence_number,item_id,output_index,input" ||
		done.Get("input").Str != "*** Begin Patch\n*** End Patch" {
		t.Fatalf("custom_tool_call_input.done: %s", done.Raw)
	}
	if final := gjson.ParseBytes(events[6].data).Get("response.output.0"); final.Raw != streamed.Raw {
		t.Fatalf("response.completed output %s, want %s", final.Raw, streamed.Raw)
	}
}

// objectKeys returns the keys of a JSON object in their order.
func objectKeys(t *testing.T, raw string) []string {
	t.Helper()
	var keys []string
	r := gjson.Parse(raw)
	if !r.IsObject() {
		t.Fatalf("not an object: %s", raw)
	}
	r.ForEach(func(k, _ gjson.Result) bool {
		keys = append(keys, k.Str)
		return true
	})
	return keys
}
