package wire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

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
	// Most calls are normalised without building a tree of maps.
	if b, ok := appendNormal(make([]byte, 0, len(raw)), gjson.ParseBytes(raw), 0); ok {
		return string(b)
	}
	return decodeEncode(raw)
}

// decodeEncode normalises raw, a valid JSON object or array, through
// encoding/json: decoded with UseNumber, encoded without HTML escapes.
func decodeEncode(raw []byte) string {
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

// maxNormalDepth is the nesting appendNormal handles; deeper arguments go
// through encoding/json.
const maxNormalDepth = 32

// appendNormal appends to dst what decodeEncode makes of v, a value of a
// valid JSON document: compact, each object's keys sorted (of repeated
// keys the last kept), numbers as written, strings encoded as
// encoding/json encodes them (AppendJSONString). It reports false, having
// appended part of it, for what it leaves to decodeEncode: a string
// holding a \u escape or invalid UTF-8 (decoding replaces it), nesting
// over maxNormalDepth.
func appendNormal(dst []byte, v gjson.Result, depth int) ([]byte, bool) {
	switch {
	case v.Type == gjson.String:
		if !plainString(v.Raw) {
			return dst, false
		}
		return AppendJSONString(dst, v.Str), true
	case v.IsObject():
		if depth == maxNormalDepth {
			return dst, false
		}
		type member struct {
			key string
			val gjson.Result
		}
		var ms []member
		ok := true
		v.ForEach(func(k, val gjson.Result) bool {
			if ok = plainString(k.Raw); ok {
				ms = append(ms, member{k.Str, val})
			}
			return ok
		})
		if !ok {
			return dst, false
		}
		slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
		dst = append(dst, '{')
		first := true
		for i, m := range ms {
			if i+1 < len(ms) && ms[i+1].key == m.key {
				continue // a later value of the key replaces this one
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = AppendJSONString(dst, m.key)
			dst = append(dst, ':')
			if dst, ok = appendNormal(dst, m.val, depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	case v.IsArray():
		if depth == maxNormalDepth {
			return dst, false
		}
		dst = append(dst, '[')
		ok, first := true, true
		v.ForEach(func(_, el gjson.Result) bool {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst, ok = appendNormal(dst, el, depth+1)
			return ok
		})
		return append(dst, ']'), ok
	default: // a number (kept as written, as json.Number is), true, false or null
		return append(dst, v.Raw...), true
	}
}

// plainString reports whether raw, a JSON string token, decodes the same
// in gjson and encoding/json: it holds no \u escape (a lone surrogate
// decodes differently) and no invalid UTF-8.
func plainString(raw string) bool {
	return !strings.Contains(raw, `\u`) && utf8.ValidString(raw)
}

// NoteText returns the text of ToolResult.Note: a string, or the text
// parts of an array joined by newlines.
func NoteText(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	return strings.TrimSpace(ContentText(gjson.ParseBytes(raw)))
}

// DefinedTools returns the names of the tools a request defines
// (Info.ToolDefs) in every API's shape: chat's function.name, the
// Responses API's and Anthropic's name, the Gemini API's name of each of
// a tool's functionDeclarations, or the type of a tool without a name (a
// built-in such as "local_shell" or "web_search"). It returns nil when
// defs is not an array. The names have bytes of their own: a caller keeps
// them across turns, and a piece of the definitions (tens of kilobytes
// from a coding agent) would keep them all alive.
func DefinedTools(defs []byte) []string {
	v := gjson.ParseBytes(defs)
	if !v.IsArray() {
		return nil
	}
	names := []string{}
	v.ForEach(func(_, t gjson.Result) bool {
		decls := t.Get("functionDeclarations")
		if !decls.IsArray() {
			decls = t.Get("function_declarations")
		}
		if decls.IsArray() {
			decls.ForEach(func(_, d gjson.Result) bool {
				if r := d.Get("name"); r.Type == gjson.String && r.Str != "" {
					names = append(names, strings.Clone(r.Str))
				}
				return true
			})
			return true
		}
		r := t.Get("function.name")
		if r.Type != gjson.String {
			r = t.Get("name")
		}
		if r.Type != gjson.String {
			r = t.Get("type")
		}
		if r.Type == gjson.String && r.Str != "" {
			names = append(names, strings.Clone(r.Str))
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

// CallCommand returns the command line of a shell call from its arguments
// (ToolResult.Args), "" when they name none: a "command" or "cmd" string
// (opencode, Claude Code, qwen-code, the Gemini CLI, Codex's exec_command),
// a "command" array (Codex's shell: ["bash", "-lc", "cat x"] gives what
// the shell runs, ["cat", "x"] the words joined), or Cline's "commands"
// when it holds one.
func CallCommand(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	args := gjson.ParseBytes(raw)
	if args.Type == gjson.String {
		args = gjson.Parse(args.Str)
	}
	if !args.IsObject() {
		return ""
	}
	for _, key := range []string{"command", "cmd"} {
		switch v := args.Get(key); {
		case v.Type == gjson.String:
			return v.Str
		case v.IsArray():
			return commandOf(v.Array())
		}
	}
	if v := args.Get("commands"); v.IsArray() {
		if cmds := v.Array(); len(cmds) == 1 && cmds[0].Type == gjson.String {
			return cmds[0].Str
		}
	}
	return ""
}

// commandOf returns the command line an argument vector runs: the script
// of a shell's -c, else the words, each quoted when it needs to be.
func commandOf(words []gjson.Result) string {
	var parts []string
	for _, w := range words {
		if w.Type != gjson.String {
			return ""
		}
		parts = append(parts, w.Str)
	}
	if len(parts) == 3 && (parts[1] == "-c" || parts[1] == "-lc") {
		switch parts[0][strings.LastIndexByte(parts[0], '/')+1:] {
		case "bash", "sh", "zsh", "dash":
			return parts[2]
		}
	}
	for i, p := range parts {
		if p == "" || strings.ContainsAny(p, " \t'\"") {
			parts[i] = "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
		}
	}
	return strings.Join(parts, " ")
}
