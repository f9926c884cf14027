package chat

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// inspected is what inspect reads of a body, in comparable form.
type inspected struct {
	model, user string
	stream      bool
	system      string
	goal        string
	later       bool
	tools       []string
	results     []string // dedupe key, tool name and text of each tool result
}

func summarize(c *conversation) inspected {
	in := inspected{model: c.info.Model, user: c.info.User, stream: c.info.Stream, system: c.info.System, goal: c.info.Goal, later: c.info.Later, tools: c.info.Tools}
	for _, tr := range c.info.ToolResults {
		in.results = append(in.results, tr.Key+"|"+tr.Name+"|"+tr.Text())
	}
	return in
}

// inspectByPath reads the same as inspect with a gjson path lookup per
// field: slow, plainly right, and independent of the scanner.
func inspectByPath(body string) inspected {
	var in inspected
	doc := gjson.Parse(body)
	if !doc.IsObject() {
		return in
	}
	in.model, in.user, in.stream = doc.Get("model").String(), doc.Get("user").String(), doc.Get("stream").Bool()
	names := map[string]string{}
	var sysDone bool
	var task recall.TaskFinder
	firstUser, taskAt, lastAssistant := -1, -1, -1
	// Only arrays count: gjson's Array() would make any other value a
	// list of one.
	array := func(v gjson.Result) []gjson.Result {
		if !v.IsArray() {
			return nil
		}
		return v.Array()
	}
	for i, m := range array(doc.Get("messages")) {
		if !m.IsObject() {
			continue
		}
		switch role := m.Get("role").String(); role {
		case "system", "developer":
			if !sysDone {
				sysDone = true
				in.system = wire.ContentText(m.Get("content"))
			}
		case "user":
			if firstUser < 0 {
				firstUser = i
			}
			found := task.Found
			task.Add(wire.StripFramed(wire.ContentText(m.Get("content"))), wire.Task)
			in.goal = task.Goal
			if task.Found && !found {
				taskAt = i
			}
		case "assistant":
			lastAssistant = i
			for _, call := range array(m.Get("tool_calls")) {
				if name := call.Get("function.name").String(); name != "" {
					in.tools = append(in.tools, name)
					if id := call.Get("id").String(); id != "" {
						names[id] = name
					}
				}
			}
		case "tool", "function":
			name, key := m.Get("name").String(), ""
			if id := m.Get("tool_call_id").String(); id != "" {
				key = "call:" + id
				if n := names[id]; n != "" {
					name = n
				}
			} else {
				sum := sha256.Sum256([]byte(name + "\x00" + m.Get("content").Raw))
				key = "hash:" + hex.EncodeToString(sum[:12])
			}
			in.results = append(in.results, key+"|"+name+"|"+wire.ContentText(m.Get("content")))
		}
	}
	// Later: the model answered after the message the goal came from.
	if taskAt < 0 {
		taskAt = firstUser
	}
	in.later = lastAssistant > taskAt
	return in
}

func equalInspected(a, b inspected) bool {
	return a.model == b.model && a.user == b.user && a.stream == b.stream && a.system == b.system &&
		a.goal == b.goal && a.later == b.later && slices.Equal(a.tools, b.tools) && slices.Equal(a.results, b.results)
}

// longToolConversation has more tool calls than wire.CallIndex searches
// before it indexes them, ids used twice (for different tools), and
// results that answer the newest call, an old one, and an id used twice.
func longToolConversation() string {
	var b strings.Builder
	b.WriteString(`{"messages":[{"role":"user","content":"g"}`)
	call := func(id, name string) {
		fmt.Fprintf(&b, `,{"role":"assistant","tool_calls":[{"id":%q,"function":{"name":%q}}]}`, id, name)
	}
	result := func(id string) { fmt.Fprintf(&b, `,{"role":"tool","tool_call_id":%q,"content":"out"}`, id) }
	for i := range 40 {
		call(fmt.Sprintf("c%d", i), fmt.Sprintf("tool%d", i))
		if i%7 == 0 {
			result(fmt.Sprintf("c%d", i))
		}
	}
	result("c1") // an old call, past the ones searched first
	call("c1", "again")
	result("c1")  // the id's newest call
	result("c39") // the newest call before it
	for i := range 40 {
		call(fmt.Sprintf("d%d", i), "more")
	}
	call("e", "first")
	call("e", "second")
	result("e")  // two calls with the id among the newest: the latest
	result("c2") // indexed already: the index catches up
	result("d0")
	result("none")
	b.WriteString(`]}`)
	return b.String()
}

func TestInspect(t *testing.T) {
	tests := []struct {
		name string
		body string
		want inspected
	}{
		{"agent turn", `{"model":"gpt-4o","user":"bob","stream":true,"messages":[
			{"role":"system","content":"Be terse."},
			{"role":"user","content":"Fix the build [[mock:status=429]]"},
			{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"run_tests","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"FAIL\n"},
			{"role":"user","content":"not the goal"}]}`,
			inspected{model: "gpt-4o", user: "bob", stream: true, system: "Be terse.", goal: "Fix the build", later: true,
				tools: []string{"run_tests"}, results: []string{"call:c1|run_tests|FAIL\n"}}},
		{"developer message and parts", `{"messages":[{"role":"developer","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},{"role":"user","content":[{"type":"text","text":"goal"}]}]}`,
			inspected{system: "A\nB", goal: "goal"}},
		{"tool result without id is keyed by its content", `{"messages":[{"role":"function","name":"ls","content":"x"}]}`,
			inspectByPath(`{"messages":[{"role":"function","name":"ls","content":"x"}]}`)},
		{"results of early, late and reused call ids in a long conversation", longToolConversation(),
			inspectByPath(longToolConversation())},
		{"not an object", `[1,2]`, inspected{}},
		{"messages not an array", `{"model":"m","messages":{"role":"user"}}`, inspected{model: "m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := inspect([]byte(tt.body), nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := summarize(c); !equalInspected(got, tt.want) {
				t.Errorf("inspect =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
	if _, err := inspect([]byte(`{"messages":[}`), nil, ""); err == nil {
		t.Error("inspect accepted invalid JSON")
	}
}

// FuzzInspect checks inspect against inspectByPath on any valid body.
func FuzzInspect(f *testing.F) {
	f.Add(`{"model":"m","user":"u","stream":1,"messages":[{"role":"system","content":"s"},{"role":"user","content":"g [[mock:echo]]"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"ls"}}]},{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"out"}]}]}`)
	f.Add(`{"messages":[{"role":"tool","content":"no id"},{"role":"tool","tool_call_id":"","name":"n","content":"\u00e9\n"},{"role":"function","tool_call_id":"x"}],"stream":"true"}`)
	f.Add(`{"messages":[{"r\u006fle":"user","content":"escaped key"},{"role":"us\u0065r"},{"role":"system","role":"user","content":"dup"}]}`)
	f.Add(`{"model":{"a":1},"user":42,"messages":[null,"x",[],{"role":7}]}`)
	f.Add(`{"messages":[{"role":"user","tool_calls":[{"id":"u","function":{"name":"not an assistant"}}]},{"role":"assistant","tool_calls":[1,{"function":"x"},{"id":"a","id":"b","function":{"name":"n","name":"m"}},{"function":{"name":""}}]},{"role":"assistant","tool_calls":{"function":{"name":"object"}}}]}`)
	f.Add(`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":1,"function":{"name":"x","arguments":"{}"}}]}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		c, err := inspect([]byte(body), nil, "")
		// A member read twice is refused, whatever follows it.
		var dup *wire.DuplicateKeyError
		if json.Valid([]byte(body)) && errors.As(err, &dup) != readDuplicate([]byte(body)) {
			t.Fatalf("inspect error %v; a member read twice: %v", err, readDuplicate([]byte(body)))
		}
		if errors.As(err, &dup) {
			return
		}
		if (err == nil) != wire.Valid([]byte(body)) {
			t.Fatalf("inspect error %v for a body validJSON calls %v", err, wire.Valid([]byte(body)))
		}
		if err != nil {
			return
		}
		if got, want := summarize(c), inspectByPath(body); !equalInspected(got, want) {
			t.Fatalf("inspect(%q) =\n%+v\nby path:\n%+v", body, got, want)
		}
	})
}
