package wire

import (
	"net/http"
	"testing"

	"github.com/tidwall/gjson"
)

func TestIsSSE(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream":                 true,
		"text/event-stream; charset=utf-8":  true,
		"Text/Event-Stream":                 true,
		" text/event-stream ;charset=utf-8": true,
		"text/event-stream; =broken":        false, // a parameter mime refuses
		"text/event-streams":                false,
		"application/json":                  false,
		"application/json; charset=utf-8":   false,
		"":                                  false,
	} {
		h := http.Header{}
		if ct != "" {
			h.Set("Content-Type", ct)
		}
		if got := IsSSE(h); got != want {
			t.Errorf("IsSSE(%q) = %v, want %v", ct, got, want)
		}
	}
}

// TestWholeMembers: an answer captured whole is read by its members in
// one scan: the first value of each key, as gjson's Get finds it; nothing
// for an answer that is not JSON or was cut at the capture's bound.
func TestWholeMembers(t *testing.T) {
	keys := []string{"id", "output", "usage"}
	for _, tc := range []struct {
		answer string
		max    int
		want   []string // raw values; nil: not read
	}{
		{`{"id":"resp_1","instructions":"long\"text","tools":[{"a":[1,2]}],"output":[{"type":"message"}],"usage":{"n":1}}`, 1 << 20, []string{`"resp_1"`, `[{"type":"message"}]`, `{"n":1}`}},
		{` {"output":1,"id":"a","output":2} `, 1 << 20, []string{`"a"`, `1`, ``}},
		{`{"\u0069d":"esc"}`, 1 << 20, []string{`"esc"`, ``, ``}},
		{`[1,2]`, 1 << 20, []string{``, ``, ``}},
		{`{"id":"a",}`, 1 << 20, nil},
		{`{"id":"a"} x`, 1 << 20, nil},
		{`{"id":"a"}`, 10, nil}, // the capture's bound: cut
		{``, 1 << 20, nil},
	} {
		c := Capture{Max: tc.max}
		c.Write([]byte(tc.answer))
		b, spans := c.WholeMembers(keys...)
		if tc.want == nil {
			if b != nil || spans != nil {
				t.Errorf("%q: read %v", tc.answer, spans)
			}
			continue
		}
		if b == nil {
			t.Errorf("%q: not read", tc.answer)
			continue
		}
		for i, sp := range spans {
			if got := string(sp.Raw(b)); got != tc.want[i] {
				t.Errorf("%q: %s = %q, want %q", tc.answer, keys[i], got, tc.want[i])
			}
		}
	}
}

// FuzzWholeMembers: WholeMembers reads what Whole and gjson read: an answer
// is read when Whole returns it, and each key's span holds the value
// gjson's Get finds.
func FuzzWholeMembers(f *testing.F) {
	for _, s := range []string{`{"id":"r","output":[],"usage":{}}`, `{"id":1,"id":2}`, `{"a":{"id":3}}`, `[]`, `"x"`, `{"i\u0064":"e"}`, `{`} {
		f.Add([]byte(s))
	}
	keys := []string{"id", "output", "usage"}
	f.Fuzz(func(t *testing.T, answer []byte) {
		c := Capture{Max: 1 << 16}
		c.Write(answer)
		whole := c.Whole()
		b, spans := c.WholeMembers(keys...)
		if (b == nil) != (whole == nil) {
			t.Fatalf("%q: WholeMembers read %v, Whole %v", answer, b != nil, whole != nil)
		}
		if b == nil {
			return
		}
		res := gjson.ParseBytes(b)
		for i, k := range keys {
			var want string
			if res.IsObject() {
				res.ForEach(func(key, v gjson.Result) bool {
					if key.Str == k {
						want = v.Raw
						return false
					}
					return true
				})
			}
			if got := string(spans[i].Raw(b)); got != want {
				t.Fatalf("%q: %s = %q, gjson finds %q", answer, k, got, want)
			}
		}
	})
}
