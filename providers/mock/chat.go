package mock

import (
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/tidwall/gjson"
)

// chatTurn reads the turn of a chat request: the text of the last user
// message, whether it is the last message of the conversation, and the
// tool calls (assistant tool_calls) and results (tool messages) after it.
func chatTurn(msgs gjson.Result) turn {
	arr := msgs.Array()
	for i := len(arr) - 1; i >= 0; i-- {
		if arr[i].Get("role").String() != "user" {
			continue
		}
		t := turn{user: contentText(arr[i].Get("content")), userLast: i == len(arr)-1}
		for _, msg := range arr[i+1:] {
			switch msg.Get("role").String() {
			case "tool":
				t.results++
			case "assistant":
				msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
					t.calls = append(t.calls, pastCall{name: tc.Get("function.name").String(), args: tc.Get("function.arguments").String()})
					return true
				})
			}
		}
		return t
	}
	return turn{}
}

// systemText returns what the proxy told the model in a chat request: the
// text of the first system or developer message, then the frames of blocks
// in the other messages (see told).
func systemText(msgs gjson.Result) string {
	system, seen := "", false
	var texts []string
	for _, msg := range msgs.Array() {
		switch role := msg.Get("role").String(); {
		case !seen && (role == "system" || role == "developer"):
			system, seen = contentText(msg.Get("content")), true
		default:
			texts = append(texts, contentText(msg.Get("content")))
		}
	}
	return told(system, texts...)
}

func (m *Transport) chat(req *http.Request, body []byte) (*http.Response, error) {
	if !gjson.ValidBytes(body) {
		return errorResponse(req, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", ""), nil
	}
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return errorResponse(req, http.StatusBadRequest, "Missing required parameter: 'messages'.", "invalid_request_error", "missing_required_parameter"), nil
	}
	model := gjson.GetBytes(body, "model").String()
	if model == "" {
		model = Models[0]
	}
	t := chatTurn(msgs)
	t.model, t.system = model, systemText(msgs)
	t.toolsForbidden = gjson.GetBytes(body, "tool_choice").String() == "none"
	r, d, err := m.answer(req, body, t)
	if err != nil {
		return nil, err
	}
	if s := d.errorStatus(); s != 0 {
		return statusResponse(req, s, model), nil
	}

	a := chatAnswer{
		id: "chatcmpl-mock" + hex.EncodeToString(r.sum[:8]), model: model, created: r.created,
		content: r.text, finish: "stop",
		promptTokens: r.inTokens, completionTokens: r.outTokens,
	}
	if r.tool != "" {
		a.toolName, a.toolArgs, a.finish = r.tool, r.args, "tool_calls"
		a.toolID = "call_mock" + hex.EncodeToString(r.sum[8:14])
	}
	if gjson.GetBytes(body, "stream").Bool() {
		usage := gjson.GetBytes(body, "stream_options.include_usage").Bool()
		return m.stream(req, a.script(usage), d, sseHeader("X-Request-Id", "req_mock"+hex.EncodeToString(r.sum[:8]))), nil
	}
	return jsonResponse(req, http.StatusOK, a.completion()), nil
}

// chatAnswer is a reply in the shape of Chat Completions.
type chatAnswer struct {
	id, model                      string
	created                        int64
	content                        string
	toolName, toolID, toolArgs     string
	finish                         string
	promptTokens, completionTokens int
}

// The wire types below list fields in the order OpenAI sends them.

type usageJSON struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type functionJSON struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolCallJSON struct {
	Index    *int         `json:"index,omitempty"` // streamed calls only
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionJSON `json:"function"`
}

type messageJSON struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"`
	ToolCalls []toolCallJSON `json:"tool_calls,omitempty"`
	Refusal   *string        `json:"refusal"`
}

type deltaJSON struct {
	Role      string         `json:"role,omitempty"`
	Content   *string        `json:"content,omitempty"`
	ToolCalls []toolCallJSON `json:"tool_calls,omitempty"`
}

type choiceJSON struct {
	Index        int          `json:"index"`
	Message      *messageJSON `json:"message,omitempty"`
	Delta        *deltaJSON   `json:"delta,omitempty"`
	Logprobs     *struct{}    `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type completionJSON struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []choiceJSON `json:"choices"`
	Usage             *usageJSON   `json:"usage,omitempty"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

func (a chatAnswer) usage() *usageJSON {
	return &usageJSON{a.promptTokens, a.completionTokens, a.promptTokens + a.completionTokens}
}

func (a chatAnswer) toolCalls(streamed bool) []toolCallJSON {
	tc := toolCallJSON{ID: a.toolID, Type: "function", Function: functionJSON{a.toolName, a.toolArgs}}
	if streamed {
		tc.Index = new(int)
	}
	return []toolCallJSON{tc}
}

func (a chatAnswer) completion() []byte {
	msg := &messageJSON{Role: "assistant", Content: &a.content}
	if a.toolName != "" {
		msg.Content = nil
		msg.ToolCalls = a.toolCalls(false)
	}
	b, _ := json.Marshal(completionJSON{
		ID: a.id, Object: "chat.completion", Created: a.created, Model: a.model,
		Choices:           []choiceJSON{{Message: msg, FinishReason: &a.finish}},
		Usage:             a.usage(),
		SystemFingerprint: "fp_mock",
	})
	return b
}

func (a chatAnswer) chunk(delta *deltaJSON, finish *string) []byte {
	b, _ := json.Marshal(completionJSON{
		ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
		Choices:           []choiceJSON{{Delta: delta, FinishReason: finish}},
		SystemFingerprint: "fp_mock",
	})
	return b
}

// script returns the streamed answer: its chunks, then "data: [DONE]".
func (a chatAnswer) script(includeUsage bool) script {
	var out []sseEvent
	add := func(b []byte) { out = append(out, sseEvent{data: b}) }
	empty := ""
	add(a.chunk(&deltaJSON{Role: "assistant", Content: &empty}, nil))
	if a.toolName != "" {
		add(a.chunk(&deltaJSON{ToolCalls: a.toolCalls(true)}, nil))
	} else {
		for _, piece := range splitPieces(a.content) {
			add(a.chunk(&deltaJSON{Content: &piece}, nil))
		}
	}
	add(a.chunk(&deltaJSON{}, &a.finish))
	if includeUsage {
		b, _ := json.Marshal(completionJSON{
			ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
			Choices: []choiceJSON{}, Usage: a.usage(), SystemFingerprint: "fp_mock",
		})
		add(b)
	}
	out = append(out, sseEvent{data: []byte("[DONE]")})
	return script{
		events: out,
		final:  1,
		fail:   sseEvent{data: []byte(`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`)},
	}
}
