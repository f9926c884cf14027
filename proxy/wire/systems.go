package wire

import (
	"bytes"
	"hash/maphash"
	"sync"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/recall"
)

// SystemMemo remembers the text of the system values read lately, by
// their bytes. An agent sends the same one on every request of every run
// (the Gemini CLI's system instruction is about 30 KB with an escape
// every few bytes, qwen-code's system message 38 KB, Claude Code's system
// blocks 27 KB), and a conversation's first turn, which no turn memo
// knows yet, would decode it and hash it for the conversation's key. What
// it keeps is bounded in entries and in bytes; the oldest entry goes
// first. The text is a function of the bytes alone: tenants share it. It
// is safe for concurrent use; make one with NewSystemMemo.
type SystemMemo struct {
	seed   maphash.Seed
	decode func(raw []byte) string
	strip  func(text string) string

	mu      sync.Mutex
	entries map[uint64]*systemText // never changed once added
	order   []uint64               // the keys of entries, oldest first
	bytes   int                    // of the entries' raw values and texts
}

// systemText is one system value: its bytes as they stood in a body (a
// copy), its text, and the conversation key begun with the text (blocks
// stripped), which each request ends with its task.
type systemText struct {
	raw   []byte
	text  string
	start recall.KeyStart
}

// Bounds of SystemMemo, and the smallest value it remembers (a small one
// decodes as fast as it is looked up).
const (
	systemEntries  = 256
	systemMaxBytes = 16 << 20
	systemMinBytes = 1 << 10
)

// NewSystemMemo returns an empty memo of the texts decode gives, whose
// conversation keys begin with strip's text (the format's key is
// recall.ConversationKey(strip(text), goal)).
func NewSystemMemo(decode func(raw []byte) string, strip func(text string) string) *SystemMemo {
	return &SystemMemo{seed: maphash.MakeSeed(), decode: decode, strip: strip, entries: make(map[uint64]*systemText)}
}

// Text returns the text of a system value, raw being its JSON value: what
// decode gives, remembered, with the conversation key begun with it (nil
// when not remembered).
func (m *SystemMemo) Text(raw []byte) (string, *recall.KeyStart) {
	if len(raw) < systemMinBytes {
		return m.decode(raw), nil
	}
	key := maphash.Bytes(m.seed, raw)
	m.mu.Lock()
	e := m.entries[key]
	m.mu.Unlock()
	if e != nil && bytes.Equal(e.raw, raw) {
		return e.text, &e.start
	}
	t := m.decode(raw)
	e = &systemText{raw: bytes.Clone(raw), text: t, start: recall.StartKey(m.strip(t))}
	m.add(key, e)
	return t, &e.start
}

// add remembers e under key, in place of what key held, and forgets the
// oldest entries past the bounds.
func (m *SystemMemo) add(key uint64, e *systemText) {
	size := len(e.raw) + len(e.text)
	if size > systemMaxBytes/4 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.entries[key]; ok {
		m.bytes -= len(old.raw) + len(old.text)
	} else {
		m.order = append(m.order, key)
	}
	m.entries[key] = e
	m.bytes += size
	for len(m.entries) > systemEntries || m.bytes > systemMaxBytes {
		oldest := m.order[0]
		m.order = m.order[1:]
		if old, ok := m.entries[oldest]; ok {
			m.bytes -= len(old.raw) + len(old.text)
			delete(m.entries, oldest)
		}
	}
}

// BlockCheck is whether a system value holds the opening of a block of
// the proxy's (a guard's, a STOP's, a recall block's), which placing
// blocks takes out first: not known yet, or known. A format keeps it with
// a remembered turn and a turn whose system value is the same bytes takes
// it, so that a conversation's system value (30 KB for the agents') is
// scanned once, not on every request that carries a block.
type BlockCheck uint8

const (
	blocksUnchecked BlockCheck = iota
	blocksNone
	blocksHeld
)

// Holds reports whether raw, the system value c is about, holds a
// block's opening; only the first call scans it.
func (c *BlockCheck) Holds(raw []byte) bool {
	if *c == blocksUnchecked {
		*c = blocksNone
		if bytes.Contains(raw, []byte(guard.MarkerOpen)) || bytes.Contains(raw, []byte(recall.BlockStart)) {
			*c = blocksHeld
		}
	}
	return *c == blocksHeld
}
