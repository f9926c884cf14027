package memory

import (
	"hash/maphash"
	"strconv"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
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

// TestToolVerdictsAreRemembered: an output judged once is not judged
// again (its verdict is what guard.ToolFailed said of it), per workspace,
// and the verdicts are bounded.
func TestToolVerdictsAreRemembered(t *testing.T) {
	s := newSeenSet(4)
	outputs := []string{
		"Traceback (most recent call last):\n  File \"x.py\", line 1\nZeroDivisionError: division by zero",
		"ok  \tgithub.com/acme/app\t0.412s",
		"exit status 1\nmake: *** [all] Error 2",
		"",
	}
	for _, o := range outputs {
		if got, want := s.toolFailed("w", o), guard.ToolFailed(o); got != want {
			t.Fatalf("%q: %v, guard.ToolFailed says %v", o, got, want)
		}
	}
	// What is remembered is what is answered: set a verdict by hand and
	// read it back for that workspace only.
	k := func(ws, text string) uint64 {
		var h maphash.Hash
		h.SetSeed(s.seed)
		h.WriteString(ws)
		h.WriteByte(0)
		h.WriteString(text)
		return h.Sum64()
	}
	if _, ok := s.verdicts.get(k("w", outputs[0])); !ok {
		t.Fatal("a verdict was not remembered")
	}
	s.verdicts.put(k("w", outputs[1]), true)
	if !s.toolFailed("w", outputs[1]) {
		t.Fatal("an output was judged again")
	}
	if s.toolFailed("other", outputs[1]) {
		t.Fatal("a verdict crossed workspaces")
	}
	for i := range 3 * maxVerdicts {
		s.toolFailed("w", strconv.Itoa(i))
	}
	if n := s.verdicts.len(); n > 2*maxVerdicts {
		t.Fatalf("%d verdicts held, at most %d", n, 2*maxVerdicts)
	}
}

// TestSeenSetIsPerTenantAndBounded: a tool result is known per tenant,
// conversation and key, and the set forgets in two generations.
func TestSeenSetIsPerTenantAndBounded(t *testing.T) {
	s := newSeenSet(4)
	a := s.key("w", "p", "c", "call:1")
	if a == s.key("w", "p2", "c", "call:1") || a == s.key("w\x00p", "", "c", "call:1") || a == s.key("w", "p", "c2", "call:1") || a != s.key("w", "p", "c", "call:1") {
		t.Fatal("keys do not follow the tenant and dedupe key")
	}
	s.add(a, true)
	if failed, ok := s.get(a); !ok || !failed {
		t.Fatalf("get = %v, %v", failed, ok)
	}
	// Four more fill the current generation: a moves to the previous one
	// and is still known (read, it is the newest again); two generations
	// more and it is forgotten.
	for i := range 4 {
		s.add(s.key("w", "p", "", "hash:"+strconv.Itoa(i)), false)
	}
	if _, ok := s.get(a); !ok {
		t.Fatal("forgotten one generation early")
	}
	for i := range 8 {
		s.add(s.key("w", "p", "", "hash:x"+strconv.Itoa(i)), false)
	}
	if _, ok := s.get(a); ok {
		t.Fatal("the set is not bounded")
	}
	if s.set.len() > 8 {
		t.Fatalf("%d keys held, at most 8", s.set.len())
	}
}
