package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

func TestScanDepthLimit(t *testing.T) {
	deep := bytes.Repeat([]byte("["), 8<<20)
	var cs chatScan
	err := scanChat(deep, &cs)
	var je *wire.JSONError
	if !errors.As(err, &je) || !je.Deep {
		t.Fatalf("scanChat(8 MiB of '[') = %v, want a depth error", err)
	}
	atLimit := strings.Repeat("[", wire.MaxDepth) + strings.Repeat("]", wire.MaxDepth)
	if !wire.Valid([]byte(atLimit)) {
		t.Error("a body nested exactly wire.MaxDepth deep was refused")
	}
	if wire.Valid([]byte("[" + atLimit + "]")) {
		t.Error("a body nested wire.MaxDepth+1 deep was accepted")
	}
	// The depth counts in a chat body too: messages sit at depth 2.
	chat := `{"messages":[{"content":` + strings.Repeat("[", wire.MaxDepth-3) + strings.Repeat("]", wire.MaxDepth-3) + `}]}`
	if err := scanChat([]byte(chat), &chatScan{}); err != nil {
		t.Errorf("chat body at the limit: %v", err)
	}
	chat = `{"messages":[{"content":` + strings.Repeat("[", wire.MaxDepth-2) + strings.Repeat("]", wire.MaxDepth-2) + `}]}`
	if err := scanChat([]byte(chat), &chatScan{}); err == nil {
		t.Error("chat body past the limit accepted")
	}
}

// raw returns the bytes of a span, or "" for an absent value.
func (s span) raw(b []byte) string {
	if !s.ok() {
		return ""
	}
	return string(b[s.start:s.end])
}

// TestDuplicateMembersAreRefused: a member the proxy reads, given twice,
// makes the body ambiguous (Python's json keeps the last one, the scan
// the first): the proxy would inject into one and the provider read the
// other. Members the proxy does not read may repeat.
func TestDuplicateMembersAreRefused(t *testing.T) {
	tests := []struct {
		name, body, dup string
	}{
		{"messages", `{"messages":[{"role":"user","content":"a"}],"messages":[]}`, "messages"},
		{"model", `{"model":"a","messages":[],"model":"b"}`, "model"},
		{"stream", `{"stream":true,"stream":false,"messages":[]}`, "stream"},
		{"escaped key", `{"messages":[],"m\u0065ssages":[]}`, "messages"},
		{"role", `{"messages":[{"role":"system","role":"user","content":"x"}]}`, "role"},
		{"content", `{"messages":[{"role":"system","content":"a","content":"b"}]}`, "content"},
		{"tool_call_id", `{"messages":[{"role":"tool","tool_call_id":"a","tool_call_id":"b","content":""}]}`, "tool_call_id"},
		{"tool_calls", `{"messages":[{"role":"assistant","tool_calls":[],"tool_calls":[{"id":"a"}]}]}`, "tool_calls"},
		{"unread members may repeat", `{"temperature":1,"temperature":2,"messages":[{"role":"user","content":"a","x":1,"x":2}],"tools":[{"a":1,"a":2}]}`, ""},
		{"tools", `{"tools":[],"messages":[],"tools":[{"type":"function"}]}`, "tools"},
		{"tool call id", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","id":"b","function":{"name":"x"}}]}]}`, "id"},
		{"function", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":1,"function":{"name":"x"}}]}]}`, "function"},
		{"function name", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"x","name":"y"}}]}]}`, "name"},
		{"arguments", `{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"x","arguments":"{}","arguments":"{\"a\":1}"}}]}]}`, "arguments"},
		{"unread members of a call may repeat", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","type":"x","function":{"name":"x","strict":1,"strict":2,"arguments":{"a":1,"a":2}}}]}]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs chatScan
			err := scanChat([]byte(tt.body), &cs)
			var dup *wire.DuplicateKeyError
			switch {
			case tt.dup == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.dup != "" && (!errors.As(err, &dup) || dup.Key != tt.dup):
				t.Fatalf("err = %v, want a duplicate %q", err, tt.dup)
			}
			if readDuplicate([]byte(tt.body)) != (tt.dup != "") {
				t.Fatal("the test's oracle disagrees")
			}
		})
	}
}

func TestScanChatSpans(t *testing.T) {
	body := []byte(`{ "model" : "gpt-4o", "stream":true, "temperature":1, "temperature":2,
		"messages": [
			{"role":"system","content":"Be terse.","x":1,"x":2},
			"not an object",
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","name":"ls","content":"a\nb"},
			{"r\u006fle":"us\u0065r","content":[{"type":"text","text":"hi"}]}
		],
		"user":"alice"}`)
	var cs chatScan
	if err := scanChat(body, &cs); err != nil {
		t.Fatal(err)
	}
	check := func(name string, got span, want string) {
		t.Helper()
		if g := got.raw(body); g != want {
			t.Errorf("%s = %s, want %s", name, g, want)
		}
	}
	check("model", cs.model, `"gpt-4o"`)
	check("stream", cs.stream, `true`)
	check("user", cs.user, `"alice"`)
	if !strings.HasPrefix(cs.messages.raw(body), "[") || !strings.HasSuffix(cs.messages.raw(body), "]") {
		t.Errorf("messages span = %s", cs.messages.raw(body))
	}
	if len(cs.msgs) != 5 {
		t.Fatalf("%d messages, want 5", len(cs.msgs))
	}
	m := cs.msgs
	check("msg 0 role", m[0].role, `"system"`)
	check("msg 0 content", m[0].content, `"Be terse."`)
	if m[0].kind != roleSystem || !m[0].obj {
		t.Errorf("msg 0 kind %d obj %v", m[0].kind, m[0].obj)
	}
	if m[1].obj || string(body[m[1].start:m[1].end]) != `"not an object"` {
		t.Errorf("msg 1 = %+v", m[1])
	}
	check("msg 2 content", m[2].content, `null`)
	check("msg 2 tool_calls", m[2].toolCalls, `[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]`)
	check("msg 3 tool_call_id", m[3].toolCallID, `"c1"`)
	check("msg 3 name", m[3].name, `"ls"`)
	check("msg 3 content", m[3].content, `"a\nb"`)
	if m[4].kind != roleUser {
		t.Errorf("escaped key and role: kind %d, want user", m[4].kind)
	}
	if cs.systemIndex() != 0 {
		t.Errorf("systemIndex = %d", cs.systemIndex())
	}
}

// FuzzScan checks the scanner against encoding/json (the same bodies are
// valid) and every span it reports against gjson's lookups.
func FuzzScan(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"system","content":"x"},{"role":"user","content":[{"type":"text","text":"y"}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"tool","tool_call_id":"a\"b","content":"\u0000"}, 1, [], null],"stream":false}`))
	f.Add([]byte(`[{"messages":[]}]`))
	f.Add([]byte(`{"messages":{"role":"system"}}`))
	f.Add([]byte(`{"a":-0.0e-0,"b":"\ud83d\ude00","c":[true,false,null]}`))
	f.Add([]byte("\"\xff\x00\""))
	f.Fuzz(func(t *testing.T, body []byte) {
		var cs chatScan
		err := scanChat(body, &cs)
		// A member read twice is refused, whatever follows it.
		var dup *wire.DuplicateKeyError
		if json.Valid(body) && errors.As(err, &dup) != readDuplicate(body) {
			t.Fatalf("scanChat error %v; a member read twice: %v", err, readDuplicate(body))
		}
		if errors.As(err, &dup) {
			return
		}
		if std := json.Valid(body); std != (err == nil) {
			t.Fatalf("scanChat error %v, encoding/json valid %v, body %q", err, std, body)
		}
		if err != nil {
			return
		}
		doc := gjson.ParseBytes(body)
		for _, f := range []struct {
			key string
			sp  span
		}{{"model", cs.model}, {"user", cs.user}, {"stream", cs.stream}, {"messages", cs.messages}} {
			want := ""
			if doc.IsObject() {
				want = doc.Get(gjson.Escape(f.key)).Raw
			}
			if got := f.sp.raw(body); got != want {
				t.Fatalf("%s: span %q, gjson %q", f.key, got, want)
			}
		}
		msgs := doc.Get("messages")
		if !doc.IsObject() || !msgs.IsArray() {
			if len(cs.msgs) != 0 {
				t.Fatalf("%d messages found outside a messages array", len(cs.msgs))
			}
			return
		}
		all := msgs.Array()
		if len(all) != len(cs.msgs) {
			t.Fatalf("%d messages, gjson %d", len(cs.msgs), len(all))
		}
		for i, m := range all {
			got := cs.msgs[i]
			if string(body[got.start:got.end]) != m.Raw {
				t.Fatalf("message %d: %q, gjson %q", i, body[got.start:got.end], m.Raw)
			}
			if got.obj != m.IsObject() {
				t.Fatalf("message %d: obj %v", i, got.obj)
			}
			if !got.obj {
				continue
			}
			for _, f := range []struct {
				key string
				sp  span
			}{{"role", got.role}, {"content", got.content}, {"tool_call_id", got.toolCallID}, {"name", got.name}, {"tool_calls", got.toolCalls}} {
				if g, w := f.sp.raw(body), m.Get(f.key).Raw; g != w {
					t.Fatalf("message %d %s: %q, gjson %q", i, f.key, g, w)
				}
			}
			var calls []callSpans
			for _, c := range cs.calls {
				if c.msg == i {
					calls = append(calls, c)
				}
			}
			var want []gjson.Result
			if tc := m.Get("tool_calls"); tc.IsArray() {
				for _, c := range tc.Array() {
					if c.IsObject() {
						want = append(want, c)
					}
				}
			}
			if len(calls) != len(want) {
				t.Fatalf("message %d: %d tool calls, gjson %d", i, len(calls), len(want))
			}
			for j, c := range want {
				fn := c.Get("function")
				name := ""
				if fn.IsObject() {
					name = fn.Get("name").Raw
				}
				if calls[j].id.raw(body) != c.Get("id").Raw || calls[j].name.raw(body) != name {
					t.Fatalf("message %d call %d: id %q name %q, gjson %q %q", i, j, calls[j].id.raw(body), calls[j].name.raw(body), c.Get("id").Raw, name)
				}
			}
			if got.kind != roleNamed([]byte(m.Get("role").String())) {
				t.Fatalf("message %d: kind %d for role %s", i, got.kind, m.Get("role").Raw)
			}
		}
	})
}

// BenchmarkScan compares one scan of a 20 KB agent body with the
// validation alone that gjson does.
func BenchmarkScan(b *testing.B) {
	body := agenttest.ChatBody(false, "call_new")
	b.Run("scanChat", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			var cs chatScan
			if err := scanChat(body, &cs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gjson.ValidBytes", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if !gjson.ValidBytes(body) {
				b.Fatal("invalid")
			}
		}
	})
}

// A body of many tiny messages or tool calls is located only up to the
// caps: what the scan keeps stays a small multiple of the caps, not of
// the body (a 32 MiB body of "{}" would otherwise take gigabytes).
func TestScanCaps(t *testing.T) {
	tests := []struct{ name, head, elem, tail string }{
		{"messages", `{"messages":[{"role":"user","content":"go"}`, `,{}`, `]}`},
		{"non-object messages", `{"messages":[{"role":"user","content":"go"}`, `,0`, `]}`},
		{"tool calls", `{"messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{}`, `,{}`, `]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.head + strings.Repeat(tt.elem, 1<<20) + tt.tail)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			memo := newConvMemo(8)
			c, err := inspect(body, memo, "t")
			if err != nil {
				t.Fatal(err)
			}
			memo.remember(c, body)
			runtime.ReadMemStats(&after)
			if !c.scan.truncated || len(c.scan.msgs) > maxScanMessages || len(c.scan.calls) > maxScanCalls {
				t.Fatalf("truncated %v, %d messages, %d calls located", c.scan.truncated, len(c.scan.msgs), len(c.scan.calls))
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
				t.Errorf("reading a %d MB body allocated %d MB", len(body)>>20, grew>>20)
			}
			if len(memo.cur) != 0 {
				t.Error("a truncated body was remembered")
			}
			// Past the caps the body is still checked.
			bad := append([]byte(nil), body...)
			bad[len(bad)-len(tt.tail)-1] = 'x'
			if _, err := inspect(bad, nil, ""); err == nil {
				t.Error("invalid JSON past the caps was accepted")
			}
			// With no system message located, no second one is added.
			out, err := injectSystem(nil, body, c, wire.NewBlock("### RECALL: Similar Task Found in Memory\nx\n### END RECALL"))
			if err != nil || !bytes.Equal(out, body) {
				t.Errorf("rewrote a truncated body without a located system message (%v)", err)
			}
		})
	}
}

// readDuplicate reports whether body, valid JSON, gives a member the chat
// reader reads twice: model, user, stream or messages at the top, role,
// content, tool_call_id, name or tool_calls in an object of the messages
// array. It walks encoding/json's tokens: a reader independent of the
// scanner.
func readDuplicate(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	top := map[string]bool{"model": true, "user": true, "stream": true, "messages": true, "tools": true}
	msg := map[string]bool{"role": true, "content": true, "tool_call_id": true, "name": true, "tool_calls": true}
	call := map[string]bool{"id": true, "function": true}
	fn := map[string]bool{"name": true, "arguments": true}
	// Each open container: is it an object, and which keys it had, and,
	// for objects, whether the next token is a key.
	type frame struct {
		obj, wantKey, isTop, isMsg, isMsgs, isCalls, isCall, isFn bool
		seen                                                      map[string]bool
		key                                                       string
	}
	var stack []*frame
	found := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return found
		}
		var parent *frame
		if len(stack) > 0 {
			parent = stack[len(stack)-1]
		}
		if parent != nil && parent.obj && parent.wantKey {
			if k, ok := tok.(string); ok {
				if (parent.isTop && top[k] || parent.isMsg && msg[k] || parent.isCall && call[k] || parent.isFn && fn[k]) && parent.seen[k] {
					found = true
				}
				parent.seen[k], parent.key, parent.wantKey = true, k, false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			f := &frame{obj: tok == json.Delim('{'), wantKey: true, seen: map[string]bool{}}
			f.isTop = parent == nil && f.obj
			f.isMsgs = parent != nil && parent.isTop && parent.key == "messages" && !f.obj
			f.isMsg = parent != nil && parent.isMsgs && f.obj
			f.isCalls = parent != nil && parent.isMsg && parent.key == "tool_calls" && !f.obj
			f.isCall = parent != nil && parent.isCalls && f.obj
			f.isFn = parent != nil && parent.isCall && parent.key == "function" && f.obj
			stack = append(stack, f)
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].wantKey = true
		}
	}
}
