package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/providers/mock"
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

// TestContentTextAgreesWithMock: the mock, which keeps its own reader of a
// message's content, echoes a system message's text as ContentText reads
// it.
func TestContentTextAgreesWithMock(t *testing.T) {
	for _, tc := range contentTests {
		t.Run(tc.name, func(t *testing.T) {
			system := `{"role":"system"}`
			if tc.content != "" {
				system = `{"role":"system","content":` + tc.content + `}`
			}
			echo := askMock(t, `{"model":"m","messages":[`+system+`,{"role":"user","content":"[[mock:echo]]"}]}`)
			if want := ContentText(gjson.Parse(tc.content)); echo != want {
				t.Errorf("the mock echoes %q, ContentText(%s) = %q", echo, tc.content, want)
			}
		})
	}
}

// askMock sends a chat request body to the mock and returns the text it
// answers.
func askMock(t *testing.T, body string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://mock/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := mock.New().RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the mock answers %d: %s", res.StatusCode, b)
	}
	return gjson.GetBytes(b, "choices.0.message.content").String()
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

// stripSeeds are texts that seed both fuzz targets.
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

// actingDirectives are the directives that change the mock's answer; a text
// holding one cannot be checked against the words the mock answers.
var actingDirectives = []string{"[[mock:status", "[[mock:delay", "[[mock:tool", "[[mock:echo", "[[mock:truncate", "[[mock:stream_error"}

// FuzzTaskAgreesWithMock: the task the request path reads is the text the
// mock answers to, directives cut out the same way (JSON values with "]"
// included): the two read the same documented syntax with separate code.
func FuzzTaskAgreesWithMock(f *testing.F) {
	for _, s := range stripSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			return
		}
		for _, d := range actingDirectives {
			if strings.Contains(text, d) {
				return
			}
		}
		content, _ := json.Marshal(text)
		answer := askMock(t, `{"model":"m","messages":[{"role":"user","content":`+string(content)+`}]}`)

		want := "Mock answer."
		if task := []rune(Task(text)); len(task) > 0 {
			want = "Mock answer to: " + string(task[:min(len(task), 200)])
		}
		if answer != want {
			t.Fatalf("%q: the mock answers %q, the task gives %q", text, answer, want)
		}
	})
}

// TestDecodedKeepsNothingOfRaw: what Decoded gives is what decoding a
// copy gives, and it shares no byte with raw, whether the text is a
// string with escapes, one without (a piece of raw), a part's text or a
// value's raw JSON.
func TestDecodedKeepsNothingOfRaw(t *testing.T) {
	rawJSON := func(v gjson.Result) string { return v.Raw }
	for _, tc := range []struct {
		raw  string
		text func(gjson.Result) string
	}{
		{`"ok: 3 tests passed"`, ContentText},
		{`"FAIL\tpkg\n--- FAIL: TestX"`, ContentText},
		{`[{"type":"text","text":"one part"}]`, ContentText},
		{`[{"type":"text","text":"a"},{"type":"text","text":"b\n"}]`, ContentText},
		{`{"exit_code":1,"output":"boom"}`, rawJSON},
		{`{"exit_code":1,"output":"boom"}`, func(v gjson.Result) string { return v.Get("output").Str }},
		{``, ContentText},
		{`12`, rawJSON},
	} {
		raw := []byte(tc.raw)
		want := tc.text(gjson.ParseBytes(bytes.Clone(raw)))
		got := Decoded(raw, tc.text)
		if got != want {
			t.Errorf("%s: %q, decoding a copy %q", tc.raw, got, want)
		}
		for i := range raw {
			raw[i] = 'x'
		}
		if got != want {
			t.Errorf("%s: the text changed with raw's bytes: %q", tc.raw, got)
		}
	}
}
