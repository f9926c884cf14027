package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/internal/agenttest"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/tidwall/gjson"
)

// claudeTurn is a Claude Code turn in the shape it sends: a system array
// with cache_control, a user message of reminders and the task, an
// assistant tool_use, and its failed tool_result.
const claudeTurn = `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,
"system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"You are an interactive CLI tool.","cache_control":{"type":"ephemeral"}}],
"messages":[
 {"role":"user","content":[{"type":"text","text":"<system-reminder>context</system-reminder>"},{"type":"text","text":"Write hello.py and run it"}]},
 {"role":"assistant","content":[{"type":"text","text":"I'll run it."},{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"python3 hello.py"}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","is_error":true,"content":"Exit code 1\n  File \"hello.py\", line 1\n    print(1\n         ^\nSyntaxError: '(' was never closed"}]},
 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_02","name":"Read","input":{"file_path":"hello.py"}}]},
 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_02","content":[{"type":"text","text":"1\tprint(1"}]}]}
],"metadata":{"user_id":"user_abc"},"tools":[{"name":"Bash","input_schema":{"type":"object"}}]}`

func TestRead(t *testing.T) {
	r, err := read([]byte(claudeTurn))
	if err != nil {
		t.Fatal(err)
	}
	in := r.Info()
	if in.Model != "claude-sonnet-4-5" || !in.Stream || in.User != "user_abc" {
		t.Errorf("model %q stream %v user %q", in.Model, in.Stream, in.User)
	}
	if in.System != "You are Claude Code, Anthropic's official CLI for Claude.\nYou are an interactive CLI tool." {
		t.Errorf("system %q", in.System)
	}
	// The reminder Claude Code puts before the task is not the task.
	if in.Goal != "Write hello.py and run it" {
		t.Errorf("goal %q", in.Goal)
	}
	if strings.Join(in.Tools, ",") != "Bash,Read" || in.ToolCount != 2 || len(in.ToolResults) != 2 {
		t.Fatalf("tools %v, %d results, %d read", in.Tools, in.ToolCount, len(in.ToolResults))
	}
	fail, ok := in.ToolResults[0], in.ToolResults[1]
	if fail.Key != "call:toolu_01" || fail.Name != "Bash" || !fail.IsError || !strings.Contains(fail.Text(), "SyntaxError") {
		t.Errorf("failed result %+v, text %q", fail, fail.Text())
	}
	if ok.Key != "call:toolu_02" || ok.Name != "Read" || ok.IsError || ok.Text() != "1\tprint(1" {
		t.Errorf("result %+v, text %q", ok, ok.Text())
	}
	if in.Key == "" || in.Key != recall.ConversationKey(in.System, in.Goal) {
		t.Errorf("conversation key %q", in.Key)
	}
}

func TestReadRefuses(t *testing.T) {
	tests := []struct {
		name, body string
		dup        bool
	}{
		{"not JSON", `{"messages":[`, false},
		{"two messages members", `{"messages":[],"messages":[{"role":"user","content":"x"}]}`, true},
		{"two system members", `{"system":"a","system":"b","messages":[]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := read([]byte(tt.body))
			var dup *wire.DuplicateKeyError
			var je *wire.JSONError
			if tt.dup && !errors.As(err, &dup) || !tt.dup && !errors.As(err, &je) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestGoalSkipsToolResultsAndDirectives(t *testing.T) {
	body := `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"ok"}]},{"role":"user","content":"Fix the build [[mock:tool=Bash]]"}]}`
	r, err := read([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.info.Goal != "Fix the build" {
		t.Fatalf("goal %q", r.info.Goal)
	}
}

func inject(t *testing.T, body string, blocks ...wire.Block) []byte {
	t.Helper()
	r, err := read([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Inject(nil, []byte(body), wire.Placement{Turn: blocks, System: true})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInjectGolden(t *testing.T) {
	blocks := agenttest.Blocks()
	old := guard.Block([]guard.Entry{{Pattern: "RATE LIMIT", Count: 3, Hint: "Slow down."}})
	tests := []struct{ name, body string }{
		{"no_system", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`},
		{"empty_object", `{}`},
		{"string_system", `{"model":"m","system":"Be terse.","messages":[{"role":"user","content":"hi"}]}`},
		{"string_system_with_old_block", `{"model":"m","system":` + jsonString(old+"\nBe terse.") + `,"messages":[]}`},
		{"null_system", `{"model":"m","system":null,"messages":[]}`},
		{"blocks_system", `{"model":"m","system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[]}`},
		{"blocks_system_old_block_with_cache_control", `{"model":"m","system":[{"type":"text","text":` + jsonString(old) + `,"cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be terse."}],"messages":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := inject(t, tc.body, blocks...)
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			var pretty bytes.Buffer
			json.Indent(&pretty, out, "", "  ")
			agenttest.Golden(t, "inject_"+tc.name+".json", pretty.Bytes())

			sys := gjson.GetBytes(out, "system")
			first := sys.Str
			if sys.IsArray() {
				first = sys.Get("0.text").Str
			}
			if !strings.HasPrefix(first, guard.BlockStart) {
				t.Fatalf("the system text does not open with the guard: %q", first)
			}
			// Cache breakpoints are kept, never added.
			if in, got := strings.Count(tc.body, "cache_control"), strings.Count(string(out), "cache_control"); in != got {
				t.Fatalf("%d cache_control markers, %d in the request", got, in)
			}
			// Injecting again changes nothing: a block never appears twice.
			if again := inject(t, string(out), blocks...); !bytes.Equal(again, out) {
				t.Fatalf("re-injection is not stable:\n%s\n%s", out, again)
			}
			// Injecting nothing takes the blocks out again.
			stripped := inject(t, string(out))
			if strings.Contains(string(stripped), guard.BlockStart) || strings.Contains(string(stripped), recall.BlockStart) {
				t.Fatalf("blocks left after strip: %s", stripped)
			}
		})
	}
}

func TestInjectLeavesWhatItCannotRead(t *testing.T) {
	for _, body := range []string{
		`{"system":{"text":"KEEP ME"},"messages":[]}`,
		`{"system":42,"messages":[]}`,
		`[1,2]`,
		`{"model":"m","system":"x","messages":[]}`, // nothing to inject
	} {
		var blocks []wire.Block
		if !strings.Contains(body, `"x"`) {
			blocks = agenttest.Blocks()
		}
		if out := inject(t, body, blocks...); string(out) != body {
			t.Fatalf("changed %s -> %s", body, out)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// FuzzInject: whatever the (valid JSON) body, the rewritten body is valid
// JSON. In the system text: every member but system keeps its bytes, and
// the system text opens with the blocks, once. In the turns: the blocks go
// where a plain reference puts them (placeRef: the client's bytes around
// them kept), every member but messages keeps its bytes, and nothing
// placed gives the body itself.
func FuzzInject(f *testing.F) {
	f.Add(claudeTurn, true)
	f.Add(`{"system":"x"}`, true)
	f.Add(`{"system":[{"type":"text","text":"a"},{"type":"image"}],"messages":[]}`, false)
	f.Add(`{ }`, true)
	f.Add(`{"system":null}`, true)
	f.Add(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"{"}]}`, true)
	f.Add(`{"messages":[{"role":"user","content":[ ]},{"role":"user","content":""}]}`, true)
	f.Fuzz(func(t *testing.T, body string, withBlocks bool) {
		r, err := read([]byte(body))
		if err != nil {
			return
		}
		var blocks []wire.Block
		if withBlocks {
			blocks = agenttest.Blocks()
		}
		out, err := r.Inject(nil, []byte(body), wire.Placement{Turn: blocks, System: true})
		if err == nil {
			if !json.Valid(out) {
				t.Fatalf("invalid JSON from %q: %q", body, out)
			}
			if !gjson.Parse(body).IsObject() {
				if string(out) != body {
					t.Fatalf("a body that is not an object changed: %q", out)
				}
			} else {
				agenttest.SameMembers(t, []byte(body), out, "system")
				if n := strings.Count(string(out), jsonEscaped(guard.BlockStart)); withBlocks && !bytes.Equal(out, []byte(body)) && n != 1 {
					t.Fatalf("the guard appears %d times: %s", n, out)
				}
			}
		}

		p := wire.Placement{}
		if withBlocks {
			p = turnPlacement()
		}
		in := []byte(body)
		out, err = r.Inject(nil, in, p)
		if err != nil {
			return // the proxy then forwards the original bytes
		}
		if !json.Valid(out) {
			t.Fatalf("turn: invalid JSON from %q: %q", body, out)
		}
		if placedByProxy(body) {
			return // the reference strips nothing
		}
		if want := placeRef(in, p); !bytes.Equal(out, want) {
			t.Fatalf("turn: from %q\n got %q\nwant %q", body, out, want)
		}
		if p.Empty() && len(in) > 0 && &out[0] != &in[0] {
			t.Fatalf("turn: nothing placed, and not the body itself")
		}
		if !bytes.Equal(out, in) {
			agenttest.SameMembers(t, in, out, "messages")
		}
	})
}

func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// stream is an Anthropic event stream: a text answer, or a tool call.
func stream(stop string) string {
	s := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"stop_reason\":null,\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":1200,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello \"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"world\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
	return s + "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"" + stop + "\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
}

func observe(sse bool, keep int, chunks ...[]byte) wire.Outcome {
	r := &request{}
	o := r.Observe(sse, keep)
	for _, c := range chunks {
		o.Write(c)
	}
	return o.Outcome()
}

func TestObserve(t *testing.T) {
	errEvent := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	full := stream("end_turn")
	// message_start says the input and the cache, message_delta the
	// output.
	used := wire.Usage{Input: 1225, Output: 2, CacheRead: 1200}
	started := wire.Usage{Input: 1225, Output: 1, CacheRead: 1200}
	tests := []struct {
		name   string
		sse    bool
		answer string
		want   wire.Outcome
	}{
		{"final answer", true, full, wire.Outcome{Final: true, Answer: "Hello world", Usage: used}},
		{"tool use is not final", true, stream("tool_use"), wire.Outcome{Answer: "Hello world", Usage: used}},
		{"max tokens is not final", true, stream("max_tokens"), wire.Outcome{Answer: "Hello world", Usage: used}},
		{"cut before message_stop", true, full[:strings.Index(full, "event: message_stop")], wire.Outcome{Failure: "stream ended before message_stop", Usage: used}},
		{"error event", true, full[:strings.Index(full, "event: content_block_start")] + errEvent, wire.Outcome{Failure: "Overloaded", Usage: started}},
		{"CRLF lines", true, strings.ReplaceAll(full, "\n", "\r\n"), wire.Outcome{Final: true, Answer: "Hello world", Usage: used}},
		{"JSON final", false, `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Done."}],"stop_reason":"end_turn","usage":{"input_tokens":3,"cache_creation_input_tokens":400,"cache_read_input_tokens":0,"output_tokens":9}}`,
			wire.Outcome{Final: true, Answer: "Done.", Usage: wire.Usage{Input: 403, Output: 9, CacheWrite: 400}}},
		{"JSON tool use", false, `{"type":"message","content":[{"type":"text","text":"Running it."},{"type":"tool_use","id":"t","name":"Bash","input":{}},{"type":"tool_use","id":"u","name":"Bash","input":{}}],"stop_reason":"tool_use"}`, wire.Outcome{Answer: "Running it.", FirstCall: "t"}},
		{"a streamed tool use", true, strings.Replace(stream("tool_use"), "event: content_block_stop", "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"Bash\",\"input\":{}}}\n\nevent: content_block_stop", 1),
			wire.Outcome{Answer: "Hello world", Usage: used, FirstCall: "toolu_01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := observe(tt.sse, 1<<20, []byte(tt.answer)); got != tt.want {
				t.Fatalf("outcome %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzObserve: the same stream, cut into reads anywhere, gives the same
// outcome.
func FuzzObserve(f *testing.F) {
	f.Add(stream("end_turn"), 7, 300, 555)
	f.Add(stream("tool_use")[:400], 1, 2, 3)
	f.Add("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\"}}\n\n", 5, 40, 90)
	f.Fuzz(func(t *testing.T, answer string, a, b, c int) {
		whole := observe(true, 0, []byte(answer))
		if got := observe(true, 0, agenttest.SplitAt([]byte(answer), a, b, c)...); got != whole {
			t.Fatalf("split at %d,%d,%d: %+v, whole: %+v", a, b, c, got, whole)
		}
	})
}

func TestErrorShapes(t *testing.T) {
	tests := []struct {
		status int
		typ    string
	}{
		{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
		{404, "not_found_error"}, {413, "request_too_large"}, {429, "rate_limit_error"},
		{500, "api_error"}, {502, "api_error"}, {503, "overloaded_error"}, {504, "timeout_error"}, {529, "overloaded_error"},
	}
	f := New()
	for _, tt := range tests {
		e := wire.Error{Status: tt.status, Message: "why"}
		b := f.Error(e)
		if gjson.GetBytes(b, "type").Str != "error" || gjson.GetBytes(b, "error.type").Str != tt.typ || gjson.GetBytes(b, "error.message").Str != "why" {
			t.Errorf("%d: %s", tt.status, b)
		}
		ev := string(f.StreamError(e))
		if !strings.HasPrefix(ev, "event: error\ndata: ") || !strings.HasSuffix(ev, "\n\n") {
			t.Errorf("%d: stream error %q", tt.status, ev)
		}
		if got := observe(true, 0, []byte(stream("end_turn")[:300]+"\n\n"), []byte(ev)); got.Failure != "why" {
			t.Errorf("%d: the observer reads the proxy's own stream error as %+v", tt.status, got)
		}
	}
}

// TestClaudeCodeRequests reads the requests Claude Code sent, captured as
// they were (testdata/agents): its Bash command fails the same way on the
// first two turns.
func TestClaudeCodeRequests(t *testing.T) {
	for turn, failed := range []int{0, 1, 2} {
		name := fmt.Sprintf("agents/claude-turn%d.json", turn+1)
		body, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		r, err := read(body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		in := r.Info()
		if !in.Stream || in.Model == "" || !strings.Contains(in.System, "Claude") || in.Goal != "Write hello.py that prints hello and run it" {
			t.Fatalf("%s: model %q stream %v system %.60q goal %.80q", name, in.Model, in.Stream, in.System, in.Goal)
		}
		n := 0
		for _, tr := range in.ToolResults {
			if tr.IsError && tr.Name == "Bash" && guard.ToolFailed(tr.Text()) {
				n++
			}
			// The loop breaker's view of the call: its arguments, and the
			// tool among the request's definitions.
			if args := wire.CallArgs(tr.Args); !strings.Contains(args, "print(1") || !strings.HasPrefix(args, `{"command":`) {
				t.Errorf("%s: Bash call arguments %q", name, args)
			}
			if !slices.Contains(wire.DefinedTools(in.ToolDefs), tr.Name) {
				t.Errorf("%s: %s not among the defined tools %v", name, tr.Name, wire.DefinedTools(in.ToolDefs))
			}
		}
		if n != failed || in.ToolCount != failed {
			t.Fatalf("%s: %d failed Bash results of %d, want %d", name, n, in.ToolCount, failed)
		}
		out, err := r.Inject(nil, body, wire.Placement{Turn: agenttest.Blocks(), System: true})
		if err != nil {
			t.Fatal(err)
		}
		agenttest.SameMembers(t, body, out, "system")
		sys := gjson.GetBytes(out, "system").Array()
		// The billing header stays first, then the blocks, then the
		// prompt with its cache breakpoints where they were.
		if !strings.HasPrefix(sys[0].Get("text").Str, billingHeader) || !strings.HasPrefix(sys[1].Get("text").Str, guard.BlockStart) ||
			strings.Count(string(out), "cache_control") != strings.Count(string(body), "cache_control") {
			t.Fatalf("%s: system %s", name, gjson.GetBytes(out, "system").Raw[:300])
		}
	}
}

func TestClaudeCodeAnswers(t *testing.T) {
	for name, want := range map[string]wire.Outcome{
		"agents/claude-sse-turn1.txt": {},
		"agents/claude-sse-turn3.txt": {Final: true},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		got := observe(true, 0, b)
		if got.Failure != "" || got.Final != want.Final || (got.Final && got.Answer == "") {
			t.Errorf("%s: %+v", name, got)
		}
	}
}

// BenchmarkRead reads Claude Code's third turn as captured (76 KB).
func BenchmarkRead(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-turn3.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := read(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInject places the blocks into Claude Code's third turn as
// captured, in each placement.
func BenchmarkInject(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-turn3.json"))
	if err != nil {
		b.Fatal(err)
	}
	g, rc := agenttest.BlockParts()
	r, err := read(body)
	if err != nil {
		b.Fatal(err)
	}
	for _, pl := range []struct {
		name string
		p    wire.Placement
	}{
		{"system", wire.Placement{Turn: []wire.Block{wire.NewBlock(g)}, Recall: wire.NewBlock(rc), System: true}},
		{"turn", wire.Placement{Turn: []wire.Block{wire.NewBlock(g)}, Recall: wire.NewBlock(rc)}},
	} {
		b.Run(pl.name, func(b *testing.B) {
			dst := make([]byte, 0, 2*len(body))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Inject(dst, body, pl.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadInject is what the format costs a request: reading Claude
// Code's third turn as captured and placing a guard in it
// (guard.placement: turn).
func BenchmarkReadInject(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "claude-turn3.json"))
	if err != nil {
		b.Fatal(err)
	}
	g, rc := agenttest.BlockParts()
	p := wire.Placement{Turn: []wire.Block{wire.NewBlock(g)}, Recall: wire.NewBlock(rc)}
	dst := make([]byte, 0, 2*len(body))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := read(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Inject(dst, body, p); err != nil {
			b.Fatal(err)
		}
	}
}
