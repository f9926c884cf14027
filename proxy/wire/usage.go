package wire

import (
	"bytes"

	"github.com/tidwall/gjson"
)

// Usage is what a provider says an answer cost, in tokens, with its
// prompt cache: how much of the input it read from the cache and how much
// it wrote to it.
type Usage struct {
	// Input counts every input token, those read from the cache and those
	// written to it included (Anthropic reports them apart; they are
	// added here, so that CacheRead/Input is the hit ratio in every API).
	Input      int64
	Output     int64
	CacheRead  int64 // input tokens read from the prompt cache
	CacheWrite int64 // input tokens written to the prompt cache (Anthropic)
}

// Zero reports that the answer said nothing of its usage.
func (u Usage) Zero() bool { return u == Usage{} }

// Add adds v to u.
func (u *Usage) Add(v Usage) {
	u.Input += v.Input
	u.Output += v.Output
	u.CacheRead += v.CacheRead
	u.CacheWrite += v.CacheWrite
}

// OpenAIUsage reads a usage object of the OpenAI APIs: Chat Completions'
// prompt_tokens, completion_tokens and prompt_tokens_details.cached_tokens
// (DeepSeek's prompt_cache_hit_tokens too), or the Responses API's
// input_tokens, output_tokens and input_tokens_details.cached_tokens.
// Negative counts read as 0.
func OpenAIUsage(u gjson.Result) Usage {
	var out Usage
	var cached, hits int64
	forCounts(u, func(key string, n int64, v gjson.Result) {
		switch key {
		case "prompt_tokens", "input_tokens":
			out.Input = n
		case "completion_tokens", "output_tokens":
			out.Output = n
		case "prompt_cache_hit_tokens":
			hits = n
		case "prompt_tokens_details", "input_tokens_details":
			forCounts(v, func(key string, n int64, _ gjson.Result) {
				if key == "cached_tokens" {
					cached = n
				}
			})
		}
	})
	out.CacheRead = max(cached, hits)
	return out
}

// forCounts calls f with each member of object u: its key, its value as
// a count (0 unless a non-negative number) and the value itself.
func forCounts(u gjson.Result, f func(key string, n int64, v gjson.Result)) {
	if !u.IsObject() {
		return
	}
	u.ForEach(func(k, v gjson.Result) bool {
		var n int64
		if v.Type == gjson.Number {
			n = max(v.Int(), 0)
		}
		f(k.Str, n, v)
		return true
	})
}

// AnthropicUsage reads a usage object of the Messages API: input_tokens
// (which leave out the cache's), output_tokens, cache_read_input_tokens
// and cache_creation_input_tokens. Negative counts read as 0.
func AnthropicUsage(u gjson.Result) Usage {
	var c AnthropicCounts
	c.Read(u)
	return c.Usage()
}

// AnthropicCounts follows the usage of a Messages stream: message_start
// carries the message's usage, and each message_delta the counts that
// changed since (output_tokens, and in newer versions of the API the
// input and cache counts again, as totals).
type AnthropicCounts struct {
	input, output, read, write int64
}

// Read takes the counts a usage object carries; counts it leaves out keep
// their value.
func (c *AnthropicCounts) Read(u gjson.Result) {
	forCounts(u, func(key string, n int64, v gjson.Result) {
		if v.Type != gjson.Number {
			return
		}
		switch key {
		case "input_tokens":
			c.input = n
		case "output_tokens":
			c.output = n
		case "cache_read_input_tokens":
			c.read = n
		case "cache_creation_input_tokens":
			c.write = n
		}
	})
}

// Usage is the usage the counts read say.
func (c AnthropicCounts) Usage() Usage {
	return Usage{Input: c.input + c.read + c.write, Output: c.output, CacheRead: c.read, CacheWrite: c.write}
}

// tailMax is how many of the last bytes of a JSON answer a [Tap] keeps
// when it does not keep the whole answer: enough for a usage object,
// which the APIs put at the end.
const tailMax = 4 << 10

// Tail keeps the last bytes of an answer: at least tailMax of them (all,
// when fewer were written), at most twice as many. Its zero value is
// empty.
type Tail struct {
	B []byte
}

// Write keeps the end of everything written.
func (t *Tail) Write(p []byte) {
	if len(p) >= tailMax {
		t.B = append(t.B[:0], p[len(p)-tailMax:]...)
		return
	}
	if len(t.B)+len(p) > 2*tailMax {
		// Keep the last tailMax-len(p) bytes: with p, tailMax.
		t.B = t.B[:copy(t.B, t.B[len(t.B)-(tailMax-len(p)):])]
	}
	t.B = append(t.B, p...)
}

// Member returns the top-level member key of a JSON answer: read from
// whole, the answer kept whole (see [Capture.Whole]), or else from the
// answer's tail (see [LastMember]).
func (t *Tap) Member(whole []byte, key string) gjson.Result {
	if whole != nil {
		return gjson.GetBytes(whole, key)
	}
	return LastMember(t.Tail.B, key)
}

// LastMember finds, in the end of a JSON document, the value of the last
// member named key whose value is an object, and returns it parsed; it
// returns a result that does not exist when there is none. The bytes
// need not start at the document's start: inside a JSON string a quote is
// escaped, so `"key":{` can only be a member's key, at any depth (a
// caller reads the last such member, which for usage is the top level's).
func LastMember(b []byte, key string) gjson.Result {
	quoted := `"` + key + `"`
	for end := len(b); ; {
		i := bytes.LastIndex(b[:end], []byte(quoted))
		if i < 0 {
			return gjson.Result{}
		}
		end = i
		if i > 0 && b[i-1] == '\\' {
			continue
		}
		s := Scanner{B: b, I: i + len(quoted)}
		s.WS()
		if s.Peek() != ':' {
			continue
		}
		s.I++
		s.WS()
		start := s.I
		if s.Peek() != '{' || s.Value(0) != nil {
			continue
		}
		return gjson.ParseBytes(b[start:s.I])
	}
}
