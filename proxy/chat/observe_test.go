package chat

import (
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/proxy/wire"
)

// chunk is one event of a chat completion stream.
func chunk(delta string) string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
}

func TestObserve(t *testing.T) {
	usage := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":2006,"completion_tokens":3,"total_tokens":2009,"prompt_tokens_details":{"cached_tokens":1920}}}` + "\n\n"
	stop := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	calls := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n"
	text := chunk(`{"role":"assistant","content":"Hello "}`) + chunk(`{"content":"world"}`)
	tool := chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"sh","arguments":""}}]}`) +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`) +
		chunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"sh","arguments":"{}"}}]}`)
	used := wire.Usage{Input: 2006, Output: 3, CacheRead: 1920}
	tests := []struct {
		name   string
		sse    bool
		answer string
		want   wire.Outcome
	}{
		{"final answer with usage", true, text + stop + usage + "data: [DONE]\n\n", wire.Outcome{Final: true, Answer: "Hello world", Usage: used}},
		{"tool calls", true, tool + calls + "data: [DONE]\n\n", wire.Outcome{FirstCall: "call_1"}},
		{"cut before [DONE]", true, text + usage, wire.Outcome{Failure: "stream ended before data: [DONE]", Usage: used}},
		{"error event", true, text + "data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n", wire.Outcome{Failure: "overloaded"}},
		{"JSON final", false, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1}}`,
			wire.Outcome{Final: true, Answer: "done", Usage: wire.Usage{Input: 9, Output: 1}}},
		{"JSON tool call", false, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"sh","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			wire.Outcome{FirstCall: "call_9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int{1, 7, len(tt.answer)} {
				o := newObserver(tt.sse, 1<<20)
				for b := tt.answer; b != ""; {
					n := min(size, len(b))
					o.Write([]byte(b[:n]))
					b = b[n:]
				}
				if got := o.Outcome(); got != tt.want {
					t.Fatalf("in chunks of %d: outcome %+v, want %+v", size, got, tt.want)
				}
			}
		})
	}
}

// A JSON answer kept by nobody (no capture wanted) still says its usage,
// read from its tail; a pretty-printed one too.
func TestObserveUsageOfAnAnswerNotKept(t *testing.T) {
	answer := "{\n  \"id\": \"chatcmpl-1\",\n  \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assistant\", \"content\": \"" +
		strings.Repeat("x", 10000) + "\"}, \"finish_reason\": \"stop\"}],\n  \"usage\": {\n    \"prompt_tokens\": 1200,\n    \"completion_tokens\": 2500,\n    \"prompt_tokens_details\": {\"cached_tokens\": 1152}\n  }\n}\n"
	o := newObserver(false, 0)
	o.Write([]byte(answer))
	if got, want := o.Outcome(), (wire.Outcome{Usage: wire.Usage{Input: 1200, Output: 2500, CacheRead: 1152}}); got != want {
		t.Fatalf("outcome %+v, want %+v", got, want)
	}
}
