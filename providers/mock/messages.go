package mock

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// messages answers POST /messages (Anthropic Messages).
func (m *Transport) messages(req *http.Request, body []byte) (*http.Response, error) {
	if !gjson.ValidBytes(body) {
		return anthropicError(req, body, http.StatusBadRequest, "invalid_request_error", "The request body is not valid JSON."), nil
	}
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return anthropicError(req, body, http.StatusBadRequest, "invalid_request_error", "messages: Field required"), nil
	}
	if len(msgs.Array()) == 0 {
		return anthropicError(req, body, http.StatusBadRequest, "invalid_request_error", "messages: at least one message is required"), nil
	}
	model := gjson.GetBytes(body, "model").String()
	if model == "" {
		model = Models[0]
	}
	t := messagesTurn(msgs)
	t.model, t.system = model, systemBlocksText(gjson.GetBytes(body, "system"))
	t.first, t.elsewhere = firstUserText(msgs), []gjson.Result{msgs}
	t.prompt = promptOf(body, "tools", "system", "messages")
	t.toolsForbidden = gjson.GetBytes(body, "tool_choice.type").String() == "none"
	r, d, err := m.answer(req, body, t)
	if err != nil {
		return nil, err
	}
	if s := d.errorStatus(); s != 0 {
		return anthropicStatus(req, body, s, model), nil
	}
	a := newMessagesAnswer(r, body, t.prompt)
	if gjson.GetBytes(body, "stream").Bool() {
		return m.stream(req, a.script(), d, sseHeader("Request-Id", a.requestID)), nil
	}
	res := jsonResponse(req, http.StatusOK, mustJSON(a.message()))
	res.Header.Set("Request-Id", a.requestID)
	return res, nil
}

// messagesTurn reads the turn of a Messages request: the text of the last
// user message that is not only tool results, whether it is the
// conversation's last message (system messages after it do not count:
// Claude Code puts one after the user's message, listing its agents or
// skills), and the tool calls (tool_use blocks) and results (tool_result
// blocks) after it. Text blocks that hold only the proxy's blocks do not
// count (see [placedOnly]); blocks placed in the user text are not part
// of it.
func messagesTurn(msgs gjson.Result) turn {
	arr := msgs.Array()
	last := len(arr) - 1
	for last >= 0 && (arr[last].Get("role").Str == "system" || arr[last].Get("role").Str == "user" && noUserText(arr[last].Get("content")) && !hasToolResults(arr[last].Get("content"))) {
		last--
	}
	for i := last; i >= 0; i-- {
		if arr[i].Get("role").Str != "user" || noUserText(arr[i].Get("content")) {
			continue
		}
		t := turn{user: withoutBlocks(contentText(arr[i].Get("content"))), userLast: i == last}
		for _, msg := range arr[i+1:] {
			role := msg.Get("role").Str
			msg.Get("content").ForEach(func(_, block gjson.Result) bool {
				switch typ := block.Get("type").Str; {
				case role == "user" && typ == "tool_result":
					t.results++
				case role == "assistant" && typ == "tool_use":
					t.calls = append(t.calls, pastCall{name: block.Get("name").Str, args: block.Get("input").Raw})
				}
				return true
			})
		}
		return t
	}
	return turn{}
}

// noUserText reports whether a user message's content holds no text of
// the agent's: it is a string or blocks, each a tool_result or holding
// only the proxy's blocks (see [placedOnly]), and not empty.
func noUserText(content gjson.Result) bool {
	if !content.IsArray() {
		return placedOnly(content)
	}
	n, others := 0, 0
	content.ForEach(func(_, block gjson.Result) bool {
		n++
		if block.Get("type").Str != "tool_result" && !(block.Get("type").Str == "text" && onlyBlocks(block.Get("text").Str)) {
			others++
		}
		return true
	})
	return n > 0 && others == 0
}

func hasToolResults(content gjson.Result) bool {
	found := false
	content.ForEach(func(_, block gjson.Result) bool {
		found = block.Get("type").Str == "tool_result"
		return !found
	})
	return found
}

// systemBlocksText returns the text [[mock:echo]] answers for a Messages
// system parameter: the string itself, or the text of its text blocks in
// order, joined by a blank line ("\n\n"); other blocks are skipped.
func systemBlocksText(system gjson.Result) string {
	if system.Type == gjson.String {
		return system.Str
	}
	var texts []string
	system.ForEach(func(_, block gjson.Result) bool {
		if t := block.Get("text"); block.Get("type").Str == "text" && t.Type == gjson.String {
			texts = append(texts, t.Str)
		}
		return true
	})
	return strings.Join(texts, "\n\n")
}

// messagesAnswer is a reply in the shape of the Messages API.
type messagesAnswer struct {
	reply
	id, toolID, requestID string
	stopReason            string
	usage                 anthUsageJSON
}

func newMessagesAnswer(r reply, body, prompt []byte) *messagesAnswer {
	input, read, creation := anthropicSplit(body, prompt, r.prefix)
	a := &messagesAnswer{
		reply:      r,
		usage:      anthUsageJSON{InputTokens: input, CacheCreationInputTokens: creation, CacheReadInputTokens: read, OutputTokens: r.outTokens},
		id:         "msg_mock" + hex.EncodeToString(r.sum[:12]),
		requestID:  "req_mock" + hex.EncodeToString(r.sum[:12]),
		stopReason: "end_turn",
	}
	if r.tool != "" {
		a.toolID = "toolu_mock" + hex.EncodeToString(r.sum[12:24])
		a.stopReason = "tool_use"
	}
	return a
}

// The wire types below list fields in the order Anthropic sends them.

type anthMessageJSON struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []anthBlockJSON `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        anthUsageJSON   `json:"usage"`
}

type anthUsageJSON struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// anthBlockJSON is a text block ({type, text}) or a tool_use block
// ({type, id, name, input}).
type anthBlockJSON struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type anthDeltaJSON struct {
	Type        string  `json:"type,omitempty"`
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

// anthEventJSON is any streamed event; each type uses some of the fields.
type anthEventJSON struct {
	Type         string           `json:"type"`
	Message      *anthMessageJSON `json:"message,omitempty"`
	Index        *int             `json:"index,omitempty"`
	ContentBlock *anthBlockJSON   `json:"content_block,omitempty"`
	Delta        any              `json:"delta,omitempty"`
	Usage        *anthUsageJSON   `json:"usage,omitempty"`
}

type anthStopJSON struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// block returns the answer's content block; started is its empty form
// that opens a stream.
func (a *messagesAnswer) block(started bool) anthBlockJSON {
	if a.tool != "" {
		input := json.RawMessage(a.args)
		if started {
			input = json.RawMessage(`{}`)
		}
		return anthBlockJSON{Type: "tool_use", ID: a.toolID, Name: a.tool, Input: input}
	}
	text := a.text
	if started {
		text = ""
	}
	return anthBlockJSON{Type: "text", Text: &text}
}

func (a *messagesAnswer) message() *anthMessageJSON {
	return &anthMessageJSON{
		ID: a.id, Type: "message", Role: "assistant", Model: a.model,
		Content:    []anthBlockJSON{a.block(false)},
		StopReason: &a.stopReason,
		Usage:      a.usage,
	}
}

// script returns the streamed answer: message_start ... message_stop.
func (a *messagesAnswer) script() script {
	var out []sseEvent
	zero := 0
	add := func(ev anthEventJSON) {
		out = append(out, sseEvent{name: ev.Type, data: mustJSON(ev)})
	}
	start := &anthMessageJSON{
		ID: a.id, Type: "message", Role: "assistant", Model: a.model,
		Content: []anthBlockJSON{},
		Usage:   a.usage,
	}
	start.Usage.OutputTokens = 1
	started := a.block(true)
	add(anthEventJSON{Type: "message_start", Message: start})
	add(anthEventJSON{Type: "content_block_start", Index: &zero, ContentBlock: &started})
	add(anthEventJSON{Type: "ping"})
	if a.tool != "" {
		for _, piece := range splitBytes(a.args, 8) {
			add(anthEventJSON{Type: "content_block_delta", Index: &zero, Delta: anthDeltaJSON{Type: "input_json_delta", PartialJSON: &piece}})
		}
	} else {
		for _, piece := range splitPieces(a.text) {
			add(anthEventJSON{Type: "content_block_delta", Index: &zero, Delta: anthDeltaJSON{Type: "text_delta", Text: &piece}})
		}
	}
	add(anthEventJSON{Type: "content_block_stop", Index: &zero})
	add(anthEventJSON{Type: "message_delta", Delta: anthStopJSON{StopReason: a.stopReason}, Usage: &a.usage})
	add(anthEventJSON{Type: "message_stop"})
	return script{
		events: out,
		final:  1,
		fail:   sseEvent{name: "error", data: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
	}
}

// anthropicError answers status with an Anthropic error body and the
// request-id header, derived from the request body.
func anthropicError(req *http.Request, body []byte, status int, typ, message string) *http.Response {
	sum := sha256.Sum256(body)
	id := "req_mock" + hex.EncodeToString(sum[:12])
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	e.Type, e.Error.Type, e.Error.Message, e.RequestID = "error", typ, message, id
	res := jsonResponse(req, status, mustJSON(e))
	res.Header.Set("Request-Id", id)
	return res
}

// anthropicStatus answers status with the error type and body Anthropic
// sends for it: 4xx statuses it does not name are invalid_request_error,
// 5xx ones api_error.
func anthropicStatus(req *http.Request, body []byte, status int, model string) *http.Response {
	switch status {
	case http.StatusBadRequest:
		return anthropicError(req, body, status, "invalid_request_error", "Invalid request: the request was malformed or missing required parameters.")
	case http.StatusUnauthorized:
		return anthropicError(req, body, status, "authentication_error", "invalid x-api-key")
	case http.StatusForbidden:
		return anthropicError(req, body, status, "permission_error", "Your API key does not have permission to use the specified resource.")
	case http.StatusNotFound:
		return anthropicError(req, body, status, "not_found_error", "model: "+model)
	case http.StatusRequestEntityTooLarge:
		return anthropicError(req, body, status, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
	case http.StatusTooManyRequests:
		res := anthropicError(req, body, status, "rate_limit_error", "This request would exceed the rate limit for your organization (mock) of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, or try again later.")
		res.Header.Set("Retry-After", "20")
		res.Header.Set("Anthropic-Ratelimit-Requests-Limit", "50")
		res.Header.Set("Anthropic-Ratelimit-Requests-Remaining", "0")
		return res
	case http.StatusInternalServerError:
		return anthropicError(req, body, status, "api_error", "Internal server error")
	case 529:
		return anthropicError(req, body, status, "overloaded_error", "Overloaded")
	}
	if status >= 500 {
		return anthropicError(req, body, status, "api_error", "Internal server error")
	}
	return anthropicError(req, body, status, "invalid_request_error", http.StatusText(status)+" ("+strconv.Itoa(status)+")")
}
