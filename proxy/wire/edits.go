package wire

import (
	"cmp"
	"slices"
)

// Edit replaces Body[From:To] with Text.
type Edit struct {
	From, To int
	Text     []byte
}

// Edits are the changes to a body, applied in one copy. Edits must not
// overlap; of two at the same offset, the one added first goes first.
type Edits []Edit

// Add adds the edit that replaces body[from:to] with text.
func (e *Edits) Add(from, to int, text []byte) { *e = append(*e, Edit{from, to, text}) }

// Apply returns body with the edits made, appended to dst[:0] (dst may be
// nil), or body itself when there are none.
func (e Edits) Apply(dst, body []byte) []byte {
	if len(e) == 0 {
		return body
	}
	slices.SortStableFunc(e, func(a, b Edit) int { return cmp.Compare(a.From, b.From) })
	n := len(body)
	for _, x := range e {
		n += len(x.Text) - (x.To - x.From)
	}
	out := slices.Grow(dst[:0], n)
	pos := 0
	for _, x := range e {
		out = append(out, body[pos:x.From]...)
		out = append(out, x.Text...)
		pos = x.To
	}
	return append(out, body[pos:]...)
}
