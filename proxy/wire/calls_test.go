package wire

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func TestCallArgs(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`{"b": 1, "a": "x"}`, `{"a":"x","b":1}`},
		{`"{\"b\": 1, \"a\": \"x\"}"`, `{"a":"x","b":1}`}, // chat and Responses: a string holding JSON
		{`{"n": 1.0, "big": 12345678901234567890}`, `{"big":12345678901234567890,"n":1.0}`},
		{`{"html": "<a>&"}`, `{"html":"<a>&"}`},
		{`"  ls -la  "`, `ls -la`}, // a free-form tool's input
		{`"{not json"`, `{not json`},
		{``, ``},
		{`[3, {"z":1,"a":2}]`, `[3,{"a":2,"z":1}]`},
	} {
		if got := CallArgs([]byte(tc.raw)); got != tc.want {
			t.Errorf("CallArgs(%s) = %s, want %s", tc.raw, got, tc.want)
		}
	}
}

func TestDefinedTools(t *testing.T) {
	defs := `[{"type":"function","function":{"name":"run_shell"}},{"type":"function","name":"exec_command"},` +
		`{"type":"custom","name":"apply_patch"},{"type":"web_search"},{"name":"Bash","input_schema":{}},{"type":"x","name":""}]`
	if got, want := DefinedTools([]byte(defs)), []string{"run_shell", "exec_command", "apply_patch", "web_search", "Bash"}; !slices.Equal(got, want) {
		t.Errorf("DefinedTools = %v, want %v", got, want)
	}
	gemini := `[{"functionDeclarations":[{"name":"run_shell_command","parametersJsonSchema":{}},{"name":"read_file"}]},{"googleSearch":{}},` +
		`{"function_declarations":[{"name":"glob"},{"description":"no name"}]}]`
	if got, want := DefinedTools([]byte(gemini)), []string{"run_shell_command", "read_file", "glob"}; !slices.Equal(got, want) {
		t.Errorf("DefinedTools of the Gemini API's = %v, want %v", got, want)
	}
	if DefinedTools(nil) != nil || DefinedTools([]byte(`{}`)) != nil {
		t.Error("no definitions read as some")
	}
}

func TestSetMember(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"model":"m","tool_choice":"auto"}`, `{"model":"m","tool_choice":"none"}`},
		{`{"model":"m"}`, `{"tool_choice":"none","model":"m"}`},
		{` { } `, ` {"tool_choice":"none" } `},
	} {
		got, err := SetMember([]byte(tc.body), "tool_choice", []byte(`"none"`))
		if err != nil || string(got) != tc.want || !gjson.ValidBytes(got) {
			t.Errorf("SetMember(%s) = %s, %v; want %s", tc.body, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[1]`, `{"tool_choice":1,"tool_choice":2}`, `{`} {
		if _, err := SetMember([]byte(bad), "tool_choice", []byte(`"none"`)); err == nil {
			t.Errorf("SetMember(%s) did not fail", bad)
		}
	}
}

// FuzzCallArgs: normalising is idempotent (a normalised call reads the
// same once more), never panics, and keeps valid JSON valid.
func FuzzCallArgs(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1,2]}`, `"{\"x\": 1}"`, `"free text"`, `[1,{"z":null}]`, `{"a":1e400}`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		once := CallArgs([]byte(raw))
		if twice := CallArgs([]byte(once)); len(once) > 0 && (once[0] == '{' || once[0] == '[') && Valid([]byte(once)) && twice != once {
			t.Fatalf("CallArgs not idempotent: %q -> %q -> %q", raw, once, twice)
		}
		if Valid([]byte(raw)) && len(raw) > 0 && (raw[0] == '{' || raw[0] == '[') && !Valid([]byte(once)) {
			t.Fatalf("CallArgs(%q) = %q is not JSON", raw, once)
		}
	})
}

// FuzzNormalMatchesEncodingJSON: what CallArgs makes of JSON without
// encoding/json is what encoding/json makes of it, byte for byte.
func FuzzNormalMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{`{"path":"./..."}`, `{"b":1,"a":[1,2],"b":{"z":[]}}`, `{"é":1,"e":2,"":{}}`,
		"{\"s\":\"tab\\tnl\\nbs\\b ff\\f q\\\" sl\\/ \u2028 \u2029 <&>\"}", `[{"a":1.0,"A":-0,"b":12345678901234567890,"c":1e400}]`,
		`{"u":"\u00e9 \ud83d\ude00 \ud800"}`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`, "{\"k\":\"\x01\x1f\x7f\"}",
		`{"a\nb":1,"a":2}`, `[true,false,null,"x"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		b := []byte(raw)
		if !Valid(b) || len(b) == 0 || (b[0] != '{' && b[0] != '[') {
			return
		}
		got, ok := appendNormal(nil, gjson.ParseBytes(b), 0)
		if !ok {
			return
		}
		if want := decodeEncode(b); string(got) != want {
			t.Fatalf("normalised %q to %q, encoding/json says %q", raw, got, want)
		}
	})
}

func TestNormalLeavesTheUnsureToEncodingJSON(t *testing.T) {
	for _, raw := range []string{`{"u":"\u00e9"}`, "{\"bad\":\"\xff\"}", strings.Repeat("[", 40) + strings.Repeat("]", 40), `{"\u0041":1}`} {
		if _, ok := appendNormal(nil, gjson.Parse(raw), 0); ok {
			t.Errorf("appendNormal took %q", raw)
		}
		if got, want := CallArgs([]byte(raw)), decodeEncode([]byte(raw)); gjson.Valid(raw) && got != want {
			t.Errorf("CallArgs(%q) = %q, want %q", raw, got, want)
		}
	}
	if got, ok := appendNormal(nil, gjson.Parse(`{"b":1,"a":{"d":[1, 2],"c":"x"},"b":2}`), 0); !ok || string(got) != `{"a":{"c":"x","d":[1,2]},"b":2}` {
		t.Errorf("appendNormal = %s, %v", got, ok)
	}
}

// TestToolResultTextDecodedOnce: a result's text is decoded once however
// often it is read, and DropBody lets go of it with the content.
func TestToolResultTextDecodedOnce(t *testing.T) {
	decoded := 0
	in := Info{ToolResults: []ToolResult{{Raw: []byte(`"exit 1"`), Decode: func(raw []byte) string {
		decoded++
		return strings.Trim(string(raw), `"`)
	}}}}
	tr := &in.ToolResults[0]
	if a, b := tr.Text(), tr.Text(); a != "exit 1" || b != a || decoded != 1 {
		t.Fatalf("Text = %q, %q after %d decodes", a, b, decoded)
	}
	in.DropBody()
	if got := tr.Text(); got != "" || decoded != 2 {
		t.Fatalf("after DropBody: Text = %q after %d decodes", got, decoded)
	}
	plain := ToolResult{Raw: []byte("ok")}
	if plain.Text() != "ok" {
		t.Fatal(plain.Text())
	}
}

func TestCallCommand(t *testing.T) {
	for _, c := range []struct {
		args, want string
	}{
		{`{"command":"cat main.go","description":"Read main"}`, "cat main.go"},        // opencode, Claude Code, qwen-code
		{`"{\"command\":\"cat main.go\"}"`, "cat main.go"},                            // chat's arguments string
		{`{"cmd":"sed -n '1,80p' a.go","yield_time_ms":1000}`, "sed -n '1,80p' a.go"}, // Codex's exec_command
		{`{"command":["bash","-lc","cat go.mod"],"workdir":"/w"}`, "cat go.mod"},      // Codex's shell
		{`{"command":["/bin/sh","-c","head -n 5 a"]}`, "head -n 5 a"},                 // a shell's -c
		{`{"command":["cat","my notes.txt"]}`, "cat 'my notes.txt'"},                  // the words
		{`{"commands":["cat config/settings.json"]}`, "cat config/settings.json"},     // Cline
		{`{"commands":["cat a","cat b"]}`, ""},                                        // more than one
		{`{"command":["bash","-lc",3]}`, ""},                                          // not words
		{`{"file_path":"/w/main.go"}`, ""},                                            // no command
		{`cat main.go`, ""},                                                           // free text
		{``, ""},
	} {
		if got := CallCommand([]byte(c.args)); got != c.want {
			t.Errorf("CallCommand(%s) = %q, want %q", c.args, got, c.want)
		}
	}
}
