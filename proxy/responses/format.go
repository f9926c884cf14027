// Package responses is the OpenAI Responses API wire format
// (POST /v1/responses): the format of Codex CLI and the OpenAI Agents SDK.
//
// By default the turn's blocks go, framed, into a developer message
// appended to "input", and the recall block into the conversation's first
// user message, so that the prefix a provider caches stays as the client
// sent it (see Inject); with guard.placement: system they open
// "instructions" (created when absent). Tool results are
// the input items of the kinds function_call_output,
// custom_tool_call_output, local_shell_call_output, computer_call_output,
// shell_call_output and apply_patch_call_output, and an mcp_call that
// carries an error. Answers are observed as JSON or as the event stream:
// an error event, response.failed, response.incomplete, or a stream that
// ends before response.completed is a failure; a completed response that
// calls no tool is a final answer.
//
// A request is read in one pass (wire.ScanTurn) that checks the body and
// locates its members and input items; each item is then read with gjson
// from its span. Codex CLI sends its whole conversation on every turn: a
// per-conversation memo (wire.TurnMemo) lets a turn skip the items its
// conversation's remembered turn holds, byte for byte, and the bytes
// after them when they are the same; the instructions are decoded only
// when their bytes changed.
//
// A request that continues a stored response (previous_response_id)
// carries only its new items. The format remembers, per tenant and
// response id, what the conversation had read up to that response (its
// task, tools, failures, and the names of the calls it made), so recall,
// capture and tool names work on such turns too. That memory is in
// process and bounded: a chain that continues on another replica, or
// after the proxy restarted, starts from what its new items say.
//
// # Imports
//
// responses imports wire and recall. It must not import Echo, proxy,
// providers or a store.
package responses

import (
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// Format is the Responses format. It holds the memory of response
// chains: make one per server with [New].
type Format struct {
	chains *chains
	memo   *wire.TurnMemo[*turnState]
}

// New returns the format with an empty chain memory and an empty
// conversation memo of wire.DefaultMemoBudget bytes.
func New() *Format {
	return &Format{chains: newChains(defaultChains), memo: wire.NewTurnMemo[*turnState](0)}
}

// MemoBytes returns the bytes the conversation memo holds.
func (f *Format) MemoBytes() int { return f.memo.Bytes() }

// Name implements [wire.Format].
func (*Format) Name() string { return "responses" }

// Read implements [wire.Format].
func (f *Format) Read(body []byte, r wire.Route) (wire.Request, error) {
	return readTurn(body, r.Tenant, f.chains, f.memo)
}

// Error implements [wire.Format]: OpenAI's error shape.
func (*Format) Error(e wire.Error) []byte { return wire.OpenAIError(e) }

// StreamError implements [wire.Format]: an error event, as the Responses
// API sends it in a stream.
func (*Format) StreamError(e wire.Error) []byte {
	body := []byte(`{"type":"error","code":`)
	body = wire.AppendJSONString(body, e.Code)
	body = append(body, `,"message":`...)
	body = wire.AppendJSONString(body, e.Message)
	body = append(body, `,"param":null}`...)
	return wire.Event("error", body)
}

// HardStop implements [wire.Format]: tool_choice "none".
func (*Format) HardStop(body []byte) ([]byte, error) {
	return wire.SetMember(body, "tool_choice", []byte(`"none"`))
}
