package wire

import (
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// contentTests are message contents and their text.
var contentTests = []struct{ name, content, want string }{
	{"string", `"hello"`, "hello"},
	{"escaped string", `"a\nb \u00e9"`, "a\nb é"},
	{"chat text parts", `[{"type":"text","text":"one"},{"type":"text","text":"two"}]`, "one\ntwo"},
	{"responses input_text", `[{"type":"input_text","text":"fix the bug"}]`, "fix the bug"},
	{"anthropic blocks, tool_result and image skipped", `[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"image","source":{}},{"type":"text","text":"next"}]`, "next"},
	{"text that is not a string skipped", `[{"text":1},{"text":null},{"text":{"a":"b"}},{"text":"kept"}]`, "kept"},
	{"empty texts before the first text add no line", `[{"text":""},{"text":""},{"text":"b"}]`, "b"},
	{"empty texts after it do", `[{"text":"a"},{"text":""},{"text":"b"},{"text":""}]`, "a\n\nb\n"},
	{"bare strings in an array have no text", `["a","b"]`, ""},
	{"empty array", `[]`, ""},
	{"object", `{"text":"not a part list"}`, ""},
	{"number", `42`, ""},
	{"null", `null`, ""},
	{"missing", ``, ""},
}

func TestContentText(t *testing.T) {
	for _, tc := range contentTests {
		t.Run(tc.name, func(t *testing.T) {
			if got := ContentText(gjson.Parse(tc.content)); got != tc.want {
				t.Errorf("ContentText(%s) = %q, want %q", tc.content, got, tc.want)
			}
		})
	}
}

func TestStripMockDirectives(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"", ""},
		{"[[mock:status=429]] hi [[mock:echo]]", " hi "},
		{`a [[mock:tool=t args={"x":["]]"]}]] b`, "a  b"},
		{`[[mock:tool=run args={"cmd":"make"} until=guard fix={"cmd":"make -j1"}]] build it`, " build it"},
		{`[[mock:tool=t args={"a":"}]]"} repeat=2]]x`, "x"},
		{`[[mock:tool=t args={"a":"\"]]"}]]x`, "x"},
		{`[[mock:note={"a":"]]x`, "x"},                                   // an object that never closes: the first "]]" ends the value
		{`[[mock:tool=t args={"a": ]]x`, `[[mock:tool=t args={"a": ]]x`}, // "{" closes at the first "]", leaving no "]]"
		{`[[mock:x={]]]y`, "y"},                                          // brackets are counted, not matched: "{" closes at "]"
		{"[[mock:status=5]0]] kept", "[[mock:status=5]0]] kept"},
		{"[[mock:[[mock:echo]]", "[[mock:"},
		{"[[mock:]] [[mock:Echo]] [[mock:echo] [mock:echo]]", "[[mock:]] [[mock:Echo]] [[mock:echo] [mock:echo]]"},
		{"[[[mock:a]]]", "[]"},
		{"[[mock:echo]]", ""},
	}
	for _, tc := range tests {
		if got := stripMockDirectives(tc.in); got != tc.want {
			t.Errorf("stripMockDirectives(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := Task("  [[mock:tool=ls]] list the files\n"); got != "list the files" {
		t.Errorf("Task = %q", got)
	}
}

// directiveRE is the regular expression the mock's directives were first
// read with; on a text without braces the stripping must agree with it.
var directiveRE = regexp.MustCompile(`\[\[mock:([a-z_]+)(?:=([^\]]*))?\]\]`)

// stripSeeds are texts that seed the fuzz target.
var stripSeeds = []string{
	"hello", "[[mock:status=429]] x", "[[mock:echo]][[mock:truncate]]", `[[mock:tool=t args={"a":["]]"]}]]`,
	"[[mock:[[mock:echo]]", "[[mock:status=5]0]]", `[[mock:tool=t args={"a":`, "[[mock:x=]]]", "[[[mock:a]]]",
	`[[mock:tool=t args="x y" repeat=3 until=guard fix={"a":[1]}]]`, `[[mock:tool=t fix="unclosed until=stop]]`,
	`[[mock:tool=t args={"input":"a]b"} repeat=-1 until=]]`,
	`a [[mock:note={"x":["]]"]}]] b`, `[[mock:note={"a":"\"]]"} more]] c`, `[[mock:note={"a": ]] d`, `[[mock:note={]]]e`,
	`[[mock:note={"a":{"b":[1,{"c":"]"}]}}]]f`, `x [[mock:note={"a":"é]]"}]]   `,
}

func FuzzStripMockDirectives(f *testing.F) {
	for _, s := range stripSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := stripMockDirectives(text)
		if len(got) > len(text) {
			t.Fatalf("strip %q grew to %q", text, got)
		}
		if !strings.Contains(text, mockPrefix) && got != text {
			t.Fatalf("strip %q without a directive gave %q", text, got)
		}
		if strings.Contains(text, "{") {
			return
		}
		if want := directiveRE.ReplaceAllString(text, ""); got != want {
			t.Fatalf("strip %q = %q, the regexp gives %q", text, got, want)
		}
	})
}
