package wire

import (
	"strings"
	"testing"
)

// BenchmarkAppendJSONString escapes a guard block's text: lines of prose
// with a quoted error now and then, as NewBlock writes it on every
// request whose guard changed.
func BenchmarkAppendJSONString(b *testing.B) {
	line := `- [REPEATED 3x] RATE LIMIT (provider openai, last 12s ago): "Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM)". Do not retry at once: wait, or switch model.`
	text := strings.Repeat(line+"\n", 8)
	buf := make([]byte, 0, 2*len(text))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendJSONString(buf[:0], text)
	}
}
