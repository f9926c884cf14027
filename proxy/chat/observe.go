package chat

import (
	"bytes"
	"net/http"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// observer reads a copy of a chat completion while the bytes go through
// unchanged. For an SSE stream it follows the events (error events, the
// finish reason, data: [DONE], a bounded excerpt of the answer); for any
// other body it keeps the first bytes, up to what it was asked to keep.
type observer struct {
	wire.Tap
	done    bool   // saw "data: [DONE]"
	errMsg  string // message of an error event
	finish  string // last finish_reason seen
	excerpt wire.Excerpt
	usage   wire.Usage // of the chunk that carries it (stream_options.include_usage)
	call    string     // id of the first tool call
}

func newObserver(sse bool, keep int) *observer {
	o := &observer{Tap: wire.NewTap(sse, keep)}
	o.Events.Data = o.data
	return o
}

func (o *observer) data(event string, data []byte) {
	if bytes.Equal(data, []byte("[DONE]")) {
		o.done = true
		return
	}
	if !wire.Valid(data) { // depth-bounded: a provider can send anything
		if event == "error" && o.errMsg == "" {
			o.errMsg = string(data)
		}
		return
	}
	if e := gjson.GetBytes(data, "error"); (e.Exists() && e.Type != gjson.Null) || event == "error" {
		if o.errMsg == "" {
			o.errMsg = wire.ErrorMessage(data, http.StatusInternalServerError)
		}
		return
	}
	res := gjson.GetManyBytes(data, "choices.0.finish_reason", "choices.0.delta.content")
	if f := res[0]; f.Type == gjson.String && f.Str != "" {
		o.finish = f.Str
	}
	if c := res[1]; c.Type == gjson.String {
		o.excerpt.Add(c.Str)
	}
	// Most chunks carry neither: look only where the bytes say so.
	if bytes.Contains(data, []byte(`"usage"`)) {
		if u := gjson.GetBytes(data, "usage"); u.IsObject() {
			o.usage = wire.OpenAIUsage(u)
		}
	}
	if o.call == "" && bytes.Contains(data, []byte(`"tool_calls"`)) {
		if id := gjson.GetBytes(data, "choices.0.delta.tool_calls.0.id"); id.Type == gjson.String {
			o.call = id.Str
		}
	}
}

// Outcome says how the completion ended: an error event, a stream cut
// before data: [DONE], or a final answer (finish_reason "stop"); and its
// usage, when the provider said it.
func (o *observer) Outcome() wire.Outcome {
	if o.Stream {
		switch {
		case o.errMsg != "":
			return wire.Outcome{Failure: o.errMsg, Usage: o.usage}
		case !o.done:
			return wire.Outcome{Failure: "stream ended before data: [DONE]", Usage: o.usage}
		}
		return wire.Outcome{Final: o.finish == "stop", Answer: string(o.excerpt), Usage: o.usage, FirstCall: o.call}
	}
	b := o.Capture.Whole()
	usage := wire.OpenAIUsage(o.Member(b, "usage"))
	if b == nil {
		return wire.Outcome{Usage: usage}
	}
	res := gjson.GetManyBytes(b, "choices.0.finish_reason", "choices.0.message.content", "choices.0.message.tool_calls.0.id")
	return wire.Outcome{Final: res[0].String() == "stop", Answer: res[1].String(), Usage: usage, FirstCall: res[2].String()}
}
