package mock

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// responses answers POST /responses (OpenAI Responses).
func (m *Transport) responses(req *http.Request, body []byte) (*http.Response, error) {
	if !gjson.ValidBytes(body) {
		return errorResponse(req, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", ""), nil
	}
	input := gjson.GetBytes(body, "input")
	if input.Exists() && input.Type != gjson.String && !input.IsArray() {
		return errorResponse(req, http.StatusBadRequest, "Invalid type for 'input': expected one of a string or an array of input items.", "invalid_request_error", "invalid_type"), nil
	}
	model := gjson.GetBytes(body, "model").String()
	if model == "" {
		model = Models[0]
	}
	t := responsesTurn(input)
	t.model, t.system = model, withFramedBlocks(gjson.GetBytes(body, "instructions").String(), input)
	t.toolsForbidden = gjson.GetBytes(body, "tool_choice").String() == "none"
	t.custom = func(name string) bool { return isCustomTool(body, name) }
	r, d, err := m.answer(req, body, t)
	if err != nil {
		return nil, err
	}
	if s := d.errorStatus(); s != 0 {
		return statusResponse(req, s, model), nil
	}
	a := newResponsesAnswer(r, body)
	if gjson.GetBytes(body, "stream").Bool() {
		return m.stream(req, a.script(), d, sseHeader("X-Request-Id", a.requestID)), nil
	}
	res := jsonResponse(req, http.StatusOK, mustJSON(a.response("completed", []any{a.item("completed")}, a.usage())))
	res.Header.Set("X-Request-Id", a.requestID)
	return res, nil
}

// responsesTurn reads the turn of a Responses input: the text of the last
// user message (a string is one user message), whether it is the last
// item (developer and system messages after it do not count: the proxy
// puts its blocks in one), and the tool calls (function_call,
// custom_tool_call) and results (function_call_output,
// custom_tool_call_output) after it.
func responsesTurn(input gjson.Result) turn {
	if input.Type == gjson.String {
		return turn{user: input.Str, userLast: true}
	}
	items := input.Array()
	last := len(items) - 1
	for last >= 0 && isMessage(items[last]) && items[last].Get("role").Str != "user" && items[last].Get("role").Str != "assistant" {
		last--
	}
	for i := last; i >= 0; i-- {
		it := items[i]
		if !isMessage(it) || it.Get("role").Str != "user" {
			continue
		}
		t := turn{user: contentText(it.Get("content")), userLast: i == last}
		for _, it := range items[i+1:] {
			switch it.Get("type").Str {
			case "function_call_output", "custom_tool_call_output":
				t.results++
			case "function_call":
				t.calls = append(t.calls, pastCall{name: it.Get("name").Str, args: it.Get("arguments").Str})
			case "custom_tool_call":
				t.calls = append(t.calls, pastCall{name: it.Get("name").Str, args: it.Get("input").Str})
			}
		}
		return t
	}
	return turn{}
}

func isMessage(it gjson.Result) bool {
	typ := it.Get("type").Str
	return typ == "" || typ == "message"
}

// frameOpen opens the frame the proxy puts the blocks it places in a
// conversation's turns in (its wire.FrameStart and wire.FrameNote),
// frameClose closes it. Written out here: providers does not import the
// proxy.
const (
	frameOpen  = "<system-reminder>\nNote from scarproxy, "
	frameClose = "</system-reminder>"
)

// withFramedBlocks returns the instructions followed by the blocks the
// proxy framed in the messages of input (the text inside each frame, its
// note line left out), separated by blank lines: everything the proxy told
// the model, what [[mock:echo]] answers and a scripted loop looks in.
func withFramedBlocks(instructions string, input gjson.Result) string {
	texts := []string{instructions}
	if instructions == "" {
		texts = nil
	}
	add := func(text string) {
		for {
			i := strings.Index(text, frameOpen)
			if i < 0 {
				return
			}
			text = text[i+len(frameOpen):]
			j := strings.Index(text, frameClose)
			if j < 0 {
				return
			}
			if _, inner, ok := strings.Cut(text[:j], "\n"); ok {
				texts = append(texts, strings.TrimSpace(inner))
			}
			text = text[j+len(frameClose):]
		}
	}
	if input.Type == gjson.String {
		add(input.Str)
	}
	input.ForEach(func(_, it gjson.Result) bool {
		if isMessage(it) {
			add(contentText(it.Get("content")))
		}
		return true
	})
	return strings.Join(texts, "\n\n")
}

// isCustomTool reports whether the request declares the tool name as a
// custom (freeform) tool: in its tools, or in the tools of an
// additional_tools input item (Codex), inside namespaces included.
func isCustomTool(body []byte, name string) bool {
	var in func(tools gjson.Result) bool
	in = func(tools gjson.Result) bool {
		found := false
		tools.ForEach(func(_, tool gjson.Result) bool {
			switch tool.Get("type").Str {
			case "custom":
				found = tool.Get("name").Str == name
			case "namespace":
				found = in(tool.Get("tools"))
			}
			return !found
		})
		return found
	}
	if in(gjson.GetBytes(body, "tools")) {
		return true
	}
	found := false
	gjson.GetBytes(body, "input").ForEach(func(_, it gjson.Result) bool {
		if it.Get("type").Str == "additional_tools" {
			found = in(it.Get("tools"))
		}
		return !found
	})
	return found
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mock: " + err.Error()) // the wire types below always marshal
	}
	return b
}

// responsesAnswer is a reply in the shape of the Responses API.
type responsesAnswer struct {
	reply
	id, itemID, callID, requestID string
	echo                          responseEcho
}

func newResponsesAnswer(r reply, body []byte) *responsesAnswer {
	a := &responsesAnswer{
		reply:     r,
		id:        "resp_mock" + hex.EncodeToString(r.sum[:16]),
		requestID: "req_mock" + hex.EncodeToString(r.sum[:8]),
		echo:      echoRequest(body),
	}
	switch {
	case r.tool != "" && r.custom:
		a.itemID = "ctc_mock" + hex.EncodeToString(r.sum[16:28])
		a.callID = "call_mock" + hex.EncodeToString(r.sum[8:14])
	case r.tool != "":
		a.itemID = "fc_mock" + hex.EncodeToString(r.sum[16:28])
		a.callID = "call_mock" + hex.EncodeToString(r.sum[8:14])
	default:
		a.itemID = "msg_mock" + hex.EncodeToString(r.sum[16:28])
	}
	return a
}

// The wire types below list fields in the order OpenAI sends them.

// responseEcho holds the request parameters a response repeats.
type responseEcho struct {
	instructions       *string
	maxOutputTokens    *int64
	previousResponseID *string
	parallelToolCalls  bool
	store              bool
	temperature, topP  float64
	toolChoice, tools  json.RawMessage
	text, metadata     json.RawMessage
	reasoning          json.RawMessage
	truncation         string
	user               *string
}

// echoRequest reads the parameters a response repeats, with OpenAI's
// defaults for those the request leaves out.
func echoRequest(body []byte) responseEcho {
	e := responseEcho{
		parallelToolCalls: true, store: true, temperature: 1, topP: 1,
		toolChoice: json.RawMessage(`"auto"`), tools: json.RawMessage(`[]`),
		text:       json.RawMessage(`{"format":{"type":"text"}}`),
		metadata:   json.RawMessage(`{}`),
		reasoning:  json.RawMessage(`{"effort":null,"summary":null}`),
		truncation: "disabled",
	}
	str := func(path string) *string {
		if v := gjson.GetBytes(body, path); v.Type == gjson.String {
			return &v.Str
		}
		return nil
	}
	raw := func(dst *json.RawMessage, path string, ok func(gjson.Result) bool) {
		if v := gjson.GetBytes(body, path); ok(v) {
			*dst = json.RawMessage(v.Raw)
		}
	}
	isObject := func(v gjson.Result) bool { return v.IsObject() }
	e.instructions = str("instructions")
	e.previousResponseID = str("previous_response_id")
	e.user = str("user")
	if v := gjson.GetBytes(body, "max_output_tokens"); v.Type == gjson.Number {
		n := v.Int()
		e.maxOutputTokens = &n
	}
	if v := gjson.GetBytes(body, "parallel_tool_calls"); v.IsBool() {
		e.parallelToolCalls = v.Bool()
	}
	if v := gjson.GetBytes(body, "store"); v.IsBool() {
		e.store = v.Bool()
	}
	if v := gjson.GetBytes(body, "temperature"); v.Type == gjson.Number {
		e.temperature = v.Float()
	}
	if v := gjson.GetBytes(body, "top_p"); v.Type == gjson.Number {
		e.topP = v.Float()
	}
	if v := gjson.GetBytes(body, "truncation"); v.Type == gjson.String {
		e.truncation = v.Str
	}
	raw(&e.tools, "tools", gjson.Result.IsArray)
	raw(&e.toolChoice, "tool_choice", func(v gjson.Result) bool { return v.Type == gjson.String || v.IsObject() })
	raw(&e.text, "text", isObject)
	raw(&e.metadata, "metadata", isObject)
	raw(&e.reasoning, "reasoning", isObject)
	return e
}

type responseJSON struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"`
	Error              *struct{}       `json:"error"`
	IncompleteDetails  *struct{}       `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int64          `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []any           `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Store              bool            `json:"store"`
	Temperature        float64         `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	TopP               float64         `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              *respUsageJSON  `json:"usage"`
	User               *string         `json:"user"`
	Metadata           json.RawMessage `json:"metadata"`
}

type respUsageJSON struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type outputTextJSON struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
}

type messageItemJSON struct {
	Type    string           `json:"type"`
	ID      string           `json:"id"`
	Status  string           `json:"status"`
	Role    string           `json:"role"`
	Content []outputTextJSON `json:"content"`
}

type functionCallItemJSON struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// customToolCallItemJSON is a call of a custom (freeform) tool, in the
// order of a captured Codex stream.
type customToolCallItemJSON struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Status string `json:"status"`
	CallID string `json:"call_id"`
	Input  string `json:"input"`
	Name   string `json:"name"`
}

// respEventJSON is any streamed event; each type uses some of the fields.
type respEventJSON struct {
	Type           string          `json:"type"`
	SequenceNumber int             `json:"sequence_number"`
	Response       *responseJSON   `json:"response,omitempty"`
	ItemID         string          `json:"item_id,omitempty"`
	OutputIndex    *int            `json:"output_index,omitempty"`
	ContentIndex   *int            `json:"content_index,omitempty"`
	Item           any             `json:"item,omitempty"`
	Part           *outputTextJSON `json:"part,omitempty"`
	Delta          *string         `json:"delta,omitempty"`
	Text           *string         `json:"text,omitempty"`
	Name           string          `json:"name,omitempty"`
	Arguments      *string         `json:"arguments,omitempty"`
	Input          *string         `json:"input,omitempty"`
	Logprobs       *[]struct{}     `json:"logprobs,omitempty"`
}

func (a *responsesAnswer) usage() *respUsageJSON {
	return &respUsageJSON{InputTokens: a.inTokens, OutputTokens: a.outTokens, TotalTokens: a.inTokens + a.outTokens}
}

func (a *responsesAnswer) response(status string, output []any, usage *respUsageJSON) *responseJSON {
	e := a.echo
	return &responseJSON{
		ID: a.id, Object: "response", CreatedAt: a.created, Status: status,
		Instructions: e.instructions, MaxOutputTokens: e.maxOutputTokens, Model: a.model,
		Output: output, ParallelToolCalls: e.parallelToolCalls, PreviousResponseID: e.previousResponseID,
		Reasoning: e.reasoning, Store: e.store, Temperature: e.temperature, Text: e.text,
		ToolChoice: e.toolChoice, Tools: e.tools, TopP: e.topP, Truncation: e.truncation,
		Usage: usage, User: e.user, Metadata: e.metadata,
	}
}

func (a *responsesAnswer) part(text string) *outputTextJSON {
	return &outputTextJSON{Type: "output_text", Text: text, Annotations: []struct{}{}}
}

// item returns the output item with status; an item in progress has no
// content nor arguments yet.
func (a *responsesAnswer) item(status string) any {
	done := status == "completed"
	if a.tool != "" && a.custom {
		it := &customToolCallItemJSON{ID: a.itemID, Type: "custom_tool_call", Status: status, CallID: a.callID, Name: a.tool}
		if done {
			it.Input = a.args
		}
		return it
	}
	if a.tool != "" {
		it := &functionCallItemJSON{Type: "function_call", ID: a.itemID, CallID: a.callID, Name: a.tool, Status: status}
		if done {
			it.Arguments = a.args
		}
		return it
	}
	it := &messageItemJSON{Type: "message", ID: a.itemID, Status: status, Role: "assistant", Content: []outputTextJSON{}}
	if done {
		it.Content = append(it.Content, *a.part(a.text))
	}
	return it
}

// script returns the streamed answer: response.created ... response.completed.
func (a *responsesAnswer) script() script {
	var out []sseEvent
	zero := 0
	add := func(ev respEventJSON) {
		ev.SequenceNumber = len(out)
		out = append(out, sseEvent{name: ev.Type, data: mustJSON(ev)})
	}
	add(respEventJSON{Type: "response.created", Response: a.response("in_progress", []any{}, nil)})
	add(respEventJSON{Type: "response.in_progress", Response: a.response("in_progress", []any{}, nil)})
	add(respEventJSON{Type: "response.output_item.added", OutputIndex: &zero, Item: a.item("in_progress")})
	switch {
	case a.tool != "" && a.custom:
		for _, piece := range splitBytes(a.args, 40) {
			add(respEventJSON{Type: "response.custom_tool_call_input.delta", ItemID: a.itemID, OutputIndex: &zero, Delta: &piece})
		}
		add(respEventJSON{Type: "response.custom_tool_call_input.done", ItemID: a.itemID, OutputIndex: &zero, Input: &a.args})
	case a.tool != "":
		for _, piece := range splitBytes(a.args, 8) {
			add(respEventJSON{Type: "response.function_call_arguments.delta", ItemID: a.itemID, OutputIndex: &zero, Delta: &piece})
		}
		add(respEventJSON{Type: "response.function_call_arguments.done", ItemID: a.itemID, OutputIndex: &zero, Name: a.tool, Arguments: &a.args})
	default:
		noLogprobs := &[]struct{}{}
		add(respEventJSON{Type: "response.content_part.added", ItemID: a.itemID, OutputIndex: &zero, ContentIndex: &zero, Part: a.part("")})
		for _, piece := range splitPieces(a.text) {
			add(respEventJSON{Type: "response.output_text.delta", ItemID: a.itemID, OutputIndex: &zero, ContentIndex: &zero, Delta: &piece, Logprobs: noLogprobs})
		}
		add(respEventJSON{Type: "response.output_text.done", ItemID: a.itemID, OutputIndex: &zero, ContentIndex: &zero, Text: &a.text, Logprobs: noLogprobs})
		add(respEventJSON{Type: "response.content_part.done", ItemID: a.itemID, OutputIndex: &zero, ContentIndex: &zero, Part: a.part(a.text)})
	}
	add(respEventJSON{Type: "response.output_item.done", OutputIndex: &zero, Item: a.item("completed")})
	add(respEventJSON{Type: "response.completed", Response: a.response("completed", []any{a.item("completed")}, a.usage())})

	fail := struct {
		Type           string  `json:"type"`
		Code           string  `json:"code"`
		Message        string  `json:"message"`
		Param          *string `json:"param"`
		SequenceNumber int     `json:"sequence_number"`
	}{"error", "server_error", "The server had an error while processing your request. Sorry about that!", nil, 1}
	return script{events: out, final: 1, fail: sseEvent{name: "error", data: mustJSON(fail)}}
}
