// Package messages is the Anthropic Messages API wire format
// (POST /v1/messages): the format of Claude Code and the Anthropic SDKs.
//
// By default (guard.placement: turn) blocks go where they cost no cached
// prefix: the turn's blocks (STOP, guard) as a text block at the end of the
// last user message, after its tool_result blocks; the conversation's
// recall block as a text block at the end of the first user message; each
// framed as a note from the proxy (wire.Framed), and a string content
// becomes an array of its text and the frame, the form Claude Code sends
// its own reminders in. With guard.placement: system they go into the
// top-level "system": in front of a string, or as a text block of their
// own in front of an array of blocks. Either way the client's
// cache_control markers are left where they are (the proxy adds none, so
// it never takes a request past Anthropic's four cache breakpoints). Tool
// results are the tool_result blocks of user messages; is_error: true is
// authoritative. Answers are observed as JSON or as the event stream
// (message_start ... message_stop); an error event or a stream that ends
// before message_stop is a failure, stop_reason end_turn a final answer.
//
// A request is read in one pass (wire.ScanTurn) that checks the body and
// locates its members and messages; each message is then read with gjson
// from its span. Claude Code sends its whole conversation on every turn:
// a per-conversation memo (wire.TurnMemo) lets a turn skip the messages
// its conversation's remembered turn holds, byte for byte, and the bytes
// after them (system text, tool definitions) when they are the same; the
// system text is decoded only when its bytes changed.
//
// # Imports
//
// messages imports wire and recall. It must not import Echo, proxy,
// providers or a store.
package messages

import (
	"encoding/json"
	"net/http"

	"github.com/scarproxy/scarproxy/proxy/wire"
)

// Format is the Messages format. It holds the conversation memo and the
// system texts it decoded lately: make one per server with [New].
type Format struct {
	memo    *wire.TurnMemo[*turnState]
	systems *wire.SystemMemo
}

// New returns the format with an empty memo of wire.DefaultMemoBudget
// bytes, and one of the system texts it decodes.
func New() *Format {
	return &Format{memo: wire.NewTurnMemo[*turnState](0), systems: wire.NewSystemMemo(systemText, wire.Strip)}
}

// MemoBytes returns the bytes the conversation memo holds.
func (f *Format) MemoBytes() int { return f.memo.Bytes() }

// Name implements [wire.Format].
func (*Format) Name() string { return "messages" }

// Read implements [wire.Format].
func (f *Format) Read(body []byte, r wire.Route) (wire.Request, error) {
	return readWith(body, f.memo, f.systems, r.Tenant)
}

// Error implements [wire.Format]: Anthropic's error shape.
func (*Format) Error(e wire.Error) []byte { return ErrorBody(e) }

// StreamError implements [wire.Format]: an error event, as Anthropic
// sends it in a stream.
func (*Format) StreamError(e wire.Error) []byte { return wire.Event("error", ErrorBody(e)) }

// ErrorBody is the body of an error in Anthropic's shape:
// {"type":"error","error":{"type","message"}}, with the error type
// Anthropic uses for the status.
func ErrorBody(e wire.Error) []byte {
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body.Type = "error"
	body.Error.Type = errorType(e.Status)
	body.Error.Message = e.Message
	b, _ := json.Marshal(body)
	return b
}

// errorType is Anthropic's error type for an HTTP status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// HardStop implements [wire.Format]: tool_choice {"type":"none"}.
func (*Format) HardStop(body []byte) ([]byte, error) {
	return wire.SetMember(body, "tool_choice", []byte(`{"type":"none"}`))
}
