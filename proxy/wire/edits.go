package wire

import (
	"cmp"
	"slices"
)

// Edit replaces Body[From:To] with Text, then Elems, then Tail.
type Edit struct {
	From, To int
	Text     []byte
	Elems    FramedElems // written where the edit is applied: none when it has no frames
	Tail     string
}

// FramedElems are frames of blocks as elements of a JSON array (see
// AppendFramedElems), written by Edits.Apply where they go: a format's
// blocks are copied into the body once, not first into an edit of their
// own.
type FramedElems struct {
	Comma       bool // a comma before the first element
	Open, Close string
	Frames      [][]Block
}

// Len is the most the elements take (0: no frame has text, and nothing
// is written).
func (f *FramedElems) Len() int {
	if len(f.Frames) == 0 {
		return 0
	}
	return FramedElemsLen(f.Open, f.Close, f.Frames...)
}

// AppendTo appends the elements to dst.
func (f *FramedElems) AppendTo(dst []byte) []byte {
	if len(f.Frames) == 0 {
		return dst
	}
	return AppendFramedElems(dst, f.Comma, f.Open, f.Close, f.Frames...)
}

// Edits are the changes to a body, applied in one copy. Edits must not
// overlap; of two at the same offset, the one added first goes first.
type Edits []Edit

// Add adds the edit that replaces body[from:to] with text.
func (e *Edits) Add(from, to int, text []byte) { *e = append(*e, Edit{From: from, To: to, Text: text}) }

// AddElems adds the edit that replaces body[from:to] with text, the
// elements and tail.
func (e *Edits) AddElems(from, to int, text []byte, elems FramedElems, tail string) {
	*e = append(*e, Edit{From: from, To: to, Text: text, Elems: elems, Tail: tail})
}

// Apply returns body with the edits made, appended to dst[:0] (dst may be
// nil), or body itself when there are none.
func (e Edits) Apply(dst, body []byte) []byte {
	if len(e) == 0 {
		return body
	}
	slices.SortStableFunc(e, func(a, b Edit) int { return cmp.Compare(a.From, b.From) })
	n := len(body)
	for i := range e {
		x := &e[i]
		n += len(x.Text) + x.Elems.Len() + len(x.Tail) - (x.To - x.From)
	}
	out := slices.Grow(dst[:0], n)
	pos := 0
	for i := range e {
		x := &e[i]
		out = append(out, body[pos:x.From]...)
		out = append(out, x.Text...)
		out = x.Elems.AppendTo(out)
		out = append(out, x.Tail...)
		pos = x.To
	}
	return append(out, body[pos:]...)
}
