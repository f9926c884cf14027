package providers

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Mock is the offline provider. It answers like OpenAI (same JSON shapes,
// SSE chunks ending in "data: [DONE]", usage, realistic error bodies) and is
// deterministic: the same request gets the same answer.
//
// Directives in the last user message make it misbehave on purpose:
//
//	[[mock:status=429]]   answer that status with a realistic provider error body
//	[[mock:delay=3s]]     wait before answering (ends early if the request is cancelled)
//	[[mock:tool=NAME]]    answer with a call to tool NAME (only while the user
//	                      message is the last message: after a tool result the
//	                      mock answers with text, like a model that is done)
//	[[mock:echo]]         answer with the exact system message it received
//	[[mock:truncate]]     stream: stop before "data: [DONE]"
//	[[mock:stream_error]] stream: send an error event after the first chunk
type Mock struct {
	// Now stamps "created"; nil means time.Now.
	Now func() time.Time
}

// NewMock returns the mock provider.
func NewMock() *Mock { return &Mock{} }

// MockModels is what the mock lists at GET /models.
var MockModels = []string{"mock-gpt", "mock-gpt-mini"}

var directiveRE = regexp.MustCompile(`\[\[mock:([a-z_]+)(?:=([^\]]*))?\]\]`)

type directives struct {
	status      int
	delay       time.Duration
	tool        string
	echo        bool
	truncate    bool
	streamError bool
}

func parseDirectives(text string) directives {
	var d directives
	for _, m := range directiveRE.FindAllStringSubmatch(text, -1) {
		switch m[1] {
		case "status":
			if n, err := strconv.Atoi(m[2]); err == nil && n >= 100 && n <= 599 {
				d.status = n
			}
		case "delay":
			if v, err := time.ParseDuration(m[2]); err == nil && v > 0 {
				d.delay = v
			}
		case "tool":
			d.tool = strings.TrimSpace(m[2])
		case "echo":
			d.echo = true
		case "truncate":
			d.truncate = true
		case "stream_error":
			d.streamError = true
		}
	}
	return d
}

// RoundTrip answers req in-process.
func (m *Mock) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("mock: read request: %w", err)
		}
		body = b
	}
	p := strings.TrimSuffix(req.URL.Path, "/")
	switch {
	case p == "/models" && req.Method == http.MethodGet:
		return m.models(req), nil
	case p == "/chat/completions" && req.Method == http.MethodPost:
		return m.chat(req, body)
	default:
		return errorResponse(req, http.StatusNotFound, "Invalid URL ("+req.Method+" /v1"+req.URL.Path+")", "invalid_request_error", ""), nil
	}
}

func (m *Mock) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Mock) models(req *http.Request) *http.Response {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, id := range MockModels {
		out.Data = append(out.Data, model{ID: id, Object: "model", Created: 1700000000, OwnedBy: "scarproxy-mock"})
	}
	b, _ := json.Marshal(out)
	return jsonResponse(req, http.StatusOK, b)
}

// lastUserText returns the text of the last user message and whether it is
// the last message of the conversation.
func lastUserText(msgs gjson.Result) (string, bool) {
	arr := msgs.Array()
	for i := len(arr) - 1; i >= 0; i-- {
		if arr[i].Get("role").String() == "user" {
			return MessageText(arr[i].Get("content")), i == len(arr)-1
		}
	}
	return "", false
}

func systemText(msgs gjson.Result) string {
	for _, msg := range msgs.Array() {
		switch msg.Get("role").String() {
		case "system", "developer":
			return MessageText(msg.Get("content"))
		}
	}
	return ""
}

// MessageText flattens a chat message content: a string, or the text
// parts of an array of parts joined by newlines.
func MessageText(v gjson.Result) string {
	switch {
	case v.Type == gjson.String:
		return v.Str
	case v.IsArray():
		var sb strings.Builder
		v.ForEach(func(_, part gjson.Result) bool {
			if t := part.Get("text"); t.Type == gjson.String {
				if sb.Len() > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString(t.Str)
			}
			return true
		})
		return sb.String()
	}
	return ""
}

func (m *Mock) chat(req *http.Request, body []byte) (*http.Response, error) {
	if !gjson.ValidBytes(body) {
		return errorResponse(req, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", ""), nil
	}
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return errorResponse(req, http.StatusBadRequest, "Missing required parameter: 'messages'.", "invalid_request_error", "missing_required_parameter"), nil
	}
	model := gjson.GetBytes(body, "model").String()
	if model == "" {
		model = MockModels[0]
	}
	user, userLast := lastUserText(msgs)
	d := parseDirectives(user)
	if d.delay > 0 {
		t := time.NewTimer(d.delay)
		select {
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		case <-t.C:
		}
	}
	if d.status != 0 && (d.status < 200 || d.status > 299) {
		return statusResponse(req, d.status, model), nil
	}

	sum := sha256.Sum256(body)
	id := "chatcmpl-mock" + hex.EncodeToString(sum[:8])
	a := answer{id: id, model: model, created: m.now().Unix(), promptTokens: len(body)/4 + 1}
	switch {
	case d.tool != "" && userLast:
		a.toolName = d.tool
		a.toolID = "call_mock" + hex.EncodeToString(sum[8:14])
		a.toolArgs = `{}`
		a.finish = "tool_calls"
	case d.echo:
		a.content = systemText(msgs)
		a.finish = "stop"
	default:
		text := strings.TrimSpace(directiveRE.ReplaceAllString(user, ""))
		if r := []rune(text); len(r) > 200 {
			text = string(r[:200])
		}
		if text == "" {
			a.content = "Mock answer."
		} else {
			a.content = "Mock answer to: " + text
		}
		a.finish = "stop"
	}
	a.completionTokens = len(strings.Fields(a.content)) + 1

	if gjson.GetBytes(body, "stream").Bool() {
		usage := gjson.GetBytes(body, "stream_options.include_usage").Bool()
		return m.stream(req, a, d, usage), nil
	}
	return jsonResponse(req, http.StatusOK, a.completion()), nil
}

type answer struct {
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

func (a answer) usage() *usageJSON {
	return &usageJSON{a.promptTokens, a.completionTokens, a.promptTokens + a.completionTokens}
}

func (a answer) toolCalls(streamed bool) []toolCallJSON {
	tc := toolCallJSON{ID: a.toolID, Type: "function", Function: functionJSON{a.toolName, a.toolArgs}}
	if streamed {
		tc.Index = new(int)
	}
	return []toolCallJSON{tc}
}

func (a answer) completion() []byte {
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

func (a answer) chunk(delta *deltaJSON, finish *string) []byte {
	b, _ := json.Marshal(completionJSON{
		ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
		Choices:           []choiceJSON{{Delta: delta, FinishReason: finish}},
		SystemFingerprint: "fp_mock",
	})
	return b
}

// events returns the SSE data payloads of the streamed answer, without [DONE].
func (a answer) events(includeUsage bool) [][]byte {
	var out [][]byte
	empty := ""
	out = append(out, a.chunk(&deltaJSON{Role: "assistant", Content: &empty}, nil))
	if a.toolName != "" {
		out = append(out, a.chunk(&deltaJSON{ToolCalls: a.toolCalls(true)}, nil))
	} else {
		for _, piece := range splitPieces(a.content) {
			out = append(out, a.chunk(&deltaJSON{Content: &piece}, nil))
		}
	}
	out = append(out, a.chunk(&deltaJSON{}, &a.finish))
	if includeUsage {
		b, _ := json.Marshal(completionJSON{
			ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
			Choices: []choiceJSON{}, Usage: a.usage(), SystemFingerprint: "fp_mock",
		})
		out = append(out, b)
	}
	return out
}

// splitPieces cuts text into pieces of about three words, keeping every byte.
func splitPieces(text string) []string {
	var out []string
	words := 0
	start := 0
	for i, r := range text {
		if r == ' ' {
			words++
			if words == 3 {
				out = append(out, text[start:i+1])
				start, words = i+1, 0
			}
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

func (m *Mock) stream(req *http.Request, a answer, d directives, includeUsage bool) *http.Response {
	pr, pw := io.Pipe()
	ctx := req.Context()
	go func() {
		write := func(b []byte) bool {
			if ctx.Err() != nil {
				pw.CloseWithError(ctx.Err())
				return false
			}
			if _, err := pw.Write(b); err != nil {
				return false
			}
			return true
		}
		for i, ev := range a.events(includeUsage) {
			if !write(sseData(ev)) {
				return
			}
			if i == 0 && d.streamError {
				e := `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
				write(sseData([]byte(e)))
				pw.Close()
				return
			}
		}
		if d.truncate {
			pw.Close()
			return
		}
		if write([]byte("data: [DONE]\n\n")) {
			pw.Close()
		}
	}()
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Request-Id", "req_mock"+strings.TrimPrefix(a.id, "chatcmpl-mock"))
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: pr, ContentLength: -1, Request: req,
	}
}

func sseData(payload []byte) []byte {
	b := make([]byte, 0, len(payload)+8)
	b = append(b, "data: "...)
	b = append(b, payload...)
	return append(b, '\n', '\n')
}

func jsonResponse(req *http.Request, status int, body []byte) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

func errorResponse(req *http.Request, status int, message, typ, code string) *http.Response {
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	e.Error.Message, e.Error.Type = message, typ
	if code != "" {
		e.Error.Code = &code
	}
	b, _ := json.Marshal(e)
	return jsonResponse(req, status, b)
}

// statusResponse answers status with the error body OpenAI sends for it.
func statusResponse(req *http.Request, status int, model string) *http.Response {
	var res *http.Response
	switch {
	case status == http.StatusTooManyRequests:
		res = errorResponse(req, status, "Rate limit reached for "+model+" in organization org-mock on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more.", "requests", "rate_limit_exceeded")
		res.Header.Set("Retry-After", "20")
		res.Header.Set("X-Ratelimit-Limit-Requests", "3")
		res.Header.Set("X-Ratelimit-Remaining-Requests", "0")
	case status == http.StatusUnauthorized:
		res = errorResponse(req, status, "Incorrect API key provided: sk-mock***. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")
	case status == http.StatusForbidden:
		res = errorResponse(req, status, "You are not allowed to sample from this model", "invalid_request_error", "model_not_allowed")
	case status == http.StatusNotFound:
		res = errorResponse(req, status, "The model `"+model+"` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found")
	case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
		res = errorResponse(req, status, "Invalid request: the request was malformed or missing required parameters.", "invalid_request_error", "")
	case status == http.StatusServiceUnavailable || status == http.StatusBadGateway:
		res = errorResponse(req, status, "The engine is currently overloaded, please try again later.", "server_error", "")
	case status == http.StatusGatewayTimeout:
		res = errorResponse(req, status, "Request timed out.", "timeout", "")
	case status >= 500:
		res = errorResponse(req, status, "The server had an error while processing your request. Sorry about that!", "server_error", "")
	default:
		res = errorResponse(req, status, http.StatusText(status), "invalid_request_error", "")
	}
	return res
}

var _ http.RoundTripper = (*Mock)(nil)
