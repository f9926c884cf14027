package wire

import (
	"slices"
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
