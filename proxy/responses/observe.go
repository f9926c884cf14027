package responses

import (
	"cmp"
	"net/http"
	"strings"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

// keepForChain is how much of a JSON answer is kept, even when auto-capture
// wants none of it, to learn the response's id and the calls it made.
const keepForChain = 1 << 20

// maxChainTools bounds the tool names a chain state keeps (the latest).
const maxChainTools = 256

// Observe implements [wire.Request].
func (r *request) Observe(sse bool, keep int) wire.Observer {
	o := &observer{r: r, Tap: wire.NewTap(sse, max(keep, keepForChain))}
	o.Events.Data = o.data
	return o
}

// observer follows a Responses answer: the response's id, its output
// items (tool calls), the text deltas, and how it ended.
type observer struct {
	wire.Tap
	r       *request
	id      string
	ended   string // the terminal event: response.completed, response.failed, response.incomplete
	failure string
	calls   map[string]string // call id -> name of the tool calls in the answer
	called  []string
	// firstCall is the id of the answer's first tool call: the run's
	// origin when the conversation had none (see wire.Info.Origin).
	firstCall string
	excerpt   wire.Excerpt
	usage     wire.Usage
}

func (o *observer) data(event string, data []byte) {
	event, valid := wire.EventOf(event, data)
	if !valid {
		if event == "error" && o.failure == "" {
			o.failure = string(data)
		}
		return
	}
	switch event {
	case "error":
		if o.failure == "" {
			o.failure = wire.ErrorMessage(data, http.StatusInternalServerError)
		}
	case "response.created", "response.in_progress":
		if id := gjson.GetBytes(data, "response.id").String(); id != "" {
			o.id = id
		}
	case "response.output_item.done":
		o.item(readOutItem(gjson.GetBytes(data, "item")))
	case "response.output_text.delta":
		o.excerpt.Add(gjson.GetBytes(data, "delta").String())
	case "response.completed", "response.failed", "response.incomplete":
		o.ended = event
		o.response(gjson.GetBytes(data, "response"), false)
	}
}

// outItem is what the observer reads of an output item.
type outItem struct {
	typ, name, callID, id string
	content               gjson.Result
}

// readOutItem reads an output item's members in one pass, the first of
// each key as Get finds it (an item's arguments or text is walked once,
// not once per member read).
func readOutItem(it gjson.Result) outItem {
	var o outItem
	var typ, name, callID, id gjson.Result
	it.ForEach(func(k, v gjson.Result) bool {
		var at *gjson.Result
		switch k.Str {
		case "type":
			at = &typ
		case "name":
			at = &name
		case "call_id":
			at = &callID
		case "id":
			at = &id
		case "content":
			at = &o.content
		}
		if at != nil && !at.Exists() {
			*at = v
		}
		return true
	})
	o.typ, o.name, o.callID, o.id = typ.String(), name.String(), callID.String(), id.String()
	if o.callID == "" {
		o.callID = o.id // callID's rule
	}
	return o
}

// item notes an output item that calls a tool.
func (o *observer) item(it outItem) {
	typ := it.typ
	if typ == "message" || typ == "reasoning" || len(typ) < 5 || typ[len(typ)-5:] != "_call" {
		return
	}
	name := it.name
	if name == "" {
		name = typ[:len(typ)-5]
	}
	id := it.callID
	if o.calls == nil {
		o.calls = map[string]string{}
	}
	if _, seen := o.calls[id]; seen && id != "" {
		return
	}
	o.calls[id] = name
	o.called = append(o.called, name)
	if o.firstCall == "" {
		o.firstCall = id
	}
}

// response reads a whole response object, the last event's or a JSON
// answer, in one pass over its members (an answer echoes the request's
// instructions and tools: each Get would scan past them again). With
// text, it returns the text of the response's first message.
func (o *observer) response(res gjson.Result, text bool) string {
	var f [6]gjson.Result
	res.ForEach(func(k, v gjson.Result) bool {
		for i, key := range responseKeys {
			if k.Str == key && !f[i].Exists() { // the first of a key, as Get finds it
				f[i] = v
			}
		}
		return true
	})
	return o.fields(f, text)
}

// responseKeys are the members of a response object the observer reads,
// in the order of fields' argument.
var responseKeys = [6]string{"id", "usage", "status", "output", "error", "incomplete_details"}

// fields reads the members of a response object named responseKeys (see
// response).
func (o *observer) fields(f [6]gjson.Result, text bool) string {
	id, usage, status, output, errObj, details := f[0], f[1], f[2], f[3], f[4], f[5]
	if id := id.String(); id != "" {
		o.id = id
	}
	if usage.IsObject() {
		o.usage = wire.OpenAIUsage(usage)
	}
	switch status.String() {
	case "failed":
		msg := errObj.Get("message").String()
		if msg == "" {
			msg = "response failed"
		}
		o.failure = msg
	case "incomplete":
		o.failure = "response incomplete: " + details.Get("reason").String()
	}
	var answer wire.Excerpt
	message := !text // the first message's text is read, once
	output.ForEach(func(_, raw gjson.Result) bool {
		it := readOutItem(raw)
		o.item(it)
		if !message && it.typ == "message" {
			message = true
			it.content.ForEach(func(_, c gjson.Result) bool {
				if c.Get("type").String() == "output_text" {
					answer.Add(c.Get("text").String())
				}
				return true
			})
		}
		return true
	})
	return string(answer)
}

// Outcome implements [wire.Observer]: an error event, a failed or
// incomplete response, or a stream that ended before its last event is a
// failure; a completed response that calls no tool is a final answer. A
// response that did not fail is remembered, so that a request continuing
// from it reads as the same conversation.
func (o *observer) Outcome() wire.Outcome {
	answer := ""
	if o.Stream {
		if o.failure == "" && o.ended == "" {
			o.failure = "stream ended before response.completed"
		}
		answer = string(o.excerpt)
	} else {
		b, spans := o.Capture.WholeMembers(responseKeys[:]...)
		if b == nil {
			return wire.Outcome{Usage: wire.OpenAIUsage(o.Member(nil, "usage"))}
		}
		var f [6]gjson.Result
		for i, sp := range spans {
			f[i] = sp.Value(b)
		}
		answer = o.fields(f, true)
	}
	if o.failure != "" {
		return wire.Outcome{Failure: o.failure, Usage: o.usage}
	}
	o.remember()
	return wire.Outcome{Final: len(o.called) == 0, Answer: answer, Usage: o.usage, FirstCall: o.firstCall}
}

// remember keeps the conversation's state after this response, unless
// the provider was asked not to store it.
func (o *observer) remember() {
	r := o.r
	if o.id == "" || r.unstored {
		return
	}
	in := &r.info
	tools := append(append([]string(nil), in.Tools...), o.called...)
	if len(tools) > maxChainTools {
		tools = tools[len(tools)-maxChainTools:]
	}
	// The request that continues from this response sends the outputs of
	// the calls it made: their names are all it needs of them. What the
	// chain keeps has bytes of its own: a piece of the request's copy of
	// its input would keep all of it alive, tool outputs included.
	tallies := in.Tallies()
	for i := range tools {
		tools[i] = strings.Clone(tools[i])
	}
	for i := range tallies {
		tallies[i].Name = strings.Clone(tallies[i].Name)
	}
	r.chains.put(r.tenant, o.id, &chainState{
		goal: strings.Clone(in.Goal), found: r.task.Found, key: in.Key, run: strings.Clone(in.Run),
		origin: strings.Clone(cmp.Or(in.Origin, o.firstCall)), tools: tools,
		toolCount: in.ToolCount, names: o.calls, tallies: tallies,
	})
}
