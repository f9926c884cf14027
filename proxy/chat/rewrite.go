package chat

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// injectSystem returns body with blocks prepended to the conversation's
// system message, after stripping the blocks an earlier turn may have left
// there. conv is inspect(body). It handles string content, content as an
// array of parts, a "developer" message in place of "system", and no
// system message at all (one is inserted first). When nothing changes it
// returns body itself, so the provider receives the client's exact bytes.
// Otherwise only the system message's content changes: every other byte
// of the body is copied as it came.
//
// A new body is appended to dst[:0], which may be nil: the common case (a
// system message of string content) needs no other allocation when dst
// has room for the body and the escaped blocks.
func injectSystem(dst, body []byte, conv *conversation, parts ...wire.Block) ([]byte, error) {
	none := true
	for _, b := range parts {
		none = none && len(b.JSON) == 0
	}
	cs := &conv.scan
	if !cs.messages.ok() || body[cs.messages.start] != '[' {
		return body, nil
	}
	idx := cs.systemIndex()
	if idx < 0 {
		if none || cs.truncated {
			// Past the scan's caps a system message may go unseen: do not
			// add a second one.
			return body, nil
		}
		// A new system message, first in the array.
		at := cs.messages.start + 1
		ins := []byte(`{"role":"system","content":"`)
		ins = wire.AppendBlocks(ins, parts)
		ins = append(ins, `"}`...)
		if len(cs.msgs) > 0 {
			ins = append(ins, ',')
		}
		return wire.Splice(body, at, at, ins), nil
	}
	m := &cs.msgs[idx]
	if !m.content.ok() {
		if none {
			return body, nil
		}
		// No content field: add one first in the object (it has a role).
		ins := wire.AppendBlocks([]byte(`"content":"`), parts)
		ins = append(ins, `",`...)
		return wire.Splice(body, m.start+1, m.start+1, ins), nil
	}
	c := m.content
	raw := body[c.start:c.end]
	switch raw[0] {
	case '"':
		// conv.info.System is the text of this very content.
		return wire.InjectString(dst, body, wire.Span{Start: c.start, End: c.end}, conv.info.System, parts), nil
	case '[':
		arr, changed, err := rewriteParts(parseRaw(raw), wire.JoinBlocks(parts))
		if err != nil || !changed {
			return body, err
		}
		return wire.Splice(body, c.start, c.end, arr), nil
	case 'n': // null
		if none {
			return body, nil
		}
		val := wire.AppendBlocks([]byte{'"'}, parts)
		return wire.Splice(body, c.start, c.end, append(val, '"')), nil
	}
	// A content the API does not define (object, number...): leave the
	// request as the client sent it rather than replace the prompt.
	return body, nil
}

// rewriteParts handles content given as an array of parts: earlier blocks,
// framed or not, are stripped from every text part and the new blocks
// become a text part of their own, first. It returns the new array and
// whether it changed.
func rewriteParts(parts gjson.Result, blocks string) ([]byte, bool, error) {
	changed := blocks != ""
	var out bytes.Buffer
	out.WriteByte('[')
	n := 0
	if blocks != "" {
		b, _ := json.Marshal(textPart{Type: "text", Text: blocks})
		out.Write(b)
		n++
	}
	var err error
	parts.ForEach(func(_, part gjson.Result) bool {
		raw := []byte(part.Raw)
		if t := part.Get("text"); t.Type == gjson.String {
			if stripped := wire.StripFramed(t.Str); stripped != t.Str {
				changed = true
				stripped = strings.TrimLeft(stripped, "\n")
				if stripped == "" {
					return true // the part held only old blocks
				}
				if raw, err = sjson.SetBytes(raw, "text", stripped); err != nil {
					return false
				}
			}
		}
		if n > 0 {
			out.WriteByte(',')
		}
		out.Write(raw)
		n++
		return true
	})
	if err != nil || !changed {
		return nil, false, err
	}
	out.WriteByte(']')
	return out.Bytes(), true, nil
}

type textPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}
