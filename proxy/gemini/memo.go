package gemini

import (
	"bytes"
	"hash/maphash"
	"sync"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// systemMemo remembers the text of the system instructions read lately,
// by their bytes. An agent sends the same one on every request (the
// Gemini CLI's is about 30 KB, with an escape every few bytes), and
// decoding it is most of what reading a request costs. What it keeps is
// bounded in entries and in bytes; the oldest entry goes first. It is
// safe for concurrent use; make one with newSystemMemo.
type systemMemo struct {
	seed maphash.Seed

	mu      sync.Mutex
	entries map[uint64]*memoText // never changed once added
	order   []uint64             // the keys of entries, oldest first
	bytes   int                  // of the entries' raw values and texts
}

// memoText is one system instruction: its value as it stood in a body (a
// copy), its text, and the conversation key begun with the text (blocks
// stripped), which each request ends with its task: hashing the text
// again on every request cost as much as the rest of reading it.
type memoText struct {
	raw   []byte
	text  string
	start recall.KeyStart
}

// Bounds of the memo, and the smallest value it remembers (a small one
// decodes as fast as it is looked up).
const (
	memoEntries  = 256
	memoMaxBytes = 16 << 20
	memoMinBytes = 1 << 10
)

func newSystemMemo() *systemMemo {
	return &systemMemo{seed: maphash.MakeSeed(), entries: make(map[uint64]*memoText)}
}

// text returns the text of a system instruction, raw being its JSON
// value: what systemText gives, remembered, with the conversation key
// begun with it (nil when not remembered). A nil memo remembers nothing.
func (m *systemMemo) text(raw []byte) (string, *recall.KeyStart) {
	if m == nil || len(raw) < memoMinBytes {
		return systemText(raw), nil
	}
	key := maphash.Bytes(m.seed, raw)
	m.mu.Lock()
	e := m.entries[key]
	m.mu.Unlock()
	if e != nil && bytes.Equal(e.raw, raw) {
		return e.text, &e.start
	}
	t := systemText(raw)
	e = &memoText{raw: bytes.Clone(raw), text: t, start: recall.StartKey(wire.Strip(t))}
	m.add(key, e)
	return t, &e.start
}

// add remembers e under key, in place of what key held, and forgets the
// oldest entries past the bounds.
func (m *systemMemo) add(key uint64, e *memoText) {
	size := len(e.raw) + len(e.text)
	if size > memoMaxBytes/4 {
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
	for len(m.entries) > memoEntries || m.bytes > memoMaxBytes {
		oldest := m.order[0]
		m.order = m.order[1:]
		if old, ok := m.entries[oldest]; ok {
			m.bytes -= len(old.raw) + len(old.text)
			delete(m.entries, oldest)
		}
	}
}

// systemText is the text of a system instruction, raw being its JSON
// value: the text of its parts (see partsText); "" for a value that is
// not an object.
func systemText(raw []byte) string {
	if sys := gjson.ParseBytes(raw); sys.IsObject() {
		return partsText(sys.Get("parts"))
	}
	return ""
}
