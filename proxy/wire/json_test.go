package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestValidJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"object", `{"a":[1,-2.5e+3,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9"]}`, true},
		{"white space around", " \t\r\n{ \"a\" : [ ] , \"b\" : { } } \n", true},
		{"scalar", `"just a string"`, true},
		{"number forms", `[0,-0,1.5,1e9,1E-9,-12.75e+01]`, true},
		{"long string over several words", `"` + strings.Repeat("abcdefgh", 40) + `é\n` + strings.Repeat("z", 13) + `"`, true},
		{"raw bytes above 0x7f", "\"\xff\xfe\"", true},
		{"empty", ``, false},
		{"only white space", "  ", false},
		{"trailing comma in array", `[1,]`, false},
		{"trailing comma in object", `{"a":1,}`, false},
		{"leading zero", `[01]`, false},
		{"lone minus", `[-]`, false},
		{"dot without digits", `[1.]`, false},
		{"exponent without digits", `[1e+]`, false},
		{"control character in string", "\"a\x01b\"", false},
		{"control character after eight safe bytes", "\"abcdefgh\x1fi\"", false},
		{"bad escape", `"\x"`, false},
		{"short unicode escape", `"\u12"`, false},
		{"non-hex unicode escape", `"\u12g4"`, false},
		{"unterminated string", `"abc`, false},
		{"unterminated string ending in backslash", `"abc\`, false},
		{"two values", `{} {}`, false},
		{"single quotes", `{'a':1}`, false},
		{"bare key", `{a:1}`, false},
		{"missing colon", `{"a" 1}`, false},
		{"truncated literal", `[tru]`, false},
		{"capitalised literal", `[True]`, false},
		{"unclosed array", `[1,2`, false},
		{"unclosed object", `{"a":1`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Valid([]byte(tt.in)); got != tt.want {
				t.Errorf("Valid(%q) = %v, want %v", tt.in, got, tt.want)
			}
			if std := json.Valid([]byte(tt.in)); std != tt.want {
				t.Fatalf("test case is wrong: encoding/json says %v", std)
			}
		})
	}
}

// A body nested deeper than wire.MaxDepth is refused, quickly and without
// exhausting the stack (gjson.ValidBytes on the same body is a fatal stack
// overflow); one at the limit is accepted.

// FuzzAppendJSONString: a string is encoded byte for byte as encoding/json
// encodes it without HTML escapes.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"plain", "tab\tnl\nbs\b ff\f q\" bsl\\", "\x00\x1f\x7f", "\u2028 \u2029 <&>", "bad \xff utf-8 \xe2\x80", "é 😀",
		"eight by\u2028tes then a run of plain text \"quoted\" and\x01 a control", "12345678\xff12345678é1234567\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b strings.Builder
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if err := e.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got, want := string(AppendJSONString(nil, s)), strings.TrimSuffix(b.String(), "\n"); got != want {
			t.Fatalf("AppendJSONString(%q) = %s, encoding/json says %s", s, got, want)
		}
	})
}

func TestNotAnObject(t *testing.T) {
	for in, want := range map[string]bool{
		`null`: true, ` [1] `: true, `42`: true, `"x"`: true, `false`: true,
		` {"a":1} `: false, `{}`: false,
		``: false, `nul`: false, `[1,]`: false, `{`: false, // not JSON: the format's reader says so
	} {
		if got := NotAnObject([]byte(in)); got != want {
			t.Errorf("NotAnObject(%q) = %v, want %v", in, got, want)
		}
	}
}
