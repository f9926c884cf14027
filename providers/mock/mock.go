// Package mock is scarproxy's offline provider: an [http.RoundTripper]
// ([Transport], made by [New]) that answers the four APIs the proxy
// forwards as the real providers do, without a key or a network. It backs
// `serve --mock`, a provider of `type: mock`, the demo and the tests.
//
// # What it owns
//
//   - the APIs: OpenAI Chat Completions, OpenAI Responses, Anthropic
//     Messages and the Gemini API, JSON and SSE, with their usage and
//     error bodies, and the model lists at GET /models and
//     GET /v1beta/models ([Models]); OpenAI's POST /embeddings, from a
//     hashed bag of words ([Embedding]);
//   - the [[mock:...]] directives it reads in the last user text, whose
//     syntax is a documented contract (README.md, "The mock provider"):
//     status=N, delay=D, tool=NAME with args, repeat, until and fix, echo,
//     truncate and stream_error (see [Transport]);
//   - the scripted model behind a tool directive with repeat or until: a
//     loop read from the conversation itself, without state;
//   - usage with prompt-cache fields, from the one piece of state it
//     keeps: the previous request of each conversation (see [Transport],
//     # Usage).
//
// It is deterministic and offline: the same sequence of requests at the
// same times gets the same answers (ids derive from the request body and
// its time, timestamps from a clock the caller may fix, cached tokens from
// the requests that came before in the same conversation), and nothing
// leaves the process. A request sent again later gets the same words with
// other ids, as from a provider.
//
// # Imports
//
// Only the standard library and gjson. It must not import proxy/*, store,
// Echo nor any other scarproxy package, providers included: providers
// builds a Transport for a provider of type mock, and the request path
// keeps its own reader of the directives (proxy/wire strips them from a
// task), so that this package stays a leaf.
package mock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Transport is the offline provider. It speaks the four APIs the proxy
// forwards, each with its real JSON shapes, SSE events, usage and error
// bodies:
//
//	POST /chat/completions  OpenAI Chat Completions (SSE chunks ending in "data: [DONE]")
//	POST /responses         OpenAI Responses (named SSE events with sequence_number)
//	POST /messages          Anthropic Messages (any query string, e.g. ?beta=true)
//	GET  /models            the models in [Models], OpenAI-shaped
//	POST /embeddings        OpenAI embeddings: a hashed bag of word stems (see [Embedding])
//	POST /v1beta/models/{model}:generateContent        the Gemini API (any version: /v1/ too)
//	POST /v1beta/models/{model}:streamGenerateContent  SSE chunks with ?alt=sse, else a JSON array of them
//	POST /v1beta/models/{model}:countTokens            {"totalTokens": N}
//	GET  /v1beta/models                                the models in [Models], Gemini-shaped
//
// It is deterministic: the same sequence of requests at the same times
// gets the same answers (ids derive from the request body and
// [Transport.Now]'s time, as the timestamps do, and the cached tokens
// from the conversation's previous request, see # Usage). A request sent
// again later gets the same words with other ids: an agent run twice with
// one prompt makes two runs, as with a provider.
//
// # Directives
//
// Directives in the last user text make it misbehave on purpose. The last
// user text is the last message of role user (chat); the input string, or
// the last input item of role user (responses); the last message of role
// user that is not only tool_result blocks (messages); the last user
// content that is not only functionResponse parts (gemini). Text the proxy
// placed in a turn is not user text (see # Blocks). Without directives
// the answer is "Mock answer to: " followed by the user text (directives
// removed, at most 200 characters), or "Mock answer." when nothing is left.
//
//	[[mock:status=429]]   answer that status with the error body the real API
//	                      sends for it (OpenAI's shape for chat and responses,
//	                      Anthropic's for messages, Google's for gemini); a
//	                      2xx status is ignored
//	[[mock:delay=3s]]     wait before answering (ends early if the request is cancelled)
//	[[mock:tool=NAME]]    answer with a call to tool NAME with arguments {}
//	[[mock:tool=NAME args={"path":"a.go"}]]
//	                      the same with those arguments (a JSON object, which
//	                      may contain "]"; {} when absent or not an object),
//	                      sent compact as the call's arguments
//	[[mock:tool=NAME args=JSON repeat=N until=guard|stop fix=JSON]]
//	                      a scripted loop (see # Loops)
//	[[mock:echo]]         answer with everything the proxy told the model: the
//	                      exact system text received (chat, the first system or
//	                      developer message, array parts joined by "\n";
//	                      responses, the instructions string; gemini, the
//	                      text parts of systemInstruction joined by "\n";
//	                      messages, the
//	                      top-level system string, or the text of its text
//	                      blocks joined by "\n\n"), then each scarproxy block
//	                      found elsewhere in the request, in order, each after
//	                      a blank line (see # Blocks)
//	[[mock:truncate]]     stream: end before the last event (chat "data: [DONE]",
//	                      responses response.completed, messages message_stop,
//	                      gemini the chunk with the finishReason)
//	[[mock:stream_error]] stream: send the API's error event after the first
//	                      event, then end
//
// Without repeat or until, a tool call is only made while the user text is
// the last message of the conversation: once the agent sends the tool's
// result the mock answers with text, like a model that is done.
//
// # Tool calls
//
// The tool directive takes NAME, then any of these, separated by white
// space, in any order (unknown keys and bad values are ignored):
//
//	args=JSON      the call's arguments: a JSON object (white space and "]"
//	               inside allowed), or a JSON string (without "{", "}" or "]")
//	repeat=N       a loop of at most N calls (N >= 1, at most 1000)
//	until=guard    a loop that ends once the proxy sends the guard block
//	               (start line "### !!! REPEAT FAILURE GUARD — DO NOT REPEAT
//	               THESE ERRORS !!!"), or the STOP block, which the guard
//	               escalates to, in the system text or in a turn
//	until=stop     a loop that ends once the proxy sends the STOP block
//	               (start line "### !!! STOP — RECURSIVE ERROR LOOP !!!")
//	fix=JSON       with until: the arguments of one last, fixed call (as args)
//
// A function tool gets the JSON object as its arguments ({} when args is
// not one). A custom (freeform) tool, which the Responses API takes when
// the request declares NAME as one ({"type":"custom"} in tools, or in a
// namespace of an additional_tools input item, as Codex sends its exec
// tool), gets a custom_tool_call whose input is the JSON string, or the
// "input" of an object with that one member ({"input":"TEXT"}: any text,
// JSON-escaped, brackets included), or else the object's JSON. Chat and
// Messages always call function tools.
//
// # Loops
//
// With repeat or until the directive is a scripted model: deterministic,
// stateless, reading its progress from the conversation. It counts the
// tool results after the last user text (chat: tool messages; responses:
// function_call_output and custom_tool_call_output items; gemini:
// functionResponse parts of user contents; messages:
// tool_result blocks in user messages), N below, and answers, in this
// order:
//
//  1. with words "Mock answer: fixed NAME by calling it with FIX." once a
//     call of NAME with the fix arguments was made after the user text;
//  2. with words "Mock answer: tools were forbidden, so NAME was not called
//     again after N calls." when the request forbids tools;
//  3. once the until block is in what the proxy told the model (what
//     [[mock:echo]] answers): with the fixed call when fix is given, else with words
//     "Mock answer: stopped calling NAME after N calls: the repeat-failure
//     guard appeared." (or "the STOP block appeared.");
//  4. with the same call (same name, same arguments) while N < repeat;
//  5. with words "Mock answer: gave up after N calls of NAME.".
//
// repeat defaults to 10 when until is given. Fix arguments must differ
// from args: a call with them ends the loop.
//
// A request that forbids tools (chat and responses "tool_choice":"none",
// messages "tool_choice":{"type":"none"}, gemini
// "toolConfig":{"functionCallingConfig":{"mode":"NONE"}}) never gets a call, as from a
// real model: a tool directive that would call answers "Mock answer:
// tools were forbidden, so NAME was not called." (in a loop, as in 2).
//
// # Blocks
//
// The proxy places its blocks (the repeat-failure guard, the STOP block,
// the recall block) in the system text, or in the conversation's turns:
// its newest turn and its first user turn, often inside a
// <system-reminder> frame. The mock knows a block by its first and last
// lines (the markers), and nothing else of the proxy's. A block found
// outside the system text is part of what [[mock:echo]] answers and of
// what until= waits for, so that both read the same whatever the
// placement. A message that holds nothing but blocks (a chat user
// message, a Responses developer item, a Messages text block) is the
// proxy's: it is not the last user text, nor what makes a user text not
// the conversation's last message; blocks placed in a user text are cut
// from it, with their frame.
//
// # Usage
//
// Every answer reports usage in its API's own fields: chat
// usage.prompt_tokens_details.cached_tokens (in a stream, in the chunk
// before "data: [DONE]" when stream_options.include_usage asks for it);
// responses usage.input_tokens_details.cached_tokens (also in
// response.completed); gemini usageMetadata.cachedContentTokenCount
// (also in the chunk with the finishReason); messages usage.cache_read_input_tokens and
// cache_creation_input_tokens (also in message_start and message_delta).
// Input tokens are a quarter of the request body's bytes, rounded up;
// output tokens follow the answer's words, or a quarter of a call's
// arguments.
//
// A provider's prompt cache makes a request cheaper when it begins with
// the bytes of one made before; that saving is what the proxy's choice of
// where to place its blocks is about, so the mock shows it. It remembers,
// per conversation (the model and the text of the first user message,
// without any block placed in it), the body of the last request it
// answered with a 2xx: this is the one piece of state it keeps, and its
// answers stay deterministic for a given sequence of requests. What it
// keeps and compares is the request's prompt, the bytes a provider caches
// in the order it reads them, whatever the order of the JSON members:
// chat tools then messages; responses tools, instructions, then input;
// gemini tools, systemInstruction, then contents; messages tools, system,
// then messages. The cached prefix of a request
// is the longest run of leading prompt bytes it shares with that previous
// request (none for a conversation's first request):
//
//   - chat and responses report it as cached_tokens as OpenAI does: none
//     below 1024 tokens, then in whole blocks of 128 tokens;
//   - gemini reports it as cachedContentTokenCount, part of
//     promptTokenCount, as the Gemini API's implicit cache does: none
//     below 1024 tokens, then all of them;
//   - messages reports it as cache_read_input_tokens; the tokens after it
//     up to the end of the last object holding a "cache_control" member
//     (a marked block, or the request's top-level marker) as
//     cache_creation_input_tokens, 0 without a marker; input_tokens is
//     the rest, so that the three add up to the request's tokens, as
//     Anthropic counts them. A marker is bytes like any other: one that
//     moves to a newer block ends the shared prefix where it was.
//
// The memory is bounded: at most 4096 conversations and 64 MiB of
// prompts, the conversation used least recently forgotten first; a prompt
// larger than that is not remembered. A Transport is safe for
// concurrent use; two requests of one conversation that race are
// compared in the order the mock takes them.
type Transport struct {
	// Now stamps "created" (chat) and "created_at" (responses); nil means
	// time.Now.
	Now func() time.Time

	prefixes prefixMemory // the previous request of each conversation (# Usage)
}

// New returns the mock provider.
func New() *Transport { return &Transport{} }

// Models is what the mock lists at GET /models.
var Models = []string{"mock-gpt", "mock-gpt-mini"}

// RoundTrip answers req in-process. It returns an error only when the
// request's context ends during a delay, or its body cannot be read.
func (m *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
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
	case p == "/responses" && req.Method == http.MethodPost:
		return m.responses(req, body)
	case p == "/messages" && req.Method == http.MethodPost:
		return m.messages(req, body)
	case p == "/embeddings" && req.Method == http.MethodPost:
		return m.embeddings(req, body)
	case p == "/messages" || strings.HasPrefix(p, "/messages/"):
		return anthropicError(req, body, http.StatusNotFound, "not_found_error", "Not Found"), nil
	case isGeminiPath(p):
		return m.gemini(req, p, body)
	default:
		return errorResponse(req, http.StatusNotFound, "Invalid URL ("+req.Method+" /v1"+req.URL.Path+")", "invalid_request_error", ""), nil
	}
}

func (m *Transport) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Transport) models(req *http.Request) *http.Response {
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
	for _, id := range Models {
		out.Data = append(out.Data, model{ID: id, Object: "model", Created: 1700000000, OwnedBy: "scarproxy-mock"})
	}
	b, _ := json.Marshal(out)
	return jsonResponse(req, http.StatusOK, b)
}

// Answers, whatever the API.

// contentText is the text of a message's content: a string, or the
// string "text" members of an array's parts (chat text parts, Responses
// input_text, Anthropic text blocks) joined by "\n", empty ones before the
// first non-empty one left out (as the proxy reads a task).
func contentText(content gjson.Result) string {
	switch {
	case content.Type == gjson.String:
		return content.Str
	case !content.IsArray():
		return ""
	}
	var parts []string
	for _, part := range content.Array() {
		if t := part.Get("text"); t.Type == gjson.String && (t.Str != "" || len(parts) > 0) {
			parts = append(parts, t.Str)
		}
	}
	return strings.Join(parts, "\n")
}

// turn is what the mock reads from a request, whatever its API.
type turn struct {
	model    string
	user     string // the last user text, directives included
	userLast bool   // that text is the conversation's last message: a tool call is allowed
	system   string // the system text
	// elsewhere is the rest of the request where the proxy may place its
	// blocks: the messages or input items that are not the system text.
	elsewhere []gjson.Result
	// first is the text of the conversation's first user message: with
	// the model, it names the conversation whose prefix the mock remembers.
	first string
	// prompt is what a provider's cache compares (see promptOf).
	prompt []byte
	// results counts the tool results after the last user text, and
	// calls lists the tool calls made after it, in order.
	results int
	calls   []pastCall
	// toolsForbidden: the request's tool_choice says none.
	toolsForbidden bool
	// custom reports whether the request declares a tool as a custom
	// (freeform) tool; nil: none is.
	custom func(name string) bool
}

// told is everything the proxy told the model: the system text, then
// each scarproxy block found elsewhere in the request. It is what
// [[mock:echo]] answers and where a loop's until looks.
func (t *turn) told() string { return echoText(t.system, blocksIn(t.elsewhere)) }

// replySum is what a reply's ids derive from: the request body and when
// it arrived, so that the same request sent again (an agent run twice
// with one prompt) gets other ids, as from a provider, while a fixed
// clock (Transport.Now) keeps them the same.
func replySum(body []byte, now time.Time) [32]byte {
	h := sha256.New()
	h.Write(body)
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(now.UnixNano()))
	h.Write(t[:])
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// reply is the mock's answer to a turn before any API gives it its shape:
// text, or one tool call.
type reply struct {
	sum       [32]byte // of the request body and its time: ids derive from it (replySum)
	created   int64
	model     string
	text      string
	tool      string // the tool's name when the answer is a tool call
	args      string // its arguments, a compact JSON object; a custom tool's input text
	custom    bool   // the tool is a custom (freeform) tool: args is its input
	inTokens  int
	outTokens int
	// prefix is how many leading bytes of the request's prompt are those
	// of the previous request of its conversation (see [Transport]).
	prefix int
}

// answer waits out any delay directive and decides the reply. It returns
// the request context's error when it ends during the delay. The caller
// answers d.errorStatus() instead of the reply when it is not zero.
func (m *Transport) answer(req *http.Request, body []byte, t turn) (reply, directives, error) {
	d, rest := parseDirectives(t.user)
	if err := sleep(req.Context(), d.delay); err != nil {
		return reply{}, d, err
	}
	r := reply{sum: replySum(body, m.now()), model: t.model, inTokens: tokens(len(body))}
	if d.errorStatus() != 0 {
		return r, d, nil
	}
	r.prefix = m.prefixes.share(conversationKey(t.model, t.first), t.prompt)
	r.created = m.now().Unix()
	var next toolNext
	if d.tool.name != "" {
		next = d.tool.next(t)
	}
	switch {
	case next.call:
		r.tool, r.args = d.tool.name, next.args.json
		if t.custom != nil && t.custom(r.tool) {
			r.custom, r.args = true, next.args.text
		}
		r.outTokens = len(r.args)/4 + 1
	case next.text != "":
		r.text = next.text
		r.outTokens = len(strings.Fields(r.text)) + 1
	case d.echo:
		r.text = t.told()
		r.outTokens = len(strings.Fields(r.text)) + 1
	default:
		text := strings.TrimSpace(rest)
		if rs := []rune(text); len(rs) > 200 {
			text = string(rs[:200])
		}
		if text == "" {
			r.text = "Mock answer."
		} else {
			r.text = "Mock answer to: " + text
		}
		r.outTokens = len(strings.Fields(r.text)) + 1
	}
	return r, d, nil
}

// sleep waits d, or until ctx ends (then it returns ctx's error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
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

// splitBytes cuts s into pieces of about n bytes, never inside a UTF-8
// sequence, keeping every byte: streamed tool arguments.
func splitBytes(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && s[cut]&0xC0 == 0x80 {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// Server-sent events.

// sseEvent is one server-sent event.
type sseEvent struct {
	name string // the "event:" line; empty for data-only events (chat)
	data []byte
}

func (e sseEvent) bytes() []byte {
	b := make([]byte, 0, len(e.name)+len(e.data)+16)
	if e.name != "" {
		b = append(b, "event: "...)
		b = append(b, e.name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, e.data...)
	return append(b, '\n', '\n')
}

// script is a streamed answer.
type script struct {
	events []sseEvent
	// final is how many of the last events [[mock:truncate]] leaves out.
	final int
	// fail is the error event [[mock:stream_error]] sends after the first event.
	fail sseEvent
}

// stream answers 200 with s's events, written one by one into the body as
// the client reads it, shaped by the truncate and stream_error directives.
// h holds the response headers.
func (m *Transport) stream(req *http.Request, s script, d directives, h http.Header) *http.Response {
	events := s.events
	if d.truncate {
		events = events[:len(events)-s.final]
	}
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
		for i, ev := range events {
			if !write(ev.bytes()) {
				return
			}
			if i == 0 && d.streamError {
				write(s.fail.bytes())
				pw.Close()
				return
			}
		}
		pw.Close()
	}()
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: pr, ContentLength: -1, Request: req,
	}
}

// sseHeader returns the headers of a stream; requestID names the request
// in header key (each API has its own).
func sseHeader(key, requestID string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set(key, requestID)
	return h
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

// OpenAI errors (chat and responses).

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

var _ http.RoundTripper = (*Transport)(nil)
