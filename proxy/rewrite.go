package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// hasMarker reports whether text may hold a block to strip.
func hasMarker(text string) bool {
	return strings.Contains(text, guard.BlockStart) || strings.Contains(text, recall.BlockStart)
}

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

// injectSystem returns body with blocks prepended to the conversation's
// system message, after stripping the blocks an earlier turn may have left
// there. It handles string content, content as an array of parts, a
// "developer" message in place of "system", and no system message at all
// (one is inserted first). When nothing changes it returns body itself, so
// the provider receives the client's exact bytes. body must be valid JSON.
func injectSystem(body []byte, blocks string) ([]byte, error) {
	blocks = strings.TrimRight(blocks, "\n")
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return body, nil
	}
	idx := -1
	var sys gjson.Result
	i := 0
	msgs.ForEach(func(_, m gjson.Result) bool {
		if r := m.Get("role").String(); r == "system" || r == "developer" {
			idx, sys = i, m
			return false
		}
		i++
		return true
	})
	if idx < 0 {
		if blocks == "" {
			return body, nil
		}
		return insertSystem(body, msgs, blocks)
	}
	path := "messages." + strconv.Itoa(idx) + ".content"
	content := sys.Get("content")
	switch {
	case content.Type == gjson.String:
		old := content.Str
		text := old
		if hasMarker(text) {
			text = stripBlocks(text)
		}
		text = compose(blocks, text)
		if text == old {
			return body, nil
		}
		return replaceValue(body, path, content, text)
	case content.IsArray():
		return rewriteParts(body, path, content, blocks)
	case !content.Exists() || content.Type == gjson.Null:
		if blocks == "" {
			return body, nil
		}
		return sjson.SetBytes(body, path, blocks)
	default:
		// A content the API does not define (object, number...): leave the
		// request as the client sent it rather than replace the prompt.
		return body, nil
	}
}

// replaceValue returns body with the JSON value v (found in body) replaced
// by the string s. It splices at v's offset when gjson reports one that
// holds v's exact bytes, which spares sjson's second walk of the body, and
// falls back to sjson otherwise.
func replaceValue(body []byte, path string, v gjson.Result, s string) ([]byte, error) {
	i, n := v.Index, len(v.Raw)
	if i <= 0 || i+n > len(body) || string(body[i:i+n]) != v.Raw {
		return sjson.SetBytes(body, path, s)
	}
	quoted, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(body)-n+len(quoted))
	out = append(out, body[:i]...)
	out = append(out, quoted...)
	return append(out, body[i+n:]...), nil
}

// rewriteParts handles content given as an array of parts: earlier blocks
// are stripped from every text part and the new blocks become a text part
// of their own, first.
func rewriteParts(body []byte, path string, parts gjson.Result, blocks string) ([]byte, error) {
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
		if t := part.Get("text"); t.Type == gjson.String && hasMarker(t.Str) {
			changed = true
			stripped := strings.TrimLeft(stripBlocks(t.Str), "\n")
			if stripped == "" {
				return true // the part held only old blocks
			}
			if raw, err = sjson.SetBytes(raw, "text", stripped); err != nil {
				return false
			}
		}
		if n > 0 {
			out.WriteByte(',')
		}
		out.Write(raw)
		n++
		return true
	})
	if err != nil {
		return nil, err
	}
	if !changed {
		return body, nil
	}
	out.WriteByte(']')
	return sjson.SetRawBytes(body, path, out.Bytes())
}

// insertSystem puts a new system message holding blocks first.
func insertSystem(body []byte, msgs gjson.Result, blocks string) ([]byte, error) {
	msg, _ := json.Marshal(systemMessage{Role: "system", Content: blocks})
	rest := strings.TrimSpace(msgs.Raw)
	rest = strings.TrimSpace(rest[1:]) // after '['
	var out bytes.Buffer
	out.Grow(len(msg) + len(rest) + 2)
	out.WriteByte('[')
	out.Write(msg)
	if rest != "]" {
		out.WriteByte(',')
	}
	out.WriteString(rest)
	return sjson.SetRawBytes(body, "messages", out.Bytes())
}

type textPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type systemMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}
