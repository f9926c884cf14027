package gemini

import (
	"cmp"
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

// observer follows a Gemini answer: a GenerateContentResponse, or a
// stream of them (SSE data events, or a JSON array when the client did
// not ask for alt=sse). Each chunk may carry an error, the candidate's
// parts, its finishReason and the usage so far.
type observer struct {
	wire.Tap
	answer
}

// answer is what the chunks of an answer said.
type answer struct {
	errMsg  string // an error chunk's message
	reason  string // the candidate's finishReason, once given
	blocked bool   // the prompt was blocked (promptFeedback.blockReason): no candidate comes
	calls   bool   // the answer calls a function
	call    string // the id of its first call, if the provider gave one
	excerpt wire.Excerpt
	usage   wire.Usage // of the last usageMetadata
}

func (o *observer) data(_ string, data []byte) {
	if !wire.Valid(data) {
		if o.errMsg == "" && gjson.GetBytes(data, "error").Exists() {
			o.errMsg = string(data)
		}
		return
	}
	o.chunk(gjson.ParseBytes(data))
}

// chunk reads one GenerateContentResponse (or an error in its place), its
// members and its first candidate's each in one pass (a part may hold a
// thought signature of kilobytes: a Get of each member would skip it once
// a member).
func (a *answer) chunk(c gjson.Result) {
	var failed bool
	var cand, usage, feedback gjson.Result
	c.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "error":
			failed = true
			return false
		case "candidates":
			if !cand.Exists() && v.IsArray() {
				v.ForEach(func(_, first gjson.Result) bool {
					cand = first
					return false
				})
			}
		case "usageMetadata":
			if !usage.Exists() {
				usage = v
			}
		case "promptFeedback":
			if !feedback.Exists() {
				feedback = v
			}
		}
		return true
	})
	if failed {
		if a.errMsg == "" {
			a.errMsg = wire.ErrorMessage([]byte(c.Raw), http.StatusInternalServerError)
		}
		return
	}
	if cand.IsObject() {
		var content, reason gjson.Result
		cand.ForEach(func(k, v gjson.Result) bool {
			switch {
			case k.Str == "content" && !content.Exists():
				content = v
			case k.Str == "finishReason" && !reason.Exists():
				reason = v
			}
			return true
		})
		content.Get("parts").ForEach(func(_, part gjson.Result) bool {
			switch p := readPart(part); {
			case p.call.Exists() || p.snakeCall.Exists():
				a.calls = true
				if a.call == "" {
					a.call = cmp.Or(p.call.Get("id").String(), p.snakeCall.Get("id").String())
				}
			case p.text.Type == gjson.String && !p.thought.Bool():
				a.excerpt.Add(p.text.Str)
			}
			return true
		})
		if reason.Type == gjson.String && reason.Str != "" {
			a.reason = reason.Str
		}
	}
	if usage.IsObject() {
		a.usage = Usage(usage)
	}
	if r := feedback.Get("blockReason"); r.Type == gjson.String && r.Str != "" {
		a.blocked = true
	}
}

// outcome is how the answer ended: an error chunk is a failure, as is an
// answer that ends before its candidate's finishReason (unless the prompt
// was blocked, which ends it without one); finishReason STOP is a final
// answer unless the answer calls a function.
func (a *answer) outcome() wire.Outcome {
	usage := a.usage
	switch {
	case a.errMsg != "":
		return wire.Outcome{Failure: a.errMsg, Usage: usage}
	case a.reason == "" && !a.blocked:
		return wire.Outcome{Failure: "stream ended before a finishReason", Usage: usage}
	}
	return wire.Outcome{Final: a.reason == "STOP" && !a.calls, Answer: string(a.excerpt), Usage: usage, FirstCall: a.call}
}

// Outcome implements [wire.Observer]. A JSON answer kept whole is read as
// a stream's chunks (an array of them, or one); of one not kept, only its
// usage, from its tail.
func (o *observer) Outcome() wire.Outcome {
	if o.Stream {
		return o.outcome()
	}
	b := o.Capture.Whole()
	if b == nil {
		return wire.Outcome{Usage: Usage(o.Member(nil, "usageMetadata"))}
	}
	var a answer
	if v := gjson.ParseBytes(b); v.IsArray() {
		v.ForEach(func(_, c gjson.Result) bool { a.chunk(c); return true })
	} else {
		a.chunk(v)
	}
	out := a.outcome()
	if out.Failure != "" && a.errMsg == "" {
		// A JSON answer is complete: a candidate without a reason is no
		// stream cut short.
		out = wire.Outcome{Answer: string(a.excerpt), Usage: out.Usage, FirstCall: out.FirstCall}
	}
	return out
}

// Usage reads a usageMetadata object: promptTokenCount (which counts the
// cached tokens) and toolUsePromptTokenCount are the input,
// candidatesTokenCount and thoughtsTokenCount the output,
// cachedContentTokenCount the part of the input read from the cache.
// Negative counts read as 0.
func Usage(u gjson.Result) wire.Usage {
	var out wire.Usage
	if !u.IsObject() {
		return out
	}
	u.ForEach(func(k, v gjson.Result) bool {
		if v.Type != gjson.Number {
			return true
		}
		n := max(v.Int(), 0)
		switch k.Str {
		case "promptTokenCount", "toolUsePromptTokenCount":
			out.Input += n
		case "candidatesTokenCount", "thoughtsTokenCount":
			out.Output += n
		case "cachedContentTokenCount":
			out.CacheRead = n
		}
		return true
	})
	return out
}
