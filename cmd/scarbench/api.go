package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/store"
)

// api is one wire API the load speaks (-api): where its requests go, what
// an agent sends with them, how its stream ends, the clients' requests,
// and the fake upstream's answers.
type api struct {
	name string
	// path is where its requests go below a target's root, e.g.
	// /v1/chat/completions; streamPath, when not empty, is where its
	// streams go instead (the Gemini API names its method in the path).
	path, streamPath string
	// header is what the agent sends besides the body (cloned per client).
	header http.Header
	// end marks a stream's last event; a stream without it failed.
	end []byte
	// newConv builds client's conversation, with pad more rounds of
	// history before its fifteen (see historyRounds) after the system
	// prompt and tools of pre.
	newConv func(client int, stream bool, solutions []store.Solution, pad int, pre prefix) conversation
	answers *answers
}

// apiNames are the values of -api, the default first.
var apiNames = []string{"chat", "responses", "messages", "gemini"}

// pathOf returns where a request goes below a target's root.
func (a *api) pathOf(stream bool) string {
	if stream && a.streamPath != "" {
		return a.streamPath
	}
	return a.path
}

// apiByName returns the API named as in -api, or nil.
func apiByName(name string) *api {
	switch name {
	case "chat":
		return &api{
			name: "chat", path: "/v1/chat/completions",
			header:  http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-bench-not-a-key"}},
			end:     []byte("data: [DONE]\n\n"),
			newConv: newConversation, answers: &chatAnswers,
		}
	case "responses":
		// Codex CLI's headers, less its session and version ones.
		return &api{
			name: "responses", path: "/v1/responses",
			header:  http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-bench-not-a-key"}, "Accept": {"text/event-stream"}},
			end:     []byte("event: response.completed\n"),
			newConv: newResponsesConversation, answers: &responsesAnswers,
		}
	case "messages":
		// Claude Code's headers, less its beta and version ones.
		return &api{
			name: "messages", path: "/v1/messages",
			header:  http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {"sk-ant-bench-not-a-key"}, "Anthropic-Version": {"2023-06-01"}},
			end:     []byte("event: message_stop\n"),
			newConv: newMessagesConversation, answers: &messagesAnswers,
		}
	case "gemini":
		// The Gemini CLI's headers (through the Google Gen AI SDK), less
		// its client and version ones. Its paths name the model and the
		// method; a stream ends with the chunk that carries the
		// candidate's finishReason (there is no [DONE]).
		return &api{
			name: "gemini", path: "/v1beta/models/" + geminiModel + ":generateContent",
			streamPath: "/v1beta/models/" + geminiModel + ":streamGenerateContent?alt=sse",
			header:     http.Header{"Content-Type": {"application/json"}, "X-Goog-Api-Key": {"bench-not-a-key"}},
			end:        []byte(`"finishReason":"STOP"`),
			newConv:    newGeminiConversation, answers: &geminiAnswers,
		}
	}
	return nil
}

// newResponsesConversation builds client c's request to the Responses API,
// as Codex CLI sends it: the system prompt as a developer message, the
// task as the first user message, then the turn's fifteen rounds as input
// items (the assistant's text, a function_call and its function_call_output,
// their call_id tying them), the same tools, store false and the full
// history on every turn. The content is the chat request's.
func newResponsesConversation(c int, stream bool, solutions []store.Solution, pad int, pre prefix) conversation {
	goal := clientGoal(c, solutions)
	type part struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type item struct {
		Type      string  `json:"type"`
		ID        string  `json:"id,omitempty"`
		Role      string  `json:"role,omitempty"`
		Content   []part  `json:"content,omitempty"`
		Status    string  `json:"status,omitempty"`
		Name      string  `json:"name,omitempty"`
		Arguments string  `json:"arguments,omitempty"`
		CallID    string  `json:"call_id,omitempty"`
		Output    *string `json:"output,omitempty"`
	}
	str := func(s string) *string { return &s }
	user := func(text string) item {
		return item{Type: "message", Role: "user", Content: []part{{"input_text", text}}}
	}
	round := func(id, itemID, thought, tool, args string, result *string) []item {
		call := item{Type: "function_call", Status: "completed", Name: tool, Arguments: args, CallID: id}
		out := item{Type: "function_call_output", CallID: id, Output: result}
		if itemID != "" {
			call.ID, out.ID = "fc_"+itemID, "fco_"+itemID
		}
		return []item{{Type: "message", Role: "assistant", Content: []part{{"output_text", thought}}}, call, out}
	}
	// The system prompt as Codex CLI sends it: a developer message before
	// the task, not instructions.
	var input []any
	if pre.agent != nil {
		var dev []json.RawMessage
		if err := json.Unmarshal(pre.agent.system, &dev); err != nil {
			panic(err) // readAgentPrefix made it an array
		}
		for _, d := range dev {
			input = append(input, d)
		}
	} else {
		input = append(input, item{Type: "message", Role: "developer", Content: []part{{"input_text", cmp.Or(pre.system, systemPrompt)}}})
	}
	input = append(input, user(goal))
	head := len(input)
	add := func(items ...item) {
		for _, it := range items {
			input = append(input, it)
		}
	}
	for turn, tr := range historyRounds(pad) {
		if tr.user != "" {
			add(user(tr.user))
		}
		id := fmt.Sprintf("c%d_t%d", c, turn)
		add(round("call_"+id, id, tr.thought, tr.tool, tr.args, str(tr.result))...)
	}
	// The newest round: its call_id is filled in per request.
	add(round("\x00", "", "Running the tests again.", "run_tests", `{"path":"./..."}`, str("\x01"))...)
	type tool struct {
		Type        string         `json:"type"`
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Strict      bool           `json:"strict"`
		Parameters  map[string]any `json:"parameters"`
	}
	var tools any = func() []tool {
		out := make([]tool, len(benchTools))
		for i, t := range benchTools {
			out[i] = tool{"function", t.name, t.desc, false, t.params}
		}
		return out
	}()
	if pre.agent != nil {
		tools = pre.agent.tools
	}
	body := struct {
		Model             string         `json:"model"`
		Input             []any          `json:"input"`
		Tools             any            `json:"tools"`
		ToolChoice        string         `json:"tool_choice"`
		ParallelToolCalls bool           `json:"parallel_tool_calls"`
		Reasoning         map[string]any `json:"reasoning"`
		Store             bool           `json:"store"`
		Stream            bool           `json:"stream"`
		Include           []string       `json:"include"`
		PromptCacheKey    string         `json:"prompt_cache_key"`
		ClientMetadata    any            `json:"client_metadata,omitempty"`
	}{
		Model: "gpt-5-codex", Input: input, Tools: tools,
		ToolChoice: "auto", Reasoning: map[string]any{"effort": "medium", "summary": "auto"},
		Stream: stream, Include: []string{"reasoning.encrypted_content"},
		PromptCacheKey: fmt.Sprintf("bench-conversation-%d", c),
	}
	var metadata [][]byte
	if pre.agent != nil && len(pre.agent.metadata) > 0 {
		// Codex CLI's client_metadata, in a new order on every request.
		metadata = pre.agent.metadata
		body.ClientMetadata = "\x04"
	}
	cv := conversation{template: template(body, "call_new_", pre), goal: goal, metadata: metadata}
	body.Input = input[:head]
	if metadata != nil {
		body.ClientMetadata = json.RawMessage(appendShuffled(nil, metadata, c, 0))
	}
	cv.first = firstRequest(body, pre)
	return cv
}

// newMessagesConversation builds client c's request to the Messages API,
// as Claude Code sends it: system as an array of text blocks (the billing
// line, the identity and the system prompt, the last two with
// cache_control), the task as the first user message, then the turn's
// fifteen rounds as an assistant message (text and a tool_use block) and a
// user message (its tool_result, is_error on the failed ones, the user's
// interjection as a text block after it), cache_control on the newest
// result, the same tools with input_schema. The content is the chat
// request's.
func newMessagesConversation(c int, stream bool, solutions []store.Solution, pad int, pre prefix) conversation {
	goal := clientGoal(c, solutions)
	cache := map[string]string{"type": "ephemeral"}
	type block struct {
		Type         string            `json:"type"`
		Text         string            `json:"text,omitempty"`
		ID           string            `json:"id,omitempty"`
		Name         string            `json:"name,omitempty"`
		Input        json.RawMessage   `json:"input,omitempty"`
		ToolUseID    string            `json:"tool_use_id,omitempty"`
		Content      *string           `json:"content,omitempty"`
		IsError      any               `json:"is_error,omitempty"`
		CacheControl map[string]string `json:"cache_control,omitempty"`
	}
	type msg struct {
		Role    string  `json:"role"`
		Content []block `json:"content"`
	}
	str := func(s string) *string { return &s }
	msgs := []msg{{Role: "user", Content: []block{{Type: "text", Text: goal}}}}
	round := func(id, thought, tool, args string, result block) {
		msgs = append(msgs,
			msg{Role: "assistant", Content: []block{{Type: "text", Text: thought}, {Type: "tool_use", ID: id, Name: tool, Input: json.RawMessage(args)}}},
			msg{Role: "user", Content: []block{result}})
	}
	for turn, tr := range historyRounds(pad) {
		if tr.user != "" {
			// Claude Code sends what the user typed meanwhile with the
			// tool result it follows.
			last := &msgs[len(msgs)-1]
			last.Content = append(last.Content, block{Type: "text", Text: tr.user})
		}
		id := fmt.Sprintf("toolu_c%d_t%d", c, turn)
		res := block{Type: "tool_result", ToolUseID: id, Content: str(tr.result)}
		if guard.ToolFailed(tr.result) {
			res.IsError = true // Claude Code marks failed commands and tool errors
		}
		round(id, tr.thought, tr.tool, tr.args, res)
	}
	// The newest round: its id and is_error are filled in per request.
	round("\x00", "Running the tests again.", "run_tests", `{"path":"./..."}`,
		block{Type: "tool_result", ToolUseID: "\x00", Content: str("\x01"), IsError: "\x03", CacheControl: cache})
	type tool struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
	}
	var tools any = func() []tool {
		out := make([]tool, len(benchTools))
		for i, t := range benchTools {
			out[i] = tool{t.name, t.desc, t.params}
		}
		return out
	}()
	var system any = []block{
		{Type: "text", Text: "x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=cli;"},
		{Type: "text", Text: "You are Claude Code, Anthropic's official CLI for Claude.", CacheControl: cache},
		{Type: "text", Text: cmp.Or(pre.system, systemPrompt), CacheControl: cache},
	}
	if pre.agent != nil {
		system, tools = pre.agent.system, pre.agent.tools
	}
	// The members in Claude Code's order (as in the captures of
	// proxy/messages/testdata/agents): the messages before the system
	// text and the tools.
	body := struct {
		Model     string            `json:"model"`
		Messages  []msg             `json:"messages"`
		System    any               `json:"system"`
		Tools     any               `json:"tools"`
		Metadata  map[string]string `json:"metadata"`
		MaxTokens int               `json:"max_tokens"`
		Stream    bool              `json:"stream"`
	}{
		Model: "claude-sonnet-4-5", MaxTokens: 32000,
		System: system, Messages: msgs, Tools: tools,
		Metadata: map[string]string{"user_id": fmt.Sprintf(`{"device_id":"%064x","account_uuid":"","session_id":"bench-session-%d"}`, c+1, c)},
		Stream:   stream,
	}
	cv := conversation{template: template(body, "toolu_new_", pre), goal: goal}
	body.Messages = msgs[:1]
	cv.first = firstRequest(body, pre)
	return cv
}

// geminiModel is the model the Gemini requests name in their path.
const geminiModel = "gemini-2.5-pro"

// geminiSessionContext is the text the Gemini CLI puts before the task in
// the conversation's first user content (its date, system and workspace).
const geminiSessionContext = `<session_context>
This is the Gemini CLI. We are setting up the context for our chat.
Today's date is Thursday, November 26, 2026 (formatted according to the user's locale).
My operating system is: linux
The project's temporary directory is: /home/dev/.gemini/tmp/app
- **Workspace Directories:**
  - /home/dev/app
- **Directory Structure:**

Showing up to 200 items (files + folders).

/home/dev/app/



</session_context>`

// newGeminiConversation builds client c's request to the Gemini API, as
// the Gemini CLI sends it: the system prompt as systemInstruction, the
// session context and the task as the first user content, then the
// turn's fifteen rounds as a model content (the model's text and a
// functionCall part with the call's id, which the CLI makes itself:
// {tool}_{unix ms}_{index}) and a user content (its functionResponse with
// the same id: {"output": ...}, or {"error": ...} for a tool that failed
// to run, as the CLI reports a failed edit), the user's interjection as a
// user content of its own, the same tools as functionDeclarations, and
// generationConfig. The model and streaming are in the path. The content
// is the chat request's.
func newGeminiConversation(c int, _ bool, solutions []store.Solution, pad int, pre prefix) conversation {
	goal := clientGoal(c, solutions)
	type call struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	type response struct {
		ID       string            `json:"id"`
		Name     string            `json:"name"`
		Response map[string]string `json:"response"`
	}
	type part struct {
		Text             string    `json:"text,omitempty"`
		FunctionCall     *call     `json:"functionCall,omitempty"`
		ThoughtSignature string    `json:"thoughtSignature,omitempty"`
		FunctionResponse *response `json:"functionResponse,omitempty"`
	}
	type content struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	contents := []content{{Role: "user", Parts: []part{{Text: geminiSessionContext}, {Text: goal}}}}
	round := func(id, thought, tool, args string, resp map[string]string) {
		contents = append(contents,
			// The CLI's own signature for a call whose answer carried none.
			content{Role: "model", Parts: []part{{Text: thought}, {FunctionCall: &call{id, tool, json.RawMessage(args)}, ThoughtSignature: "skip_thought_signature_validator"}}},
			content{Role: "user", Parts: []part{{FunctionResponse: &response{id, tool, resp}}}})
	}
	for turn, tr := range historyRounds(pad) {
		if tr.user != "" {
			contents = append(contents, content{Role: "user", Parts: []part{{Text: tr.user}}})
		}
		resp := map[string]string{"output": tr.result}
		if strings.HasPrefix(tr.result, "<tool_use_error>") {
			resp = map[string]string{"error": tr.result}
		}
		round(fmt.Sprintf("%s_%d_0", tr.tool, 1795736851252+c*1_000_000+turn*1733), tr.thought, tr.tool, tr.args, resp)
	}
	// The newest round: its id is filled in per request, the request's
	// number where the CLI puts the call's index.
	round("\x00", "Running the tests again.", "run_tests", `{"path":"./..."}`, map[string]string{"output": "\x01"})
	type decl struct {
		Name                 string         `json:"name"`
		Description          string         `json:"description"`
		ParametersJSONSchema map[string]any `json:"parametersJsonSchema"`
	}
	decls := make([]decl, len(benchTools))
	for i, t := range benchTools {
		decls[i] = decl{t.name, t.desc, t.params}
	}
	var system any = content{Role: "user", Parts: []part{{Text: cmp.Or(pre.system, systemPrompt)}}}
	var tools any = []any{map[string]any{"functionDeclarations": decls}}
	if pre.agent != nil {
		system, tools = pre.agent.system, pre.agent.tools
	}
	body := struct {
		Contents          []content      `json:"contents"`
		SystemInstruction any            `json:"systemInstruction"`
		Tools             any            `json:"tools"`
		GenerationConfig  map[string]any `json:"generationConfig"`
	}{
		Contents:          contents,
		SystemInstruction: system,
		Tools:             tools,
		GenerationConfig: map[string]any{"temperature": 1, "topP": 0.95, "topK": 64,
			"thinkingConfig": map[string]any{"includeThoughts": true, "thinkingLevel": "HIGH"}},
	}
	cv := conversation{template: template(body, "run_tests_1795737000000_", pre), goal: goal}
	body.Contents = contents[:1]
	cv.first = firstRequest(body, pre)
	return cv
}

// answers are the fake upstream's answers in one API's shape: a tool call
// or a final answer, as one JSON body or as events each flushed on its
// own. The streams carry the same text (eight deltas) and tool call as
// the chat stream.
type answers struct {
	json, jsonFinal     []byte
	events, eventsFinal [][]byte
}

var (
	chatAnswers      = answers{completionToolCall, completionFinal, sseEvents(false), sseEvents(true)}
	responsesAnswers = answers{responsesJSON(false), responsesJSON(true), responsesEvents(false), responsesEvents(true)}
	messagesAnswers  = answers{messagesJSON(false), messagesJSON(true), messagesEvents(false), messagesEvents(true)}
	geminiAnswers    = answers{geminiJSON(false), geminiJSON(true), geminiEvents(false), geminiEvents(true)}
)

// The answers' text, and the tool call an answer that is not final makes.
var (
	streamWords = []string{"I'll ", "run ", "the ", "tests ", "again ", "to ", "check ", "the fix."}
	finalText   = "Fixed: Load now falls back to Default() when the file is missing, and APP_PORT is only applied when it parses. Tests pass."
)

const (
	nextTool = "run_tests"
	nextArgs = `{"path":"./..."}`
)

// event renders one server-sent event with a name, as the Responses and
// Messages APIs send them: its data is an object whose "type" (the name)
// comes first, then the sequence number when seq >= 0, then fields.
func event(name string, seq int, fields obj) []byte {
	b := []byte("event: " + name + "\ndata: {\"type\":\"" + name + "\"")
	if seq >= 0 {
		b = append(b, `,"sequence_number":`...)
		b = strconv.AppendInt(b, int64(seq), 10)
	}
	if rest := mustJSON(fields); len(rest) > 2 {
		b = append(b, ',')
		b = append(b, rest[1:]...)
	} else {
		b = append(b, '}')
	}
	return append(b, "\n\n"...)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // static data
	}
	return b
}

type obj = map[string]any

// responsesOutput is a response's output items: a message with text, and
// a function call unless final.
func responsesOutput(text string, final bool) []any {
	out := []any{obj{"id": "msg_bench", "type": "message", "status": "completed", "role": "assistant",
		"content": []any{obj{"type": "output_text", "annotations": []any{}, "text": text}}}}
	if !final {
		out = append(out, obj{"id": "fc_bench", "type": "function_call", "status": "completed", "arguments": nextArgs, "call_id": "call_next", "name": nextTool})
	}
	return out
}

// responsesObject is a response object, as in a JSON answer and in the
// response.created, .in_progress and .completed events.
func responsesObject(status string, output []any) obj {
	r := obj{"id": "resp_bench", "object": "response", "created_at": 1700000000, "status": status,
		"error": nil, "incomplete_details": nil, "model": "gpt-5-codex", "output": output,
		"parallel_tool_calls": false, "store": false, "usage": nil}
	if status == "completed" {
		r["usage"] = obj{"input_tokens": 5120, "input_tokens_details": obj{"cached_tokens": 4096},
			"output_tokens": 18, "output_tokens_details": obj{"reasoning_tokens": 0}, "total_tokens": 5138}
	}
	return r
}

func responsesJSON(final bool) []byte {
	text := strings.Join(streamWords, "")
	if final {
		text = finalText
	}
	return mustJSON(responsesObject("completed", responsesOutput(text, final)))
}

// responsesEvents is a streamed response: response.created and
// .in_progress, the message's item with eight text deltas, the function
// call's item with its arguments (unless final), response.completed.
func responsesEvents(final bool) [][]byte {
	seq := 0
	ev := func(name string, fields obj) []byte {
		seq++
		return event(name, seq-1, fields)
	}
	text := strings.Join(streamWords, "")
	msgItem := func(status, text string) obj {
		content := []any{}
		if status == "completed" {
			content = []any{obj{"type": "output_text", "annotations": []any{}, "text": text}}
		}
		return obj{"id": "msg_bench", "type": "message", "status": status, "role": "assistant", "content": content}
	}
	part := func(text string) obj { return obj{"type": "output_text", "annotations": []any{}, "text": text} }
	out := [][]byte{
		ev("response.created", obj{"response": responsesObject("in_progress", []any{})}),
		ev("response.in_progress", obj{"response": responsesObject("in_progress", []any{})}),
		ev("response.output_item.added", obj{"output_index": 0, "item": msgItem("in_progress", "")}),
		ev("response.content_part.added", obj{"item_id": "msg_bench", "output_index": 0, "content_index": 0, "part": part("")}),
	}
	for _, w := range streamWords {
		out = append(out, ev("response.output_text.delta", obj{"item_id": "msg_bench", "output_index": 0, "content_index": 0, "delta": w}))
	}
	out = append(out,
		ev("response.output_text.done", obj{"item_id": "msg_bench", "output_index": 0, "content_index": 0, "text": text}),
		ev("response.content_part.done", obj{"item_id": "msg_bench", "output_index": 0, "content_index": 0, "part": part(text)}),
		ev("response.output_item.done", obj{"output_index": 0, "item": msgItem("completed", text)}),
	)
	if !final {
		call := func(status, args string) obj {
			return obj{"id": "fc_bench", "type": "function_call", "status": status, "arguments": args, "call_id": "call_next", "name": nextTool}
		}
		out = append(out,
			ev("response.output_item.added", obj{"output_index": 1, "item": call("in_progress", "")}),
			ev("response.function_call_arguments.delta", obj{"item_id": "fc_bench", "output_index": 1, "delta": nextArgs}),
			ev("response.function_call_arguments.done", obj{"item_id": "fc_bench", "output_index": 1, "arguments": nextArgs}),
			ev("response.output_item.done", obj{"output_index": 1, "item": call("completed", nextArgs)}),
		)
	}
	return append(out, ev("response.completed", obj{"response": responsesObject("completed", responsesOutput(text, final))}))
}

func messagesJSON(final bool) []byte {
	content := []any{obj{"type": "text", "text": strings.Join(streamWords, "")}}
	stop := "tool_use"
	if final {
		content, stop = []any{obj{"type": "text", "text": finalText}}, "end_turn"
	} else {
		content = append(content, obj{"type": "tool_use", "id": "toolu_next", "name": nextTool, "input": json.RawMessage(nextArgs)})
	}
	return mustJSON(obj{"id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": obj{"input_tokens": 5120, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4096, "output_tokens": 18}})
}

// messagesEvents is a streamed message: message_start, ping, a text block
// of eight deltas, a tool_use block (unless final), message_delta with the
// stop reason, message_stop.
func messagesEvents(final bool) [][]byte {
	ev := func(name string, fields obj) []byte { return event(name, -1, fields) }
	out := [][]byte{
		ev("message_start", obj{"message": obj{"id": "msg_bench", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": obj{"input_tokens": 5120, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4096, "output_tokens": 1}}}),
		ev("ping", obj{}),
		ev("content_block_start", obj{"index": 0, "content_block": obj{"type": "text", "text": ""}}),
	}
	for _, w := range streamWords {
		out = append(out, ev("content_block_delta", obj{"index": 0, "delta": obj{"type": "text_delta", "text": w}}))
	}
	out = append(out, ev("content_block_stop", obj{"index": 0}))
	stop := "end_turn"
	if !final {
		stop = "tool_use"
		out = append(out,
			ev("content_block_start", obj{"index": 1, "content_block": obj{"type": "tool_use", "id": "toolu_next", "name": nextTool, "input": obj{}}}),
			ev("content_block_delta", obj{"index": 1, "delta": obj{"type": "input_json_delta", "partial_json": nextArgs}}),
			ev("content_block_stop", obj{"index": 1}),
		)
	}
	return append(out,
		ev("message_delta", obj{"delta": obj{"stop_reason": stop, "stop_sequence": nil}, "usage": obj{"output_tokens": 18}}),
		ev("message_stop", obj{}))
}

// geminiUsage is a usageMetadata object: the whole answer's, or (partial)
// the prompt's alone, as the chunks before the last carry it.
func geminiUsage(partial bool) obj {
	if partial {
		return obj{"promptTokenCount": 5120, "totalTokenCount": 5120}
	}
	return obj{"promptTokenCount": 5120, "candidatesTokenCount": 18, "totalTokenCount": 5138, "cachedContentTokenCount": 4096,
		"promptTokensDetails": []any{obj{"modality": "TEXT", "tokenCount": 5120}},
		"cacheTokensDetails":  []any{obj{"modality": "TEXT", "tokenCount": 4096}}}
}

// geminiResponse is a GenerateContentResponse, an answer or one chunk of
// a stream: the candidate's parts, its finishReason when finish is not
// empty, the usage.
func geminiResponse(parts []any, finish string, usage obj) []byte {
	cand := obj{"content": obj{"parts": parts, "role": "model"}, "index": 0}
	if finish != "" {
		cand["finishReason"] = finish
	}
	return mustJSON(obj{"candidates": []any{cand}, "usageMetadata": usage, "modelVersion": geminiModel, "responseId": "bench-response"})
}

// geminiCall is the answer's functionCall part: the API gives no id (the
// Gemini CLI makes its own).
var geminiCall = obj{"functionCall": obj{"name": nextTool, "args": json.RawMessage(nextArgs)}}

func geminiJSON(final bool) []byte {
	if final {
		return geminiResponse([]any{obj{"text": finalText}}, "STOP", geminiUsage(false))
	}
	return geminiResponse([]any{obj{"text": strings.Join(streamWords, "")}, geminiCall}, "STOP", geminiUsage(false))
}

// geminiEvents is a streamed answer (alt=sse): data-only events, one per
// chunk, with CRLF line ends as the Gemini API sends them; eight chunks of
// text, then the function call (unless final). The last chunk carries the
// finishReason (STOP, a function call's too) and the whole usage: it ends
// the stream.
func geminiEvents(final bool) [][]byte {
	ev := func(chunk []byte) []byte { return append(append([]byte("data: "), chunk...), "\r\n\r\n"...) }
	var out [][]byte
	for i, w := range streamWords {
		if final && i == len(streamWords)-1 {
			out = append(out, ev(geminiResponse([]any{obj{"text": w}}, "STOP", geminiUsage(false))))
			break
		}
		out = append(out, ev(geminiResponse([]any{obj{"text": w}}, "", geminiUsage(true))))
	}
	if !final {
		out = append(out, ev(geminiResponse([]any{geminiCall}, "STOP", geminiUsage(false))))
	}
	return out
}
