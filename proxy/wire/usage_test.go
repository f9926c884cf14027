package wire

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestOpenAIUsage(t *testing.T) {
	cases := []struct {
		name, usage string
		want        Usage
	}{
		{"chat", `{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,
			"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0},
			"completion_tokens_details":{"reasoning_tokens":0}}`,
			Usage{Input: 2006, Output: 300, CacheRead: 1920}},
		{"chat without cache details", `{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}`,
			Usage{Input: 9, Output: 12}},
		{"deepseek", `{"prompt_tokens":120,"completion_tokens":8,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":56}`,
			Usage{Input: 120, Output: 8, CacheRead: 64}},
		{"responses", `{"input_tokens":328,"input_tokens_details":{"cached_tokens":256},
			"output_tokens":52,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":380}`,
			Usage{Input: 328, Output: 52, CacheRead: 256}},
		{"negative counts", `{"prompt_tokens":-5,"completion_tokens":3}`, Usage{Output: 3}},
		{"strings are not counts", `{"prompt_tokens":"12"}`, Usage{}},
		{"null", `null`, Usage{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := OpenAIUsage(gjson.Parse(c.usage)); got != c.want {
				t.Errorf("OpenAIUsage = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestAnthropicUsage(t *testing.T) {
	// Anthropic's input_tokens leave out the tokens read from and written
	// to the cache: Input adds them back.
	got := AnthropicUsage(gjson.Parse(`{"input_tokens":3,"cache_creation_input_tokens":1200,
		"cache_read_input_tokens":17486,"cache_creation":{"ephemeral_5m_input_tokens":1200,"ephemeral_1h_input_tokens":0},
		"output_tokens":95,"service_tier":"standard"}`))
	want := Usage{Input: 3 + 1200 + 17486, Output: 95, CacheRead: 17486, CacheWrite: 1200}
	if got != want {
		t.Errorf("AnthropicUsage = %+v, want %+v", got, want)
	}
}

// A Messages stream says its usage twice: message_start carries the
// input counts with output_tokens 1, message_delta the final output
// count and, in newer versions of the API, the input counts again.
func TestAnthropicCountsOfAStream(t *testing.T) {
	var c AnthropicCounts
	c.Read(gjson.Parse(`{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":900,"output_tokens":1}`))
	c.Read(gjson.Parse(`{"output_tokens":57}`))
	if got, want := c.Usage(), (Usage{Input: 912, Output: 57, CacheRead: 900}); got != want {
		t.Errorf("after an old-style message_delta: %+v, want %+v", got, want)
	}
	c.Read(gjson.Parse(`{"input_tokens":12,"cache_creation_input_tokens":30,"cache_read_input_tokens":900,"output_tokens":60}`))
	if got, want := c.Usage(), (Usage{Input: 942, Output: 60, CacheRead: 900, CacheWrite: 30}); got != want {
		t.Errorf("after a message_delta with totals: %+v, want %+v", got, want)
	}
}

func TestLastMember(t *testing.T) {
	cases := []struct {
		name, doc string
		want      string // the member's raw value, "" for none
	}{
		{"compact", `{"id":"x","usage":{"prompt_tokens":1}}`, `{"prompt_tokens":1}`},
		{"pretty", "{\n  \"usage\" :\n  {\n    \"prompt_tokens\": 1\n  },\n  \"system_fingerprint\": null\n}", "{\n    \"prompt_tokens\": 1\n  }"},
		{"the last of several", `{"a":{"usage":{"n":1}},"usage":{"n":2}}`, `{"n":2}`},
		{"a quoted usage in a string", `{"content":"say \"usage\":{\"n\":9}","usage":{"n":1}}`, `{"n":1}`},
		{"only a quoted one", `{"content":"say \"usage\":{\"n\":9}"}`, ``},
		{"a string value", `{"type":"usage","usage":"none"}`, ``},
		{"cut inside the object", `{"usage":{"n":1,"m":`, ``},
		{"a tail that starts mid-document", `tokens":4},"usage":{"n":3}}`, `{"n":3}`},
		{"none", `{"id":"x"}`, ``},
		{"empty", ``, ``},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := LastMember([]byte(c.doc), "usage")
			if got.Raw != c.want {
				t.Errorf("LastMember = %q, want %q", got.Raw, c.want)
			}
		})
	}
}

// A tap keeps the end of a JSON answer too long to keep whole, and reads
// its usage from there, whatever the sizes of the chunks it came in.
func TestTapUsageOfALongAnswer(t *testing.T) {
	answer := `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("ab\\\"usage\\\":{} ", 20000) + `"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":4000,"completion_tokens":70000,"prompt_tokens_details":{"cached_tokens":3968}}}`
	want := Usage{Input: 4000, Output: 70000, CacheRead: 3968}
	for _, chunk := range []int{1, 7, 512, 4096, 5000, 32 << 10, len(answer)} {
		tap := NewTap(false, 1024) // keeps too little to hold it whole
		for b := []byte(answer); len(b) > 0; {
			n := min(chunk, len(b))
			tap.Write(b[:n])
			b = b[n:]
		}
		if len(tap.Tail.B) > 2*tailMax {
			t.Fatalf("chunks of %d: the tail kept %d bytes", chunk, len(tap.Tail.B))
		}
		whole := tap.Capture.Whole()
		if whole != nil {
			t.Fatalf("chunks of %d: kept whole", chunk)
		}
		if got := OpenAIUsage(tap.Member(whole, "usage")); got != want {
			t.Errorf("chunks of %d: usage %+v, want %+v", chunk, got, want)
		}
	}
}
