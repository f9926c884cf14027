package messages

import (
	"net/http"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// Observe implements [wire.Request].
func (r *request) Observe(sse bool, keep int) wire.Observer {
	o := &observer{Tap: wire.NewTap(sse, keep)}
	o.Events.Data = o.data
	return o
}

// observer follows a Messages answer: in a stream, the error event, the
// stop reason of message_delta, message_stop, and the text of text_delta
// events; in a JSON answer, its stop_reason and text blocks.
type observer struct {
	wire.Tap
	stopped bool   // saw message_stop
	errMsg  string // message of an error event
	reason  string // stop_reason
	excerpt wire.Excerpt
	counts  wire.AnthropicCounts // of message_start, then message_delta
	call    string               // id of the first tool_use block
}

func (o *observer) data(event string, data []byte) {
	event, valid := wire.EventOf(event, data)
	if !valid {
		if event == "error" && o.errMsg == "" {
			o.errMsg = string(data)
		}
		return
	}
	switch event {
	case "error":
		if o.errMsg == "" {
			o.errMsg = wire.ErrorMessage(data, http.StatusInternalServerError)
		}
	case "message_stop":
		o.stopped = true
	case "message_start":
		o.counts.Read(gjson.GetBytes(data, "message.usage"))
	case "message_delta":
		res := gjson.GetManyBytes(data, "delta.stop_reason", "usage")
		if r := res[0]; r.Type == gjson.String {
			o.reason = r.Str
		}
		o.counts.Read(res[1])
	case "content_block_start":
		if b := gjson.GetBytes(data, "content_block"); o.call == "" && b.Get("type").String() == "tool_use" {
			o.call = b.Get("id").String()
		}
	case "content_block_delta":
		if d := gjson.GetBytes(data, "delta"); d.Get("type").String() == "text_delta" {
			o.excerpt.Add(d.Get("text").String())
		}
	}
}

// Outcome implements [wire.Observer]: an error event or a stream that
// ended before message_stop is a failure; stop_reason end_turn is a
// final answer (tool_use is not). The usage is the provider's, when it
// said it.
func (o *observer) Outcome() wire.Outcome {
	if o.Stream {
		usage := o.counts.Usage()
		switch {
		case o.errMsg != "":
			return wire.Outcome{Failure: o.errMsg, Usage: usage}
		case !o.stopped:
			return wire.Outcome{Failure: "stream ended before message_stop", Usage: usage}
		}
		return wire.Outcome{Final: o.reason == "end_turn", Answer: string(o.excerpt), Usage: usage, FirstCall: o.call}
	}
	b := o.Capture.Whole()
	usage := wire.AnthropicUsage(o.Member(b, "usage"))
	if b == nil {
		return wire.Outcome{Usage: usage}
	}
	var text wire.Excerpt
	call := ""
	gjson.GetBytes(b, "content").ForEach(func(_, c gjson.Result) bool {
		switch c.Get("type").String() {
		case "text":
			text.Add(c.Get("text").String())
		case "tool_use":
			if call == "" {
				call = c.Get("id").String()
			}
		}
		return true
	})
	return wire.Outcome{Final: gjson.GetBytes(b, "stop_reason").String() == "end_turn", Answer: string(text), Usage: usage, FirstCall: call}
}
