package messages

import (
	"bytes"
	"strings"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// billingHeader opens the text block Claude Code sends first in system.
const billingHeader = "x-anthropic-billing-header:"

// Info implements [wire.Request].
func (r *request) Info() *wire.Info { return &r.info }

// Forwarded implements [wire.Request]: the memo keeps what was read, once
// the tool results are judged, and the request lets go of the body.
func (r *request) Forwarded(remember bool) {
	if remember && !r.ref.Forgotten() {
		r.remember()
		r.ref.Remembered()
	}
	r.body, r.elems, r.marks, r.calls, r.verdicts = nil, nil, wire.Chunks[mark]{}, wire.CallChunks[call]{}, wire.VerdictLog{}
	r.resume = wire.Resume[*turnState]{}
	r.info.DropBody()
}

// Forget implements [wire.Request].
func (r *request) Forget() { r.ref.Forget() }

// Inject implements [wire.Request]. With p.System the blocks go in front
// of the top-level system text, which is created when absent. Otherwise
// earlier blocks are only stripped from the system text, the recall block
// goes, framed, as a text block at the end of the first user message, and
// the turn's blocks, framed, as a text block at the end of the last user
// message (after its tool_result blocks, which Anthropic wants first): no
// byte before them changes, and the client's cache_control markers stay on
// the client's blocks.
func (r *request) Inject(dst, body []byte, p wire.Placement) ([]byte, error) {
	if p.System {
		return r.injectSystem(dst, body, p.Blocks())
	}
	return r.injectTurns(dst, body, p)
}

// injectSystem puts blocks in front of the system text.
func (r *request) injectSystem(dst, body []byte, blocks []wire.Block) ([]byte, error) {
	if out, done := wire.InjectMember(dst, body, r.system, "system", blocks); done {
		return out, nil
	}
	if raw := r.system.Raw(body); raw[0] == '[' {
		arr, changed, err := rewriteBlocks(gjson.ParseBytes(raw), blocks)
		if err != nil || !changed {
			return body, err
		}
		return wire.Splice(body, r.system.Start, r.system.End, arr), nil
	}
	// A system value the API does not define: leave the request as the
	// client sent it rather than replace the prompt.
	return body, nil
}

// injectTurns places p's blocks in the conversation's turns: the body is
// copied once, with at most three edits (the system text stripped, the
// first user message, the last one).
func (r *request) injectTurns(dst, body []byte, p wire.Placement) ([]byte, error) {
	edits := make(wire.Edits, 0, 3)
	if sys, changed, err := r.strippedSystem(body); err != nil {
		return body, err
	} else if changed {
		edits = append(edits, wire.Edit{From: r.system.Start, To: r.system.End, Text: sys})
	}
	one := [1]wire.Block{p.Recall}
	recall, turn := one[:], p.Turn
	if r.first == r.newest {
		edits = r.first.place(edits, body, recall, turn)
	} else {
		edits = r.first.place(edits, body, recall)
		edits = r.newest.place(edits, body, turn)
	}
	return edits.Apply(dst, body), nil
}

// strippedSystem returns the system value without earlier blocks, and
// whether that changed it. A value that holds no block's opening line is
// not decoded: the proxy escapes none of its bytes.
func (r *request) strippedSystem(body []byte) ([]byte, bool, error) {
	raw := r.system.Raw(body)
	if raw == nil || !r.systemBlocks.Holds(raw) {
		return nil, false, nil
	}
	switch raw[0] {
	case '"':
		old := gjson.ParseBytes(raw).Str
		if text := wire.Strip(old); text != old {
			return wire.AppendJSONString(nil, text), true, nil
		}
	case '[':
		return rewriteBlocks(gjson.ParseBytes(raw), nil)
	}
	return nil, false, nil
}

// place appends to edits the edit that ends the content c with frames,
// each the blocks of a text block of its own (after the frames of an
// earlier injection are taken out). A string content becomes an array of
// its text and the blocks, as Claude Code sends a user message with
// reminders: the API reads a string as that one text block. Content of
// another type is left as it is.
func (c content) place(edits wire.Edits, body []byte, frames ...[]wire.Block) wire.Edits {
	if !c.at.OK() {
		return edits
	}
	n := wire.FramedElemsLen(textOpen, textClose, frames...)
	switch body[c.at.Start] {
	case '[':
		if c.keep == c.end && n == 0 {
			return edits
		}
		return append(edits, wire.Edit{From: c.keep, To: c.end, Elems: wire.FramedElems{Comma: c.elems, Open: textOpen, Close: textClose, Frames: frames}})
	case '"':
		if n == 0 {
			return edits
		}
		raw := c.at.Raw(body)
		val := make([]byte, 0, len(`[{"type":"text","text":}`)+len(raw))
		val = append(val, '[')
		if len(raw) > 2 { // an empty text block is refused
			val = append(val, `{"type":"text","text":`...)
			val = append(val, raw...)
			val = append(val, '}')
		}
		elems := wire.FramedElems{Comma: len(raw) > 2, Open: textOpen, Close: textClose, Frames: frames}
		return append(edits, wire.Edit{From: c.at.Start, To: c.at.End, Text: val, Elems: elems, Tail: "]"})
	}
	return edits
}

// canMark reports whether a block of a system array can take a
// cache_control: an object without one.
func canMark(block []byte) bool {
	return len(block) > 0 && block[0] == '{' && !gjson.GetBytes(block, "cache_control").Exists()
}

// A text block, around the JSON escape of its text.
const (
	textOpen  = `{"type":"text","text":"`
	textClose = `"}`
)

// rewriteBlocks handles a system given as an array of content blocks: the
// new blocks become a text block of their own, first (after a leading
// billing header, which Claude Code sends as a text block of its own and
// which is no instruction to the model); earlier blocks are
// stripped from every text block. A text block that held only earlier
// blocks is dropped; its cache_control, if it had one, moves to the new
// text block, so the request keeps its cache breakpoints (never more).
// Without new blocks it moves to the block before (the cached prefix then
// ends on the same text), or else to the next block without one. Every
// other block keeps its bytes. It returns the new array and whether it
// changed.
func rewriteBlocks(arr gjson.Result, blocks []wire.Block) ([]byte, bool, error) {
	changed := !wire.Empty(blocks)
	var lead, kept [][]byte
	var moved []byte // cache_control of a dropped block
	var err error
	arr.ForEach(func(_, b gjson.Result) bool {
		raw := []byte(b.Raw)
		if len(kept) == 0 && len(lead) == 0 && strings.HasPrefix(b.Get("text").String(), billingHeader) {
			lead = append(lead, raw)
			return true
		}
		if t := b.Get("text"); b.Get("type").String() == "text" && t.Type == gjson.String {
			if stripped := wire.Strip(t.Str); stripped != t.Str {
				changed = true
				stripped = string(bytes.TrimLeft([]byte(stripped), "\n"))
				if stripped == "" {
					cc := b.Get("cache_control")
					switch {
					case !cc.Exists() || moved != nil:
					case wire.Empty(blocks) && len(kept)+len(lead) > 0:
						var prev *[]byte
						if len(kept) > 0 {
							prev = &kept[len(kept)-1]
						} else {
							prev = &lead[0]
						}
						if canMark(*prev) {
							*prev, err = sjson.SetRawBytes(*prev, "cache_control", []byte(cc.Raw))
							return err == nil
						}
						fallthrough
					default:
						moved = []byte(cc.Raw)
					}
					return true
				}
				if raw, err = sjson.SetBytes(raw, "text", stripped); err != nil {
					return false
				}
			}
		}
		if moved != nil && wire.Empty(blocks) && canMark(raw) {
			if raw, err = sjson.SetRawBytes(raw, "cache_control", moved); err != nil {
				return false
			}
			moved = nil
		}
		kept = append(kept, raw)
		return true
	})
	if err != nil || !changed {
		return nil, false, err
	}
	return systemArray(lead, kept, blocks, moved), true, nil
}

// systemArray is the rewritten system array: the leading billing header,
// then the blocks as a text block of their own (carrying moved, the
// cache_control of a dropped block, if any), then the blocks kept.
func systemArray(lead, kept [][]byte, blocks []wire.Block, moved []byte) []byte {
	out := []byte{'['}
	if len(lead) > 0 {
		out = append(out, lead[0]...)
		out = append(out, ',')
	}
	if !wire.Empty(blocks) {
		out = append(out, `{"type":"text","text":"`...)
		out = wire.AppendBlocks(out, blocks)
		out = append(out, '"')
		if moved != nil {
			out = append(out, `,"cache_control":`...)
			out = append(out, moved...)
		}
		out = append(out, '}')
		if len(kept) > 0 {
			out = append(out, ',')
		}
	}
	out = append(out, bytes.Join(kept, []byte{','})...)
	out = bytes.TrimSuffix(out, []byte{','})
	return append(out, ']')
}
