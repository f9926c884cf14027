package proxy

import (
	"strings"
	"testing"
)

// TestTextMemo: the memo gives what an incident would store without it
// (secrets redacted, long text capped), keeps messages up to its limit,
// and stays within its bytes.
func TestTextMemo(t *testing.T) {
	var tm textMemo
	msgs := []string{
		"Rate limit reached for gpt-4o in organization org-4f9a. Please try again in 2.4s.",
		"upstream rejected key sk-proj-" + strings.Repeat("a1B2c3D4", 6) + " (401)",
		strings.Repeat("traceback line\n", 600), // longer than maxMemoMessage
	}
	for round := range 2 {
		for _, m := range msgs {
			if got, want := tm.of(m), newIncidentText(m); got != want {
				t.Fatalf("round %d: memo %+v, want %+v", round, got, want)
			}
		}
	}
	if got := tm.of(msgs[1]).msg; strings.Contains(got, "a1B2c3D4a1B2") {
		t.Fatalf("secret kept: %q", got)
	}
	if len(tm.m) != 2 {
		t.Fatalf("memo holds %d messages, want the 2 short ones", len(tm.m))
	}
	for i := range 4000 {
		tm.of(strings.Repeat("x", 4000) + string(rune('a'+i%26)) + strings.Repeat("y", i))
		if tm.bytes > maxMemoBytes {
			t.Fatalf("memo holds %d bytes, more than %d", tm.bytes, maxMemoBytes)
		}
	}
}
