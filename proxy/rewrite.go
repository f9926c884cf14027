package proxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// compose puts blocks before text, separated by a blank line.
func compose(blocks, text string) string {
	blocks = strings.TrimRight(blocks, "\n")
	switch {
	case blocks == "":
		return text
	case text == "":
		return blocks
	}
	return blocks + "\n\n" + text
}

// block is a text the proxy puts before the system prompt (a guard or a
// recall block), with its escape as a JSON string. The escape is made
// once, with the block: the caches hand the same block to every request
// of a tenant or conversation.
type block struct {
	text string // as made (the previews show it)
	json []byte // the text without its trailing newlines, escaped, without quotes
}

func newBlock(text string) block {
	trimmed := strings.TrimRight(text, "\n")
	if trimmed == "" {
		return block{text: text}
	}
	esc := appendJSONString(nil, trimmed)
	return block{text: text, json: esc[1 : len(esc)-1]}
}

// joinBlocks is the text of blocks in order, without their trailing
// newlines, separated by blank lines.
func joinBlocks(blocks []block) string {
	text := ""
	for _, b := range blocks {
		if len(b.json) > 0 {
			text = compose(text, strings.TrimRight(b.text, "\n"))
		}
	}
	return text
}

// appendBlocks appends the JSON escape of joinBlocks(blocks), without
// quotes.
func appendBlocks(dst []byte, blocks []block) []byte {
	first := true
	for _, b := range blocks {
		if len(b.json) == 0 {
			continue
		}
		if !first {
			dst = append(dst, `\n\n`...)
		}
		first = false
		dst = append(dst, b.json...)
	}
	return dst
}

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
func injectSystem(dst, body []byte, conv *conversation, parts ...block) ([]byte, error) {
	none := true
	for _, b := range parts {
		none = none && len(b.json) == 0
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
		ins = appendBlocks(ins, parts)
		ins = append(ins, `"}`...)
		if len(cs.msgs) > 0 {
			ins = append(ins, ',')
		}
		return splice(body, at, at, ins), nil
	}
	m := &cs.msgs[idx]
	if !m.content.ok() {
		if none {
			return body, nil
		}
		// No content field: add one first in the object (it has a role).
		ins := appendBlocks([]byte(`"content":"`), parts)
		ins = append(ins, `",`...)
		return splice(body, m.start+1, m.start+1, ins), nil
	}
	c := m.content
	raw := body[c.start:c.end]
	switch raw[0] {
	case '"':
		old := conv.system // the text of this very content
		stripped := stripBlocks(old)
		if stripped == old { // no earlier block to take out
			if none {
				return body, nil
			}
			// blocks + "\n\n" + old, keeping old's bytes as they came.
			out := dst[:0]
			out = append(out, body[:c.start+1]...)
			out = appendBlocks(out, parts)
			if len(raw) > 2 {
				out = append(out, `\n\n`...)
			}
			out = append(out, raw[1:]...)
			return append(out, body[c.end:]...), nil
		}
		text := compose(joinBlocks(parts), stripped)
		if text == old {
			return body, nil
		}
		return splice(body, c.start, c.end, appendJSONString(nil, text)), nil
	case '[':
		arr, changed, err := rewriteParts(parseRaw(raw), joinBlocks(parts))
		if err != nil || !changed {
			return body, err
		}
		return splice(body, c.start, c.end, arr), nil
	case 'n': // null
		if none {
			return body, nil
		}
		val := appendBlocks([]byte{'"'}, parts)
		return splice(body, c.start, c.end, append(val, '"')), nil
	}
	// A content the API does not define (object, number...): leave the
	// request as the client sent it rather than replace the prompt.
	return body, nil
}

// splice returns a new body: body with body[from:to] replaced by val.
func splice(body []byte, from, to int, val []byte) []byte {
	out := make([]byte, 0, len(body)-(to-from)+len(val))
	out = append(out, body[:from]...)
	out = append(out, val...)
	return append(out, body[to:]...)
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does; unlike it, HTML characters are not
// escaped (the body is JSON, never HTML).
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// rewriteParts handles content given as an array of parts: earlier blocks
// are stripped from every text part and the new blocks become a text part
// of their own, first. It returns the new array and whether it changed.
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
			if stripped := stripBlocks(t.Str); stripped != t.Str {
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
