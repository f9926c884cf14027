package wire

import (
	"strings"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// Block is a text the proxy puts before the system text (a guard or a
// recall block), with its escape as a JSON string. The escape is made
// once, with the block: the caches hand the same block to every request
// of a tenant or conversation.
type Block struct {
	Text string // as made (the previews show it)
	JSON []byte // the text without its trailing newlines, escaped, without quotes
}

// NewBlock makes a block of text; an empty text makes an empty block.
func NewBlock(text string) Block {
	trimmed := strings.TrimRight(text, "\n")
	if trimmed == "" {
		return Block{Text: text}
	}
	// Room for the quotes and some escapes: one allocation, most often.
	esc := AppendJSONString(make([]byte, 0, len(trimmed)+len(trimmed)/8+16), trimmed)
	return Block{Text: text, JSON: esc[1 : len(esc)-1]}
}

// Empty reports whether no block of blocks has text.
func Empty(blocks []Block) bool {
	for _, b := range blocks {
		if len(b.JSON) > 0 {
			return false
		}
	}
	return true
}

// Compose puts blocks before text, separated by a blank line.
func Compose(blocks, text string) string {
	blocks = strings.TrimRight(blocks, "\n")
	switch {
	case blocks == "":
		return text
	case text == "":
		return blocks
	}
	return blocks + "\n\n" + text
}

// JoinBlocks is the text of blocks in order, without their trailing
// newlines, separated by blank lines.
func JoinBlocks(blocks []Block) string {
	text := ""
	for _, b := range blocks {
		if len(b.JSON) > 0 {
			text = Compose(text, strings.TrimRight(b.Text, "\n"))
		}
	}
	return text
}

// AppendBlocks appends the JSON escape of JoinBlocks(blocks), without
// quotes.
func AppendBlocks(dst []byte, blocks []Block) []byte {
	first := true
	for _, b := range blocks {
		if len(b.JSON) == 0 {
			continue
		}
		if !first {
			dst = append(dst, `\n\n`...)
		}
		first = false
		dst = append(dst, b.JSON...)
	}
	return dst
}

// Strip removes every guard and recall block from text.
func Strip(text string) string {
	return guard.Strip(recall.Strip(text))
}

// Splice returns a new body: body with body[from:to] replaced by val.
func Splice(body []byte, from, to int, val []byte) []byte {
	out := make([]byte, 0, len(body)-(to-from)+len(val))
	out = append(out, body[:from]...)
	out = append(out, val...)
	return append(out, body[to:]...)
}

// AppendJSONString appends s as a JSON string, byte for byte as
// encoding/json encodes it (invalid UTF-8 becomes U+FFFD; \b, \f, \n,
// \r, \t, \" and \\ are short escapes; other control characters, U+2028
// and U+2029 are \u escapes) except that HTML characters are not escaped
// (the body is JSON, never HTML).
func AppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while they are printable ASCII other than
		// '"' and '\\' (most of a block's text).
		for i+8 <= len(s) {
			x := load64(s[i : i+8])
			if special(x)|x&highs != 0 {
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
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
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
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
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// load64 reads the eight bytes of s little-endian (the compiler makes it
// one load).
func load64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// InjectString puts blocks in front of a JSON string value of body at sp,
// whose text is old, after stripping earlier blocks, framed or not, from
// it (StripFramed). When there
// is nothing to strip only the blocks and a blank line are inserted after
// the opening quote: the text keeps its bytes as they came. It returns
// body itself when nothing changes; a new body is appended to dst[:0].
func InjectString(dst, body []byte, sp Span, old string, blocks []Block) []byte {
	raw := body[sp.Start:sp.End]
	stripped := StripFramed(old)
	if stripped == old { // no earlier block to take out
		if Empty(blocks) {
			return body
		}
		out := dst[:0]
		out = append(out, body[:sp.Start+1]...)
		out = AppendBlocks(out, blocks)
		if len(raw) > 2 {
			out = append(out, `\n\n`...)
		}
		out = append(out, raw[1:]...)
		return append(out, body[sp.End:]...)
	}
	text := Compose(JoinBlocks(blocks), stripped)
	if text == old {
		return body
	}
	return Splice(body, sp.Start, sp.End, AppendJSONString(nil, text))
}

// InsertMember adds the member "key": blocks (a JSON string) first in the
// top-level object of body. It returns body itself when there are no
// blocks or body is not an object.
func InsertMember(body []byte, key string, blocks []Block) []byte {
	if Empty(blocks) {
		return body
	}
	s := Scanner{B: body}
	s.WS()
	if s.Peek() != '{' {
		return body
	}
	at := s.I + 1
	s.I++
	s.WS()
	ins := AppendJSONString(nil, key)
	ins = append(ins, ':', '"')
	ins = AppendBlocks(ins, blocks)
	ins = append(ins, '"')
	if s.Peek() != '}' {
		ins = append(ins, ',')
	}
	return Splice(body, at, at, ins)
}

// InjectMember puts blocks in front of the text of the top-level member
// key of body, at sp: a string keeps its text after the blocks (earlier
// blocks stripped, see InjectString), null or an absent member becomes
// the blocks. It reports false, changing nothing, for a value of any
// other type: the format decides (an array of blocks), or leaves the
// request as the client sent it.
func InjectMember(dst, body []byte, sp Span, key string, blocks []Block) ([]byte, bool) {
	if !sp.OK() {
		return InsertMember(body, key, blocks), true
	}
	raw := sp.Raw(body)
	switch raw[0] {
	case '"':
		return InjectString(dst, body, sp, gjson.ParseBytes(raw).Str, blocks), true
	case 'n': // null
		if Empty(blocks) {
			return body, true
		}
		val := AppendBlocks([]byte{'"'}, blocks)
		return Splice(body, sp.Start, sp.End, append(val, '"')), true
	}
	return body, false
}
