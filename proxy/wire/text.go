package wire

import (
	"bytes"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Decoded returns text(v), v being the JSON value raw parsed where it
// lies: raw is not copied to be parsed, and what text returns is copied
// only when it lies inside raw (a string without escapes, a value's raw
// JSON), so it never refers to raw, which the body's buffer reuses. A
// format's tool results are decoded so (wire.ToolResult.Decode): a copy
// of the output to parse, then another to unescape it, was twice its size
// allocated for every tool result read.
func Decoded(raw []byte, text func(v gjson.Result) string) string {
	if len(raw) == 0 {
		return text(gjson.Result{})
	}
	t := text(gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw))))
	if p, lo := uintptr(unsafe.Pointer(unsafe.StringData(t))), uintptr(unsafe.Pointer(unsafe.SliceData(raw))); len(t) > 0 && p >= lo && p < lo+uintptr(len(raw)) {
		return strings.Clone(t)
	}
	return t
}

// ContentText is the text of a message content value: a string, or the
// string "text" of each part of an array (chat text parts, Responses
// input_text, Anthropic text blocks) joined by newlines. Any other value
// has no text.
func ContentText(v gjson.Result) string {
	switch {
	case v.Type == gjson.String:
		return v.Str
	case v.IsArray():
		var sb strings.Builder
		v.ForEach(func(_, part gjson.Result) bool {
			if t := part.Get("text"); t.Type == gjson.String {
				if sb.Len() > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString(t.Str)
			}
			return true
		})
		return sb.String()
	}
	return ""
}

// mockPrefix opens a directive of the mock provider.
const mockPrefix = "[[mock:"

// stripMockDirectives returns text without the mock provider's
// directives, cut out as the mock reads them (README.md, "The mock
// provider"): "[[mock:", a name of [a-z_]+, and "]]", or "=" and a value
// running to the first "]]" that no JSON object in the value holds, so
// that tool arguments may contain "]". What only looks like a directive
// stays.
func stripMockDirectives(text string) string {
	var out []byte
	kept, from := 0, 0 // text[kept:] is not copied yet; search from text[from:]
	for {
		i := strings.Index(text[from:], mockPrefix)
		if i < 0 {
			break
		}
		i += from
		if n := directiveLen(text[i:]); n > 0 {
			out = append(out, text[kept:i]...)
			kept, from = i+n, i+n
		} else {
			from = i + 1
		}
	}
	if kept == 0 {
		return text
	}
	return string(append(out, text[kept:]...))
}

// directiveLen returns the length of the directive d starts with ("[[mock:"
// at d[0]), or 0 when it opens none.
func directiveLen(d string) int {
	i := len(mockPrefix)
	for i < len(d) && (d[i] == '_' || 'a' <= d[i] && d[i] <= 'z') {
		i++
	}
	if i == len(mockPrefix) {
		return 0
	}
	if i < len(d) && d[i] == '=' {
		for i++; i < len(d) && d[i] != ']'; i++ {
			if d[i] == '{' {
				if end := bracketsEnd(d, i); end > 0 {
					i = end - 1
				}
			}
		}
	}
	if !strings.HasPrefix(d[i:], "]]") {
		return 0
	}
	return i + 2
}

// bracketsEnd returns the index just after the brackets opened at s[i]
// close, counting "{" and "[" against "}" and "]" outside JSON strings
// (valid JSON or not); 0 when they never close.
func bracketsEnd(s string, i int) int {
	depth, inString := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth--; depth == 0 {
				return i + 1
			}
		}
	}
	return 0
}

// RoleIs reports whether raw, a message's role as it stands in a body
// (any JSON value), reads as name, as gjson's String reads it.
func RoleIs(raw []byte, name string) bool {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1:len(raw)-1]) == name
	}
	return gjson.ParseBytes(raw).String() == name
}
