package wire

import (
	"bytes"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// TestSystemMemo: the memory of system values gives what decoding gives,
// only for the same bytes, within its bounds, and the conversation key
// begun with the stripped text; concurrently (with -race).
func TestSystemMemo(t *testing.T) {
	decodes := 0
	decode := func(raw []byte) string { decodes++; return gjson.ParseBytes(raw).String() }
	m := NewSystemMemo(decode, StripFramed)
	text := func(raw []byte) string {
		s, _ := m.Text(raw)
		return s
	}
	system := "You are a coding agent.\n" + strings.Repeat("Follow the rules.\t", 200)
	raw := AppendJSONString(nil, system)
	if len(raw) < systemMinBytes || text(raw) != system || text(bytes.Clone(raw)) != system || len(m.entries) != 1 || decodes != 1 {
		t.Fatalf("%d entries, %d decodes", len(m.entries), decodes)
	}
	if _, start := m.Text(raw); start == nil || start.Key("fix the build") != recall.ConversationKey(StripFramed(system), "fix the build") {
		t.Fatal("the key begun with the system text is not the conversation's")
	}
	// A small value is decoded every time, not remembered.
	if s, start := m.Text([]byte(`"short"`)); s != "short" || start != nil || len(m.entries) != 1 {
		t.Fatal("a short value was remembered")
	}
	// Another value under the same key is not taken for it.
	other := bytes.Replace(raw, []byte("coding"), []byte("cooking"), 1)
	m.add(maphash.Bytes(m.seed, other), &systemText{raw: raw, text: "wrong"})
	if got := text(other); got != gjson.ParseBytes(other).String() || got == "wrong" {
		t.Fatalf("another system value read as %.40q", got)
	}
	// Bounded in entries (and so in bytes, here).
	for i := range 2 * systemEntries {
		v := AppendJSONString(nil, strings.Repeat("x", systemMinBytes)+strconv.Itoa(i))
		if got := text(v); got != gjson.ParseBytes(v).String() {
			t.Fatal("a remembered text differs")
		}
	}
	if len(m.entries) != systemEntries || len(m.order) != systemEntries || m.bytes > systemMaxBytes {
		t.Fatalf("%d entries, %d in order, %d bytes", len(m.entries), len(m.order), m.bytes)
	}
	// Concurrent readers of the same and of other values.
	c := NewSystemMemo(func(raw []byte) string { return gjson.ParseBytes(raw).String() }, StripFramed)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				v := AppendJSONString(nil, system+strconv.Itoa((g+i)%3))
				if s, _ := c.Text(v); s != system+strconv.Itoa((g+i)%3) {
					t.Error("a concurrent read differs")
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestBlockCheck: a system value is scanned for blocks' openings once;
// both kinds of block are found.
func TestBlockCheck(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want bool
	}{
		{`"You are a coding agent. ### Tools\nUse them."`, false},
		{`"You are a coding agent.\n\n### !!! REPEATED FAILURE\nx"`, true},
		{`[{"type":"text","text":"x"},{"type":"text","text":"` + recall.BlockStart + `\nfix"}]`, true},
	} {
		var c BlockCheck
		raw := []byte(tc.raw)
		if got := c.Holds(raw); got != tc.want {
			t.Errorf("Holds(%s) = %v, want %v", tc.raw, got, tc.want)
		}
		// The answer is kept: the bytes are not scanned again (a turn
		// that takes the check has the same bytes).
		clear(raw)
		if got := c.Holds(raw); got != tc.want {
			t.Errorf("Holds(%s), asked again, = %v", tc.raw, got)
		}
	}
}
