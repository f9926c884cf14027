package responses

import (
	"bytes"
	"encoding/json"
	"errors"
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

// codexTurn is a Codex CLI turn in the shape it sends: instructions, a
// developer message, the user's messages, a function call and its failed
// output, and the other kinds of tool output.
const codexTurn = `{"model":"gpt-5-codex","instructions":"You are Codex, a coding agent.","stream":true,"store":false,
"input":[
 {"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"Write hello.py and run it"}]},
 {"type":"reasoning","summary":[],"encrypted_content":"gAAA"},
 {"type":"function_call","name":"shell_command","arguments":"{\"command\":\"python3 hello.py\"}","call_id":"call_A"},
 {"type":"function_call_output","call_id":"call_A","output":"Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 1\nOriginal token count: 20\nOutput:\n  File \"hello.py\", line 1\n    print(1\nSyntaxError: '(' was never closed\n"},
 {"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch","call_id":"call_B"},
 {"type":"custom_tool_call_output","call_id":"call_B","output":[{"type":"input_text","text":"Success. Updated the following files:"}]},
 {"type":"local_shell_call","call_id":"call_C","action":{"type":"exec","command":["ls"]},"status":"completed"},
 {"type":"local_shell_call_output","call_id":"call_C","output":"hello.py"},
 {"type":"mcp_call","id":"mcp_1","name":"fetch","server_label":"web","arguments":"{}","error":"connection refused"},
 {"type":"shell_call","call_id":"call_D","action":{"commands":["go build"]}},
 {"type":"shell_call_output","call_id":"call_D","output":[{"stdout":"","stderr":"undefined: x","outcome":{"type":"exit","exit_code":1}}]}
],"tools":[{"type":"function","name":"shell_command"}]}`

func TestRead(t *testing.T) {
	r, err := read([]byte(codexTurn), "t", newChains(8))
	if err != nil {
		t.Fatal(err)
	}
	in := r.Info()
	if in.Model != "gpt-5-codex" || !in.Stream || in.System != "You are Codex, a coding agent." || in.Goal != "Write hello.py and run it" {
		t.Fatalf("model %q stream %v system %q goal %q", in.Model, in.Stream, in.System, in.Goal)
	}
	if got := strings.Join(in.Tools, ","); got != "shell_command,apply_patch,local_shell,fetch,shell" {
		t.Errorf("tools %s", got)
	}
	want := []struct {
		key, name string
		isErr     bool
		text      string
	}{
		{"call:call_A", "shell_command", false, "Process exited with code 1"},
		{"call:call_B", "apply_patch", false, "Success. Updated"},
		{"call:call_C", "local_shell", false, "hello.py"},
		{"call:mcp_1", "fetch", true, "connection refused"},
		{"call:call_D", "shell", true, "undefined: x"},
	}
	if len(in.ToolResults) != len(want) || in.ToolCount != len(want) {
		t.Fatalf("%d tool results, want %d", len(in.ToolResults), len(want))
	}
	for i, w := range want {
		tr := in.ToolResults[i]
		if tr.Key != w.key || tr.Name != w.name || tr.IsError != w.isErr || !strings.Contains(tr.Text(), w.text) {
			t.Errorf("result %d: %s %s %v %q", i, tr.Key, tr.Name, tr.IsError, tr.Text())
		}
	}
	if in.Key != recall.ConversationKey(in.System, in.Goal) {
		t.Errorf("key %q", in.Key)
	}
}

func TestReadStringInputAndDuplicates(t *testing.T) {
	r, err := read([]byte(`{"model":"m","input":"Parse a CSV file [[mock:echo]]"}`), "t", nil)
	if err != nil || r.info.Goal != "Parse a CSV file" {
		t.Fatalf("goal %q, %v", r.info.Goal, err)
	}
	var dup *wire.DuplicateKeyError
	if _, err := read([]byte(`{"input":"a","input":"b"}`), "t", nil); !errors.As(err, &dup) || dup.Key != "input" {
		t.Fatalf("err = %v", err)
	}
	var je *wire.JSONError
	if _, err := read([]byte(`{"input":`), "t", nil); !errors.As(err, &je) {
		t.Fatalf("err = %v", err)
	}
}

// TestPreviousResponseChain: a request that continues a stored response
// carries only its new items; the conversation's task, tools and the
// names of the calls the response made come from the chain memory, per
// tenant.
func TestPreviousResponseChain(t *testing.T) {
	ch := newChains(8)
	first := `{"model":"m","input":[{"role":"user","content":"Fix the build"}]}`
	r, err := read([]byte(first), "t", ch)
	if err != nil {
		t.Fatal(err)
	}
	o := r.Observe(true, 0)
	o.Write([]byte(completedStream("resp_1", `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"run_shell","arguments":"{}"}`)))
	if out := o.Outcome(); out.Failure != "" || out.Final {
		t.Fatalf("first turn: %+v", out)
	}
	next := `{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_1","output":"exit code 1"}]}`
	r2, err := read([]byte(next), "t", ch)
	if err != nil {
		t.Fatal(err)
	}
	in := r2.Info()
	if in.Goal != "Fix the build" || in.Key != r.info.Key || strings.Join(in.Tools, ",") != "run_shell" || in.ToolResults[0].Name != "run_shell" {
		t.Fatalf("continued turn: goal %q key %q tools %v results %+v", in.Goal, in.Key, in.Tools, in.ToolResults)
	}
	// Another tenant does not continue this tenant's chain.
	r3, _ := read([]byte(next), "other", ch)
	if r3.info.Goal != "" || r3.info.ToolResults[0].Name != "" {
		t.Fatalf("another tenant read %q / %q", r3.info.Goal, r3.info.ToolResults[0].Name)
	}
	// A response the provider was asked not to store (Codex CLI sends
	// "store": false) cannot be continued: nothing is kept of it.
	for _, store := range []string{"false", "true"} {
		r, err := read([]byte(`{"model":"m","store":`+store+`,"input":[{"role":"user","content":"Fix the build"}]}`), "t", ch)
		if err != nil {
			t.Fatal(err)
		}
		o := r.Observe(true, 0)
		o.Write([]byte(completedStream("resp_"+store, `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"run_shell","arguments":"{}"}`)))
		o.Outcome()
		if kept := ch.get("t", "resp_"+store) != nil; kept != (store == "true") {
			t.Fatalf("store %s: chain state kept %v", store, kept)
		}
	}
}

func completedStream(id, item string) string {
	return "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"" + id + "\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":" + item + "}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":2,\"output_index\":0,\"item\":" + item + "}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":3,\"response\":{\"id\":\"" + id + "\",\"object\":\"response\",\"status\":\"completed\",\"output\":[" + item + "]}}\n\n"
}

const textItem = `{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello world","annotations":[]}]}`

func textStream(id string) string {
	s := completedStream(id, textItem)
	at := strings.Index(s, "event: response.output_item.done")
	return s[:at] + "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hello \"}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"world\"}\n\n" + s[at:]
}

func observe(sse bool, chunks ...[]byte) wire.Outcome {
	r := &request{}
	o := r.Observe(sse, 0)
	for _, c := range chunks {
		o.Write(c)
	}
	return o.Outcome()
}

func TestObserve(t *testing.T) {
	full := textStream("resp_1")
	tests := []struct {
		name   string
		sse    bool
		answer string
		want   wire.Outcome
	}{
		{"final answer", true, full, wire.Outcome{Final: true, Answer: "Hello world"}},
		{"a function call is not final", true, completedStream("resp_2", `{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}`), wire.Outcome{FirstCall: "c"}},
		{"cut before response.completed", true, full[:strings.Index(full, "event: response.completed")], wire.Outcome{Failure: "stream ended before response.completed"}},
		{"error event", true, full[:150] + "\n\nevent: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"The server had an error\",\"param\":null}\n\n", wire.Outcome{Failure: "The server had an error"}},
		{"response.failed", true, "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"model overloaded\"}}}\n\n", wire.Outcome{Failure: "model overloaded"}},
		{"response.incomplete", true, "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"r\",\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}\n\n", wire.Outcome{Failure: "response incomplete: max_output_tokens"}},
		{"JSON final", false, `{"id":"resp_3","object":"response","status":"completed","output":[` + textItem + `]}`, wire.Outcome{Final: true, Answer: "Hello world"}},
		{"JSON function call", false, `{"id":"resp_4","object":"response","status":"completed","output":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call","call_id":"d","name":"g","arguments":"{}"}]}`, wire.Outcome{FirstCall: "c"}},
		{"JSON usage", false, `{"id":"resp_6","object":"response","status":"completed","output":[` + textItem + `],"usage":{"input_tokens":5120,"input_tokens_details":{"cached_tokens":4096},"output_tokens":18,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":5138}}`,
			wire.Outcome{Final: true, Answer: "Hello world", Usage: wire.Usage{Input: 5120, Output: 18, CacheRead: 4096}}},
		{"JSON failed", false, `{"id":"resp_7","object":"response","status":"failed","error":{"code":"server_error","message":"model overloaded"},"output":[]}`, wire.Outcome{Failure: "model overloaded"}},
		{"JSON: the first message's text, the request echoed", false, `{"id":"resp_8","object":"response","instructions":"You are Codex.","status":"completed","output":[{"type":"reasoning","id":"rs_1","summary":[]},` + textItem + `,{"type":"message","id":"msg_2","role":"assistant","content":[{"type":"output_text","text":"Second"}]}],"tools":[{"type":"function","name":"shell"}],"usage":{"input_tokens":7,"output_tokens":2,"total_tokens":9}}`,
			wire.Outcome{Final: true, Answer: "Hello world", Usage: wire.Usage{Input: 7, Output: 2}}},
		{"JSON incomplete", false, `{"id":"resp_5","object":"response","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}`, wire.Outcome{Failure: "response incomplete: max_output_tokens"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := observe(tt.sse, []byte(tt.answer)); got != tt.want {
				t.Fatalf("outcome %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzObserve: the same stream, cut into reads anywhere, gives the same
// outcome.
func FuzzObserve(f *testing.F) {
	f.Add(textStream("resp_1"), 7, 300, 555)
	f.Add(completedStream("r", `{"type":"custom_tool_call","call_id":"c","name":"apply_patch"}`), 1, 2, 3)
	f.Add("event: error\ndata: {\"type\":\"error\",\"message\":\"x\"}\n\n", 5, 40, 90)
	f.Fuzz(func(t *testing.T, answer string, a, b, c int) {
		whole := observe(true, []byte(answer))
		if got := observe(true, agenttest.SplitAt([]byte(answer), a, b, c)...); got != whole {
			t.Fatalf("split at %d,%d,%d: %+v, whole: %+v", a, b, c, got, whole)
		}
	})
}

func inject(t *testing.T, body string, blocks ...wire.Block) []byte {
	t.Helper()
	r, err := read([]byte(body), "t", nil)
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
	oldJSON, _ := json.Marshal(old + "\nYou are Codex.")
	tests := []struct{ name, body string }{
		{"no_instructions", `{"model":"m","input":"hi"}`},
		{"string_instructions", `{"model":"m","instructions":"You are Codex.","input":[{"role":"user","content":"hi"}],"stream":true}`},
		{"instructions_with_old_block", `{"model":"m","instructions":` + string(oldJSON) + `,"input":"hi"}`},
		{"null_instructions", `{"model":"m","instructions":null,"previous_response_id":"resp_1","input":[]}`},
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
			if !strings.HasPrefix(gjson.GetBytes(out, "instructions").Str, guard.BlockStart) {
				t.Fatalf("instructions do not open with the guard: %s", out)
			}
			if again := inject(t, string(out), blocks...); !bytes.Equal(again, out) {
				t.Fatalf("re-injection is not stable:\n%s\n%s", out, again)
			}
			stripped := inject(t, string(out))
			if strings.Contains(string(stripped), guard.BlockStart) || strings.Contains(string(stripped), recall.BlockStart) {
				t.Fatalf("blocks left after strip: %s", stripped)
			}
		})
	}
	for _, body := range []string{`{"instructions":["x"],"input":"hi"}`, `{"instructions":1}`, `"just a string"`} {
		if out := inject(t, body, blocks...); string(out) != body {
			t.Fatalf("changed %s -> %s", body, out)
		}
	}
}

// FuzzInject: the rewritten body is valid JSON and keeps the client's
// bytes. With the system placement it keeps every member but
// instructions byte for byte, and its instructions open with the blocks.
// With the turn placement, a body that holds no earlier block is returned
// as is when there is nothing to place, and otherwise only gains the
// inserted blocks (a string input aside, which becomes an array), and
// placing again changes nothing.
func FuzzInject(f *testing.F) {
	f.Add(codexTurn, true, false)
	f.Add(codexTurn, true, true)
	f.Add(`{"instructions":"x"}`, true, false)
	f.Add(`{"instructions":null}`, false, false)
	f.Add(`{}`, true, true)
	f.Add(`{"input":"hi"}`, true, true)
	f.Add(`{"input":[{"role":"user","content":[]}, {"role":"user","content":"x"}]}`, true, true)
	f.Add(`{"previous_response_id":"r","input":[{"role":"user","content":""}]}`, true, true)
	f.Fuzz(func(t *testing.T, body string, withBlocks, turn bool) {
		r, err := read([]byte(body), "t", nil)
		if err != nil {
			return
		}
		p := wire.Placement{System: !turn}
		if withBlocks {
			p = turnPlacement()
			p.System = !turn
		}
		out, err := r.Inject(nil, []byte(body), p)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON from %q: %q", body, out)
		}
		in := gjson.Parse(body)
		if !in.IsObject() {
			if string(out) != body {
				t.Fatalf("a body that is not an object changed: %q", out)
			}
			return
		}
		if turn {
			checkTurnPlacement(t, body, out, p)
			return
		}
		agenttest.SameMembers(t, []byte(body), out, "instructions")
		ins := gjson.GetBytes(out, "instructions")
		if withBlocks && ins.Type == gjson.String && !strings.HasPrefix(ins.Str, guard.StopStart) {
			t.Fatalf("instructions %q", ins.Str)
		}
	})
}

// checkTurnPlacement checks a turn placement's rewrite out of body.
func checkTurnPlacement(t *testing.T, body string, out []byte, p wire.Placement) {
	agenttest.SameMembers(t, []byte(body), out, "input")
	r, err := read(out, "t", nil)
	if err != nil {
		t.Fatalf("the rewrite does not read: %v\n%s", err, out)
	}
	if again, _ := r.Inject(nil, out, p); !bytes.Equal(again, out) {
		t.Fatalf("placing again changed\n%s\ninto\n%s", out, again)
	}
	if strings.Contains(body, "###") || strings.Contains(body, wire.FrameStart) || strings.Contains(body, "\\u") {
		return // earlier blocks, or text they may hide in, are rewritten
	}
	if p.Empty() {
		if string(out) != body {
			t.Fatalf("nothing to place, yet\n%s\nbecame\n%s", body, out)
		}
		return
	}
	if gjson.Get(body, "input").Type == gjson.String {
		return
	}
	// Without the developer message, what is left is the body with at
	// most one insertion: the recall block.
	rest := out
	if item := developerItem(p); bytes.Contains(rest, item) {
		at := bytes.Index(rest, item)
		from := at
		if from > 0 && rest[from-1] == ',' {
			from--
		}
		rest = append(append([]byte(nil), rest[:from]...), rest[at+len(item):]...)
		if !gjson.Get(body, "input").Exists() {
			// An absent input is added as the last member.
			end := bytes.LastIndex(rest, []byte(`"input":[]`))
			from := end
			if rest[from-1] == ',' {
				from--
			}
			rest = append(rest[:from], rest[end+len(`"input":[]`):]...)
		}
	}
	if len(rest) < len(body) {
		t.Fatalf("bytes of the client went:\n%s\n%s", body, out)
	}
	common := 0
	for common < len(body) && body[common] == rest[common] {
		common++
	}
	tailLen := 0
	for tailLen < len(body)-common && body[len(body)-1-tailLen] == rest[len(rest)-1-tailLen] {
		tailLen++
	}
	if common+tailLen < len(body) {
		t.Fatalf("bytes of the client changed:\n%s\n%s", body, out)
	}
	if inserted := string(rest[common : len(rest)-tailLen]); inserted != "" && !strings.Contains(inserted, "RECALL") && len(rest) != len(body) {
		t.Fatalf("inserted %q", inserted)
	}
}

func TestStreamErrorIsReadAsAFailure(t *testing.T) {
	ev := New().StreamError(wire.Error{Status: 504, Message: "provider timed out", Code: "provider_timeout"})
	if got := observe(true, []byte(textStream("r")[:200]+"\n\n"), ev); got.Failure != "provider timed out" {
		t.Fatalf("%+v from %q", got, ev)
	}
}

// TestCodexRequests reads the requests Codex CLI sent, captured as they
// were (testdata/agents), in its two tool modes: "exec" scripts whose
// output is an array of parts (its default model), and function tools
// whose output is a string (gpt-5.5). Its command fails the same way on
// the first two turns.
func TestCodexRequests(t *testing.T) {
	for _, tc := range []struct {
		name   string
		failed int
	}{
		{"codex-turn1.json", 0}, {"codex-turn2.json", 1}, {"codex-turn3.json", 2},
		{"codex-gpt-5.5-turn2.json", 1}, {"codex-gpt-5.5-turn3.json", 2},
	} {
		body, err := os.ReadFile(filepath.Join("testdata", "agents", tc.name))
		if err != nil {
			t.Fatal(err)
		}
		r, err := read(body, "t", nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		in := r.Info()
		if !in.Stream || in.Model == "" || in.System == "" || in.Goal != "Write hello.py that prints hello and run it" {
			t.Fatalf("%s: model %q stream %v system %.60q goal %.80q", tc.name, in.Model, in.Stream, in.System, in.Goal)
		}
		n := 0
		for _, tr := range in.ToolResults {
			// The verdict the pipeline gives, and the error line it stores.
			if (tr.IsError || guard.ToolFailed(tr.Text())) && tr.Name != "" && strings.Contains(tr.Text(), "\nSyntaxError: ") {
				n++
			}
			// The loop breaker's view of the call: its arguments, and the
			// tool among the request's definitions.
			if args := wire.CallArgs(tr.Args); !strings.Contains(args, "print(1") {
				t.Errorf("%s: %s call arguments %q", tc.name, tr.Name, args)
			}
			// The first Codex capture sends "tools": [] (its exec tool is
			// known to the model otherwise): no definitions, no verdict.
			if defs := wire.DefinedTools(in.ToolDefs); len(defs) > 0 && !slices.Contains(defs, tr.Name) || tr.Builtin {
				t.Errorf("%s: %s (builtin %v) not among the defined tools %v", tc.name, tr.Name, tr.Builtin, wire.DefinedTools(in.ToolDefs))
			}
		}
		if n != tc.failed || in.ToolCount != tc.failed {
			t.Fatalf("%s: %d failed results of %d, want %d", tc.name, n, in.ToolCount, tc.failed)
		}
		out, err := r.Inject(nil, body, wire.Placement{Turn: agenttest.Blocks(), System: true})
		if err != nil {
			t.Fatal(err)
		}
		agenttest.SameMembers(t, body, out, "instructions")
		if !strings.HasPrefix(gjson.GetBytes(out, "instructions").Str, guard.BlockStart) {
			t.Fatalf("%s: instructions %q", tc.name, gjson.GetBytes(out, "instructions").Str)
		}
	}
}

func TestCodexAnswers(t *testing.T) {
	for name, final := range map[string]bool{
		"codex-sse-turn1.txt": false, "codex-sse-turn3.txt": true,
		"codex-gpt-5.5-sse-turn1.txt": false, "codex-gpt-5.5-sse-turn3.txt": true,
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "agents", name))
		if err != nil {
			t.Fatal(err)
		}
		got := observe(true, b)
		if got.Failure != "" || got.Final != final || (final && got.Answer == "") {
			t.Errorf("%s: %+v", name, got)
		}
	}
}

// BenchmarkRead reads Codex CLI's third turn as captured (gpt-5.5, 39 KB).
func BenchmarkRead(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "codex-gpt-5.5-turn3.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := read(body, "t", nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInject places a guard, a STOP and a recall block in Codex CLI's
// third turn as captured (gpt-5.5, 39 KB), in both placements.
func BenchmarkInject(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "agents", "codex-gpt-5.5-turn3.json"))
	if err != nil {
		b.Fatal(err)
	}
	r, err := read(body, "t", nil)
	if err != nil {
		b.Fatal(err)
	}
	blocks := agenttest.Blocks()
	stopBlock := wire.NewBlock(guard.StopBlock(guard.Loop{Kind: guard.LoopFailing, Count: 3, Level: guard.LevelStop,
		Calls: []guard.Step{{Tool: "exec_command", Args: `{"cmd":"python3 hello.py"}`, Output: "SyntaxError: '(' was never closed"}}}))
	for _, system := range []bool{false, true} {
		name := map[bool]string{false: "turn", true: "system"}[system]
		p := wire.Placement{Turn: []wire.Block{stopBlock, blocks[0]}, Recall: blocks[1], System: system}
		b.Run(name, func(b *testing.B) {
			dst := make([]byte, 0, len(body)+8192)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if dst, err = r.Inject(dst, body, p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzOutItem: an output item read in one pass gives what Get reads of it
// (of JSON: on bytes that are not, gjson's Get and ForEach disagree with
// each other).
func FuzzOutItem(f *testing.F) {
	for _, s := range []string{textItem, `{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":1}"}`,
		`{"type":"custom_tool_call","id":"ctc_1","call_id":"","name":"apply_patch"}`, `{"type":"x","type":"y","name":1}`, `[]`, `{"content":"s"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !gjson.Valid(raw) {
			return
		}
		it := gjson.Parse(raw)
		got := readOutItem(it)
		if got.typ != it.Get("type").String() || got.name != it.Get("name").String() || got.callID != callID(it) ||
			got.content.Raw != it.Get("content").Raw {
			t.Fatalf("%q: read %+v; Get: type %q, name %q, call %q, content %q", raw, got,
				it.Get("type").String(), it.Get("name").String(), callID(it), it.Get("content").Raw)
		}
	})
}
