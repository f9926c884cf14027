package wire

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/scarproxy/scarproxy/providers"
	"github.com/tidwall/gjson"
)

// CallArgs returns a call's arguments (ToolResult.Args) normalised, so
// that the same call reads the same whatever its spacing and key order: a
// JSON object or array compact with its keys sorted; free text trimmed.
// A JSON string is first unquoted (chat and Responses send arguments as a
// string holding JSON).
func CallArgs(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	if raw[0] == '"' {
		raw = []byte(strings.TrimSpace(gjson.ParseBytes(raw).String()))
	}
	if len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') || !Valid(raw) {
		return string(raw)
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // 1.0 and 1 stay apart, big integers exact
	if err := d.Decode(&v); err != nil {
		return string(raw)
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil { // maps encode with sorted keys
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// NoteText returns the text of ToolResult.Note: a string, or the text
// parts of an array joined by newlines.
func NoteText(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	return strings.TrimSpace(providers.MessageText(gjson.ParseBytes(raw)))
}

// DefinedTools returns the names of the tools a request defines
// (Info.ToolDefs) in every API's shape: chat's function.name, the
// Responses API's and Anthropic's name, or the type of a tool without a
// name (a built-in such as "local_shell" or "web_search"). It returns nil
// when defs is not an array.
func DefinedTools(defs []byte) []string {
	v := gjson.ParseBytes(defs)
	if !v.IsArray() {
		return nil
	}
	names := []string{}
	v.ForEach(func(_, t gjson.Result) bool {
		r := t.Get("function.name")
		if r.Type != gjson.String {
			r = t.Get("name")
		}
		if r.Type != gjson.String {
			r = t.Get("type")
		}
		if r.Type == gjson.String && r.Str != "" {
			names = append(names, r.Str)
		}
		return true
	})
	return names
}

// SetMember returns body with its top-level member key set to the JSON
// value val: replaced where it stands, or added first when absent. body
// must be a JSON object in which key appears at most once; val must be
// valid JSON. The result is a new slice (body is not modified).
func SetMember(body []byte, key string, val []byte) ([]byte, error) {
	sp, err := Members(body, key)
	if err != nil {
		return nil, err
	}
	if sp[0].OK() {
		return Splice(body, sp[0].Start, sp[0].End, val), nil
	}
	s := Scanner{B: body}
	s.WS()
	if s.Peek() != '{' {
		return nil, &JSONError{Offset: s.I}
	}
	at := s.I + 1
	s.I++
	s.WS()
	ins := AppendJSONString(nil, key)
	ins = append(ins, ':')
	ins = append(ins, val...)
	if s.Peek() != '}' {
		ins = append(ins, ',')
	}
	return Splice(body, at, at, ins), nil
}
