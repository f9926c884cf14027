// Package wire is the seam between the proxy's request pipeline and the
// wire formats it speaks: OpenAI Chat Completions, the OpenAI Responses
// API, the Anthropic Messages API and the Gemini API. A format reads a
// request (model, stream, system text, the user's task, tool calls and
// results), places blocks, forbids tools for a turn, observes the
// provider's answer, and shapes the proxy's own errors. The pipeline
// (package proxy) does the rest the same way for every format: tenant,
// recording, guard, recall, forwarding.
//
// Adding a format means one package beside proxy/chat, proxy/responses,
// proxy/messages and proxy/gemini that implements [Format], plus golden
// files for its rewrite and fuzz targets for its reader and observer.
//
// This package also holds what the formats share: a depth-bounded JSON
// [Scanner], [Block]s and their JSON escape, an [SSE] event splitter, and
// what lets a format read only what is new in a turn: [ScanTurn], one
// pass over a body that locates its members and the elements of its
// conversation's array, and [TurnMemo], a per-conversation memo of the
// latest turn, bounded in bytes, from which [ScanTurn] skips the elements
// a body repeats (Responses and Messages use both; chat has a memo of its
// own).
//
// # Imports
//
// wire imports guard and recall (to strip their blocks), and nothing else
// of scarproxy: it reads the mock provider's directives itself, to keep
// them out of a task. It must not import Echo, providers or a store.
package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"

	"github.com/scarproxy/scarproxy/recall"
)

// Format is one wire format.
type Format interface {
	// Name names the format in metrics and logs. It is also the API a
	// provider must serve to receive the request ("chat", "responses",
	// "messages", "gemini", as providers.API*).
	Name() string
	// Read reads a request that came by route r. A body that is not JSON
	// gives a *JSONError; any other error is a request the format
	// refuses, its text shown to the client in a 400.
	Read(body []byte, r Route) (Request, error)
	// Error is the body of an error the proxy answers itself, in the
	// API's shape.
	Error(e Error) []byte
	// StreamError is the event that tells a client, in the API's stream
	// format, that the proxy cut its stream short.
	StreamError(e Error) []byte
	// HardStop returns body, a request of this format as it will be
	// forwarded, with tool calls forbidden for one turn (the loop
	// breaker's hard stop), in the API's own terms: a new slice, body
	// unchanged. An error leaves the request as it was.
	HardStop(body []byte) ([]byte, error)
}

// Route is what the proxy knows of a request besides its body: whose it is
// and where it goes.
type Route struct {
	// Tenant scopes what a format remembers between turns: one tenant's
	// conversation is never another's.
	Tenant string
	// Path is the escaped path the request goes to below a provider's API
	// root: "/chat/completions", "/responses", "/messages" for the APIs
	// whose root holds their version (https://api.openai.com/v1), the
	// whole path for the Gemini API, whose paths hold it and the model
	// ("/v1beta/models/gemini-2.5-flash:streamGenerateContent").
	Path string
}

// Request is a request read by its format.
type Request interface {
	// Info is what was read. The pipeline sets the verdicts of the tool
	// results.
	Info() *Info
	// Inject returns the body with the blocks placed as p says, after
	// stripping the blocks an earlier turn may have left where they go.
	// When nothing changes it returns body itself, so the provider
	// receives the client's exact bytes. A new body is appended to dst[:0]
	// (dst may be nil). body is the body Read was given.
	Inject(dst, body []byte, p Placement) ([]byte, error)
	// Forwarded is called once, just before the body goes to the
	// provider; the request must not refer to the body afterwards.
	// remember reports that the reading is complete (every tool result
	// judged) and may be remembered for the conversation's next turn.
	Forwarded(remember bool)
	// Forget drops what the format remembers of the request's
	// conversation, or will remember once it is forwarded: its next turn
	// is read whole. It may be called from any goroutine, at any time
	// (what the request found is lost to the store after it was
	// forwarded: its next turn must read it again).
	Forget()
	// Observe returns the observer of the provider's 2xx answer. sse tells
	// an event stream; keep bounds the bytes of any other answer kept to
	// read its outcome (0: none, only streams are read).
	Observe(sse bool, keep int) Observer
}

// Info is what a format reads of a request.
type Info struct {
	Model  string
	User   string // the request's end-user field, if any
	Stream bool
	System string // the system text received, with any earlier blocks
	Goal   string // the user's task: what recall searches and capture stores
	Key    string // the conversation's recall key (recall.ConversationKey)
	// Later says the request holds an earlier answer of the model (an
	// assistant turn, or a previous_response_id): it is not its
	// conversation's first.
	Later bool
	// Run names the agent's run of the conversation as the agent itself
	// says it (Claude Code's session in metadata.user_id, Codex CLI's
	// prompt_cache_key): two runs of one task are two conversations. ""
	// when the body says nothing.
	Run string
	// Origin names the run by its history when the agent does not: the id
	// of the first tool call in it (call ids are unique to a run and sent
	// again verbatim on every turn). "" when the history holds no call, as
	// on a run's first request.
	Origin string
	// RunKey is Key with the run: what names the conversation in memory
	// (recall, capture, X-Scar-Conversation). The pipeline sets it (see
	// [RunKey]); "" means Key.
	RunKey string
	// Continued says the body extends the turn this replica read last of
	// its conversation by one answer of the model and what follows it:
	// its new tool results answer that answer, and no other replica read
	// them before (unless the client sent the request there too). Their
	// failures are shown to the guard before their commit.
	Continued bool

	Tools     []string // names of the tools the assistant called, in order
	ToolCount int      // tool results in the conversation
	// ToolResults are the tool results read from this body; a format that
	// remembers earlier turns may leave out those it judged before, and
	// then says in Prior what they said, per tool.
	ToolResults []ToolResult
	// Prior says what the results before ToolResults said: per tool, in
	// the order tools first answered, as Tallies folds them. It may be a
	// remembered turn's (see VerdictLog): never written.
	Prior []ToolTally
	// ToolDefs is the request's tool definitions as they stand in the body
	// (its "tools" array), nil when it sends none: see [DefinedTools].
	ToolDefs []byte
	// ToolDefsSum, when not 0, is the memo sum of the bytes after the
	// conversation's array, which hold ToolDefs, when the memo knew them
	// (the turn before had the same): two requests of a conversation
	// with the same ToolDefsSum define the same tools.
	ToolDefsSum uint64
}

// DropBody lets go of what refers to the request's body once it is
// forwarded: its tool definitions and each tool result's content, call
// arguments and note. The verdicts stay: capture reads them.
func (in *Info) DropBody() {
	in.ToolDefs = nil
	for i := range in.ToolResults {
		tr := &in.ToolResults[i]
		tr.Raw, tr.Args, tr.Note = nil, nil, nil
		tr.text, tr.decoded = "", false // nor the text decoded from it
	}
}

// ConversationKey is the key that names the request's conversation in
// memory: RunKey, else Key.
func (in *Info) ConversationKey() string {
	if in.RunKey != "" {
		return in.RunKey
	}
	return in.Key
}

// RunKey returns the key of one run of the conversation whose key is
// key: key itself when run is "" (or key is), else a hash of both in
// the same "conv:" form.
func RunKey(key, run string) string {
	if key == "" || run == "" {
		return key
	}
	return runKeys.of(key, run)
}

// runKeys remembers the run keys made last: every turn of a run makes the
// same one, a SHA-256 each time. Two generations of at most maxRunKeys,
// each of a key and run of at most maxRunKeyBytes (a longer run id, sent
// by a client, is hashed every time).
var runKeys = runKeyMemo{cur: map[[2]string]string{}}

const (
	maxRunKeys     = 4096
	maxRunKeyBytes = 256
)

type runKeyMemo struct {
	mu        sync.Mutex
	cur, prev map[[2]string]string
}

func (m *runKeyMemo) of(key, run string) string {
	if len(key)+len(run) > maxRunKeyBytes {
		return recall.ConversationKey(key, run)
	}
	k := [2]string{key, run}
	m.mu.Lock()
	v, ok := m.cur[k]
	if !ok {
		if v, ok = m.prev[k]; ok {
			m.put(k, v)
		}
	}
	m.mu.Unlock()
	if ok {
		return v
	}
	v = recall.ConversationKey(key, run)
	m.mu.Lock()
	m.put(k, v)
	m.mu.Unlock()
	return v
}

// put adds key k, copied: what a caller passes may be a piece of a
// request's body. The caller holds mu.
func (m *runKeyMemo) put(k [2]string, v string) {
	k = [2]string{strings.Clone(k[0]), strings.Clone(k[1])}
	if len(m.cur) >= maxRunKeys {
		m.prev, m.cur = m.cur, make(map[[2]string]string, maxRunKeys)
	}
	m.cur[k] = v
}

// UsedTools reports whether the conversation called at least one tool.
func (in *Info) UsedTools() bool { return len(in.Tools) > 0 || in.ToolCount > 0 }

// ToolResult is one tool result of a request.
type ToolResult struct {
	Key     string // names the result for deduplication: "call:" + call id, or "hash:" + a content hash
	Name    string // the tool's name, when known
	IsError bool   // the API itself marks the result as an error (Anthropic's is_error, an MCP call's error)
	OK      bool   // the API itself marks the result as a success (Anthropic's is_error: false)
	Failed  bool   // the verdict, set by the pipeline
	At      int    // where the result is in the request, in the format's own terms
	// Raw is the result's content as it stands in the body, decoded by
	// Decode only when the result is judged (most are seen before).
	Raw    []byte
	Decode func(raw []byte) string
	// Args is the arguments of the call the result answers, as they stand
	// in the body: a JSON string (which holds JSON, or free text for a
	// free-form tool) or an object. Nil when the call is not in the body
	// read. See [CallArgs].
	Args []byte
	// Note is what the assistant wrote beside the call, as it stands in
	// the body (a JSON string or an array of text parts), nil when
	// nothing. See [NoteText].
	Note []byte
	// Builtin reports a call of a tool the API provides (a local shell, a
	// computer), named by its kind: the request's definitions need not
	// name it.
	Builtin bool

	text    string // Text, once decoded
	decoded bool
}

// Text returns the result's content as text, decoded once: judging the
// result, learning from it and following its loop read the same text.
func (t *ToolResult) Text() string {
	if !t.decoded {
		if t.Decode == nil {
			t.text = string(t.Raw)
		} else {
			t.text = t.Decode(t.Raw)
		}
		t.decoded = true
	}
	return t.text
}

// Observer reads a copy of a provider's 2xx answer while the bytes go
// through unchanged.
type Observer interface {
	// Write observes the next chunk of the answer. It never keeps p.
	Write(p []byte)
	// Outcome says how the answer ended, once it has.
	Outcome() Outcome
}

// Outcome is how a 2xx answer ended.
type Outcome struct {
	// Failure says why the answer failed though its status did not: an
	// error event, a failed or incomplete response, a stream that ended
	// before its last event. Empty when it did not fail.
	Failure string
	// Final reports a final answer: the model is done (finish_reason stop,
	// stop_reason end_turn, a completed response that calls no tool).
	Final bool
	// Answer is a bounded excerpt of the final answer's text.
	Answer string
	// Usage is what the provider said the answer cost, zero when it did
	// not say.
	Usage Usage
	// FirstCall is the id of the answer's first tool call, "" when it
	// calls none: on a run's first request, the name of the run its later
	// requests will carry (see Info.Origin).
	FirstCall string
}

// Error is an error the proxy answers itself. Type and Code follow
// OpenAI's vocabulary; a format maps them to its own.
type Error struct {
	Status  int
	Message string
	Type    string // "invalid_request_error", "api_error", "timeout"...
	Code    string
}

func (e *Error) Error() string { return e.Message }

// BadRequest is a 400 for input the proxy refuses.
func BadRequest(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Message: msg, Type: "invalid_request_error", Code: "invalid_request"}
}

// HashKey names a tool result that has no call id by its tool's name and
// content.
func HashKey(name string, raw []byte) string {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(raw)
	return "hash:" + hex.EncodeToString(h.Sum(nil)[:12])
}

// Task is the user's task as recall searches and capture stores it: the
// text, trimmed, without the mock provider's [[mock:...]] directives.
func Task(text string) string {
	return strings.TrimSpace(stripMockDirectives(text))
}

// ToolTally is what results of one tool said: how many failed, and
// whether the latest did.
type ToolTally struct {
	Name       string
	Failures   int
	LastFailed bool
}

// Tallies returns what the results of each tool said in the whole
// conversation, one entry per tool in the order tools first answered:
// Prior, then ToolResults in order with their verdicts. Call it once the
// verdicts are set.
func (in *Info) Tallies() []ToolTally {
	out := make([]ToolTally, len(in.Prior), len(in.Prior)+len(in.ToolResults))
	copy(out, in.Prior)
	for i := range in.ToolResults {
		tr := &in.ToolResults[i]
		t := ToolTally{Name: tr.Name, LastFailed: tr.Failed}
		if tr.Failed {
			t.Failures = 1
		}
		out = foldTally(out, t)
	}
	return out
}

// Answers counts the model's answers among the elements of a turn read
// after its remembered turn: runs of elements the model wrote (an
// assistant message; in the Responses API its reasoning, calls and
// message items).
type Answers struct {
	n     int
	inRun bool
}

// Add counts the next element, which the model wrote or not.
func (a *Answers) Add(model bool) {
	if model && !a.inRun {
		a.n++
	}
	a.inRun = model
}

// One reports whether the elements counted hold exactly one answer.
func (a *Answers) One() bool { return a.n == 1 }
