// Package chat is the OpenAI Chat Completions wire format
// (POST /v1/chat/completions): the format of qwen-code, opencode, Continue,
// Aider and most SDKs.
//
// A request is read in one pass (scanChat) that checks the body is JSON
// and notes where its values are; blocks go at the end of the newest turn
// and of the first user message (place.go), or with guard.placement:
// system into the first system or developer message (one is inserted when
// there is none); answers are
// observed as JSON or as SSE chunks ending in data: [DONE]. Agents resend
// their whole conversation every turn: a per-conversation memo (convMemo)
// lets the scan skip what the previous turn already read. The scanner and
// the memo stay inside this package; the proxy sees only [wire.Format].
//
// # Imports
//
// chat imports wire and recall. It must not import Echo, proxy, providers
// or a store.
package chat

import (
	"github.com/scarproxy/scarproxy/proxy/wire"
)

// Format is the chat completions format. It holds the conversation memo:
// make one per server with [New].
type Format struct {
	memo *convMemo
}

// MemoBytes returns the bytes the conversation memo holds.
func (f *Format) MemoBytes() int { return f.memo.Bytes() }

// New returns the format with an empty memo.
func New() *Format { return &Format{memo: newConvMemo(defaultMemoSize)} }

// Name implements [wire.Format].
func (*Format) Name() string { return "chat" }

// Read implements [wire.Format]: a body that is not JSON gives a
// *wire.JSONError.
func (f *Format) Read(body []byte, r wire.Route) (wire.Request, error) {
	c, err := inspect(body, f.memo, r.Tenant)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Error implements [wire.Format]: OpenAI's error shape.
func (*Format) Error(e wire.Error) []byte { return wire.OpenAIError(e) }

// StreamError implements [wire.Format]: a chunk holding the error, as
// OpenAI sends it in a stream, with no data: [DONE] after it.
func (*Format) StreamError(e wire.Error) []byte { return wire.Event("", wire.OpenAIError(e)) }

// Info implements [wire.Request].
func (c *conversation) Info() *wire.Info { return &c.info }

// Inject implements [wire.Request]: with p.System every block goes in
// front of the system text (injectSystem), else the blocks go into the
// conversation's turns (injectTurns).
func (c *conversation) Inject(dst, body []byte, p wire.Placement) ([]byte, error) {
	if p.System {
		return injectSystem(dst, body, c, p.Blocks()...)
	}
	return injectTurns(dst, body, c, p)
}

// Forwarded implements [wire.Request]: the memo takes over what the scan
// found, or the next request reuses its slices, and the conversation lets
// go of the body.
func (c *conversation) Forwarded(remember bool) {
	if !remember || c.forgot.Load() || c.memo == nil || !c.memo.remember(c, c.body) {
		c.giveBack()
	} else if c.forgot.Load() {
		c.memo.forget(c.memoKey) // Forget came while it was remembered
	}
	c.release()
}

// Forget implements [wire.Request].
func (c *conversation) Forget() {
	c.forgot.Store(true)
	if c.memo != nil && c.memoOK {
		c.memo.forget(c.memoKey)
	}
}

// Observe implements [wire.Request].
func (c *conversation) Observe(sse bool, keep int) wire.Observer { return newObserver(sse, keep) }

// HardStop implements [wire.Format]: tool_choice "none".
func (*Format) HardStop(body []byte) ([]byte, error) {
	return wire.SetMember(body, "tool_choice", []byte(`"none"`))
}
