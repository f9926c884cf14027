package gemini

import (
	"bytes"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Info implements [wire.Request].
func (r *request) Info() *wire.Info { return &r.info }

// Forwarded implements [wire.Request]: the memo keeps what was read, once
// the tool results are judged, and the request lets go of the body.
func (r *request) Forwarded(remember bool) {
	if remember && !r.ref.Forgotten() {
		r.remember()
		r.ref.Remembered()
	}
	r.body, r.elems, r.marks, r.calls, r.verdicts, r.done = nil, nil, wire.Chunks[mark]{}, wire.CallChunks[call]{}, wire.VerdictLog{}, nil
	r.resume = wire.Resume[*turnState]{}
	r.info.DropBody()
}

// Forget implements [wire.Request].
func (r *request) Forget() { r.ref.Forget() }

// Inject implements [wire.Request]. With p.System the blocks go, as a text
// part of their own, in front of the parts of systemInstruction, which is
// created when absent. Otherwise earlier blocks are only stripped from the
// system instruction, the recall block goes, framed, as a text part at the
// end of the first user content, and the turn's blocks, framed, as a text
// part at the end of the last user content (after its function
// responses): no byte before them changes.
func (r *request) Inject(dst, body []byte, p wire.Placement) ([]byte, error) {
	if p.System {
		return r.injectSystem(body, p.Blocks())
	}
	return r.injectTurns(dst, body, p)
}

// injectSystem puts blocks in front of the system instruction's parts.
func (r *request) injectSystem(body []byte, blocks []wire.Block) ([]byte, error) {
	raw := r.system.Raw(body)
	switch {
	case raw == nil || raw[0] == 'n': // absent, or null
		if wire.Empty(blocks) {
			return body, nil
		}
		val := append([]byte(`{"parts":[`), blocksPart(blocks)...)
		val = append(val, "]}"...)
		if raw == nil {
			return insertFirst(body, r.systemKey, val), nil
		}
		return wire.Splice(body, r.system.Start, r.system.End, val), nil
	case raw[0] != '{':
		// A value the API does not define: leave the request as the
		// client sent it rather than replace the prompt.
		return body, nil
	}
	ps := gjson.GetBytes(raw, "parts")
	switch {
	case !ps.Exists():
		if wire.Empty(blocks) {
			return body, nil
		}
		val := append([]byte{'['}, blocksPart(blocks)...)
		sys, err := wire.SetMember(raw, "parts", append(val, ']'))
		if err != nil {
			return body, err
		}
		return wire.Splice(body, r.system.Start, r.system.End, sys), nil
	case !ps.IsArray():
		return body, nil
	}
	arr, changed, err := rewriteParts(ps, blocks)
	if err != nil || !changed {
		return body, err
	}
	at := r.system.Start + ps.Index
	return wire.Splice(body, at, at+len(ps.Raw), arr), nil
}

// injectTurns places p's blocks in the conversation's turns: the body is
// copied once, with at most three edits (the system instruction
// stripped, the first user content, the last one).
func (r *request) injectTurns(dst, body []byte, p wire.Placement) ([]byte, error) {
	edits := make(wire.Edits, 0, 3)
	if e, changed, err := r.strippedSystem(body); err != nil {
		return body, err
	} else if changed {
		edits = append(edits, e)
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

// strippedSystem returns the edit that takes earlier blocks out of the
// system instruction's parts, and whether there is one. Parts that hold
// no block's opening line are not decoded: the proxy escapes none of
// their bytes.
func (r *request) strippedSystem(body []byte) (wire.Edit, bool, error) {
	raw := r.system.Raw(body)
	if raw == nil || raw[0] != '{' || !r.systemBlocks.Holds(raw) {
		return wire.Edit{}, false, nil
	}
	ps := gjson.GetBytes(raw, "parts")
	if !ps.IsArray() {
		return wire.Edit{}, false, nil
	}
	arr, changed, err := rewriteParts(ps, nil)
	if err != nil || !changed {
		return wire.Edit{}, false, err
	}
	at := r.system.Start + ps.Index
	return wire.Edit{From: at, To: at + len(ps.Raw), Text: arr}, true, nil
}

// place appends to edits the edit that ends the parts p with frames,
// each the blocks of a text part of its own (after the frames of an
// earlier injection are taken out).
func (p parts) place(edits wire.Edits, body []byte, frames ...[]wire.Block) wire.Edits {
	n := wire.FramedElemsLen(partOpen, partClose, frames...)
	if !p.at.OK() || p.keep == p.end && n == 0 {
		return edits
	}
	return append(edits, wire.Edit{From: p.keep, To: p.end, Elems: wire.FramedElems{Comma: p.elems, Open: partOpen, Close: partClose, Frames: frames}})
}

// A text part, around the JSON escape of its text.
const (
	partOpen  = `{"text":"`
	partClose = `"}`
)

// blocksPart is one text part holding blocks, separated by blank lines;
// nothing when none has text.
func blocksPart(blocks []wire.Block) []byte {
	if wire.Empty(blocks) {
		return nil
	}
	out := append([]byte(partOpen), wire.AppendBlocks(nil, blocks)...)
	return append(out, partClose...)
}

// rewriteParts handles the parts of the system instruction: the new
// blocks become a text part of their own, first; earlier blocks are
// stripped from every text part, and a part that held only blocks is
// dropped. Every other part keeps its bytes. It returns the new array and
// whether it changed.
func rewriteParts(arr gjson.Result, blocks []wire.Block) ([]byte, bool, error) {
	changed := !wire.Empty(blocks)
	var kept [][]byte
	var err error
	arr.ForEach(func(_, part gjson.Result) bool {
		raw := []byte(part.Raw)
		if t := part.Get("text"); t.Type == gjson.String {
			if stripped := wire.Strip(t.Str); stripped != t.Str {
				changed = true
				stripped = string(bytes.TrimLeft([]byte(stripped), "\n"))
				if stripped == "" {
					return true
				}
				if raw, err = sjson.SetBytes(raw, "text", stripped); err != nil {
					return false
				}
			}
		}
		kept = append(kept, raw)
		return true
	})
	if err != nil || !changed {
		return nil, false, err
	}
	out := []byte{'['}
	out = append(out, blocksPart(blocks)...)
	if !wire.Empty(blocks) && len(kept) > 0 {
		out = append(out, ',')
	}
	out = append(out, bytes.Join(kept, []byte{','})...)
	return append(out, ']'), true, nil
}

// insertFirst adds the member "key": val first in the top-level object
// of body; body itself when it is not an object.
func insertFirst(body []byte, key string, val []byte) []byte {
	s := wire.Scanner{B: body}
	s.WS()
	if s.Peek() != '{' {
		return body
	}
	at := s.I + 1
	s.I++
	s.WS()
	ins := wire.AppendJSONString(nil, key)
	ins = append(ins, ':')
	ins = append(ins, val...)
	if s.Peek() != '}' {
		ins = append(ins, ',')
	}
	return wire.Splice(body, at, at, ins)
}

// hardStop sets the request's function calling mode to NONE: the
// functionCallingConfig of toolConfig (or tool_config) becomes
// {"mode":"NONE"} (its allowedFunctionNames, which the API refuses with
// that mode, go), and the rest of toolConfig stays.
func hardStop(body []byte) ([]byte, error) {
	none := []byte(`{"mode":"NONE"}`)
	sp, err := wire.Members(body, "toolConfig", "tool_config")
	if err != nil {
		return nil, err
	}
	key, at := "toolConfig", sp[0]
	switch {
	case sp[0].OK() && sp[1].OK():
		return nil, &wire.DuplicateKeyError{Key: "toolConfig"}
	case sp[1].OK():
		key, at = "tool_config", sp[1]
	}
	raw := at.Raw(body)
	if raw == nil || raw[0] != '{' {
		return wire.SetMember(body, key, []byte(`{"functionCallingConfig":{"mode":"NONE"}}`))
	}
	fsp, err := wire.Members(raw, "functionCallingConfig", "function_calling_config")
	if err != nil {
		return nil, err
	}
	var cfg []byte
	switch {
	case fsp[0].OK() && fsp[1].OK():
		return nil, &wire.DuplicateKeyError{Key: "functionCallingConfig"}
	case fsp[0].OK():
		cfg = wire.Splice(raw, fsp[0].Start, fsp[0].End, none)
	case fsp[1].OK():
		cfg = wire.Splice(raw, fsp[1].Start, fsp[1].End, none)
	default:
		if cfg, err = wire.SetMember(raw, "functionCallingConfig", none); err != nil {
			return nil, err
		}
	}
	return wire.Splice(body, at.Start, at.End, cfg), nil
}
