// Package gemini is the Gemini API wire format
// (POST /v1beta/models/{model}:generateContent and :streamGenerateContent,
// /v1/ too): the format of the Gemini CLI and the Google Gen AI SDKs.
//
// The model and the method come from the path, not the body: the
// format reads them from the route ([wire.Route]), and the request goes
// to the provider at the same path. The body's systemInstruction is the
// system text, its contents the conversation: the task is the user's
// words in the first user content, the tool calls the functionCall parts
// of model contents, the tool results the functionResponse parts of user
// contents. A response's "error", which the API defines as the error's
// details, is authoritative; otherwise its text (its "output", or its
// JSON) says whether the call failed. Each member is read by its JSON
// name or by its proto name (system_instruction...), which the API also
// takes.
//
// By default (guard.placement: turn) blocks go where they cost no cached
// prefix: the turn's blocks (STOP, guard) as a text part at the end of
// the last user content, after its function responses; the
// conversation's recall block as a text part at the end of the first
// user content; each framed as a note from the proxy (wire.Framed). With
// guard.placement: system they go, as a text part of their own, in
// front of the parts of systemInstruction, which is created when absent.
// The hard stop sets toolConfig.functionCallingConfig.mode to NONE.
//
// Answers are observed as JSON, as a JSON array of chunks, or as the
// event stream of alt=sse: an error chunk, or a stream that ends before
// its candidate's finishReason, is a failure; finishReason STOP is a
// final answer unless the answer calls a function. Errors the proxy
// answers itself take Google's shape, {"error":{"code","message","status"}}.
//
// A request is read in one pass (wire.ScanTurn) that checks the body and
// locates its members and contents; each content is then read with gjson
// from its span. The Gemini CLI sends its whole conversation on every
// turn: a per-conversation memo (wire.TurnMemo) lets a turn skip the
// contents its conversation's remembered turn holds, byte for byte, and
// the bytes after them (system instruction, tool declarations) when they
// are the same; the system instruction is decoded only when its bytes
// changed.
//
// # Imports
//
// gemini imports wire and recall. It must not import Echo, proxy,
// providers or a store.
package gemini

import (
	"encoding/json"
	"net/http"

	"github.com/scarproxy/scarproxy/proxy/wire"
)

// Format is the Gemini format. It holds the conversation memo and
// remembers the text of the system instructions it read lately (see
// wire.SystemMemo): make one per server with [New].
type Format struct {
	memo    *wire.TurnMemo[*turnState]
	systems *wire.SystemMemo
}

// New returns the format with an empty memo of wire.DefaultMemoBudget
// bytes and an empty memory of system instructions.
func New() *Format {
	return &Format{memo: wire.NewTurnMemo[*turnState](0), systems: newSystemMemo()}
}

// MemoBytes returns the bytes the conversation memo holds.
func (f *Format) MemoBytes() int { return f.memo.Bytes() }

// Name implements [wire.Format].
func (*Format) Name() string { return "gemini" }

// Read implements [wire.Format]: the model and the method are read from
// r.Path; a path that is not a generateContent or streamGenerateContent
// call is refused.
func (f *Format) Read(body []byte, r wire.Route) (wire.Request, error) {
	return readTurn(body, r.Path, f.systems, f.memo, r.Tenant)
}

// Error implements [wire.Format]: Google's error shape.
func (*Format) Error(e wire.Error) []byte { return ErrorBody(e) }

// StreamError implements [wire.Format]: a data event holding the error,
// as the Gemini API sends it in a stream.
func (*Format) StreamError(e wire.Error) []byte { return wire.Event("", ErrorBody(e)) }

// HardStop implements [wire.Format]: toolConfig.functionCallingConfig
// {"mode":"NONE"}.
func (*Format) HardStop(body []byte) ([]byte, error) { return hardStop(body) }

// ErrorBody is the body of an error in Google's shape:
// {"error":{"code","message","status"}}, with the status name Google
// uses for the HTTP status.
func ErrorBody(e wire.Error) []byte {
	var body struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	body.Error.Code = e.Status
	body.Error.Message = e.Message
	body.Error.Status = Status(e)
	b, _ := json.Marshal(body)
	return b
}

// Status is the name of Google's status code (google.rpc.Code) for an
// error: by its HTTP status, a timeout of the proxy's being
// DEADLINE_EXCEEDED.
func Status(e wire.Error) string {
	if e.Type == "timeout" {
		return "DEADLINE_EXCEEDED"
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if e.Status < 500 {
		return "FAILED_PRECONDITION"
	}
	return "INTERNAL"
}
