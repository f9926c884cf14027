package gemini

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

const (
	streamPath = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
	jsonPath   = "/v1/models/gemini-2.5-pro:generateContent"
)

// cliTurn is a Gemini CLI turn in the shape it sends: a system
// instruction with a role, a user content of its context and the task, a
// model function call with its id, and its failed response; then a
// second call, answered by a response that carries an "error".
const cliTurn = `{"contents":[
 {"role":"user","parts":[{"text":"<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\n</session_context>"},{"text":"Write hello.py and run it"}]},
 {"role":"model","parts":[{"text":"I'll run it."},{"functionCall":{"id":"run_shell_command_1_0","name":"run_shell_command","args":{"command":"python3 hello.py"}},"thoughtSignature":"sig"}]},
 {"role":"user","parts":[{"functionResponse":{"id":"run_shell_command_1_0","name":"run_shell_command","response":{"output":"Output: SyntaxError: '(' was never closed\nExit Code: 1"}}}]},
 {"role":"model","parts":[{"text":"thinking","thought":true},{"functionCall":{"name":"read_file","args":{"file_path":"hello.py"}}}]},
 {"role":"user","parts":[{"functionResponse":{"name":"read_file","response":{"error":"File not found: hello.py"}}}]}
],"systemInstruction":{"role":"user","parts":[{"text":"You are Gemini CLI."},{"text":"Be careful."}]},
"tools":[{"functionDeclarations":[{"name":"run_shell_command","parametersJsonSchema":{"type":"object"}},{"name":"read_file"}]}],
"generationConfig":{"temperature":1}}`

func readAt(t testing.TB, path, body string) *request {
	t.Helper()
	r, err := read([]byte(body), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRead(t *testing.T) {
	in := readAt(t, streamPath, cliTurn).Info()
	if in.Model != "gemini-2.5-flash" || !in.Stream || in.User != "" {
		t.Errorf("model %q stream %v user %q", in.Model, in.Stream, in.User)
	}
	if in.System != "You are Gemini CLI.\nBe careful." {
		t.Errorf("system %q", in.System)
	}
	// The context the CLI puts before the task is not the task.
	if in.Goal != "Write hello.py and run it" || !in.Later {
		t.Errorf("goal %q, later %v", in.Goal, in.Later)
	}
	if strings.Join(in.Tools, ",") != "run_shell_command,read_file" || in.ToolCount != 2 || len(in.ToolResults) != 2 {
		t.Fatalf("tools %v, %d results, %d read", in.Tools, in.ToolCount, len(in.ToolResults))
	}
	shell, read := in.ToolResults[0], in.ToolResults[1]
	if shell.Key != "call:run_shell_command_1_0" || shell.Name != "run_shell_command" || shell.IsError || shell.At != 2 ||
		shell.Text() != "Output: SyntaxError: '(' was never closed\nExit Code: 1" || !guard.ToolFailed(shell.Text()) {
		t.Errorf("shell result %+v, text %q", shell, shell.Text())
	}
	if wire.CallArgs(shell.Args) != `{"command":"python3 hello.py"}` || wire.NoteText(shell.Note) != "I'll run it." {
		t.Errorf("shell call %s, note %s", shell.Args, shell.Note)
	}
	// A response without an id is matched with its call in order, and
	// named by where it stands; its "error" is authoritative.
	if !strings.HasPrefix(read.Key, "hash:") || read.Name != "read_file" || !read.IsError || read.Text() != "File not found: hello.py" ||
		wire.CallArgs(read.Args) != `{"file_path":"hello.py"}` || read.Note != nil {
		t.Errorf("read_file result %+v, text %q", read, read.Text())
	}
	if got := wire.DefinedTools(in.ToolDefs); !slices.Equal(got, []string{"run_shell_command", "read_file"}) {
		t.Errorf("defined tools %v", got)
	}
	if in.Key == "" || in.Key != recall.ConversationKey(in.System, in.Goal) {
		t.Errorf("conversation key %q", in.Key)
	}
	if in := readAt(t, jsonPath, `{"contents":[{"parts":[{"text":"hi"}]}]}`).Info(); in.Model != "gemini-2.5-pro" || in.Stream || in.Goal != "hi" || in.Later {
		t.Errorf("a one-content request: %+v", in)
	}
}

func TestReadResponses(t *testing.T) {
	tests := []struct {
		name, response string
		isError        bool
		text           string
		failed         bool // the verdict of the guard on the text
	}{
		{"output", `{"output":"hello"}`, false, "hello", false},
		{"output with an exit code", `{"output":"Output: boom\nExit Code: 2"}`, false, "Output: boom\nExit Code: 2", true},
		{"error string", `{"error":"Command failed"}`, true, "Command failed", true},
		{"error object", `{"error":{"code":3,"message":"bad path"}}`, true, "bad path", true},
		{"empty error", `{"error":"","output":"fine"}`, false, `{"error":"","output":"fine"}`, false},
		{"null error", `{"error":null}`, false, `{"error":null}`, false},
		{"success false", `{"success":false,"output":"x"}`, false, `{"success":false,"output":"x"}`, true},
		{"exit code", `{"output":"x","exit_code":1}`, false, `{"output":"x","exit_code":1}`, true},
		{"whole response", `{"files":["a.go"]}`, false, `{"files":["a.go"]}`, false},
		{"not an object", `"text"`, false, "text", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"contents":[{"role":"user","parts":[{"text":"go"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},` +
				`{"role":"user","parts":[{"function_response":{"name":"f","response":` + tt.response + `}}]}]}`
			trs := readAt(t, jsonPath, body).Info().ToolResults
			if len(trs) != 1 {
				t.Fatalf("%d results", len(trs))
			}
			tr := trs[0]
			if tr.IsError != tt.isError || tr.Text() != tt.text || (tr.IsError || guard.ToolFailed(tr.Text())) != tt.failed {
				t.Fatalf("is_error %v, text %q, failed %v", tr.IsError, tr.Text(), tr.IsError || guard.ToolFailed(tr.Text()))
			}
		})
	}
}

// TestReadKeys: responses without ids are told apart by where they
// stand, so a call that fails the same way twice is two failures; with
// ids, by their ids.
func TestReadKeys(t *testing.T) {
	round := `{"role":"model","parts":[{"functionCall":{"name":"f","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"error":"boom"}}}]}`
	body := `{"contents":[{"role":"user","parts":[{"text":"go"}]},` + round + `,` + round + `]}`
	trs := readAt(t, jsonPath, body).Info().ToolResults
	if len(trs) != 2 || trs[0].Key == trs[1].Key {
		t.Fatalf("keys %+v", trs)
	}
	again := readAt(t, jsonPath, body).Info().ToolResults
	if again[0].Key != trs[0].Key || again[1].Key != trs[1].Key {
		t.Fatal("the keys change from one reading to the next")
	}
}

func TestReadRefuses(t *testing.T) {
	tests := []struct {
		name, path, body string
		dup              bool
		json             bool
	}{
		{"not JSON", jsonPath, `{"contents":[`, false, true},
		{"two contents members", jsonPath, `{"contents":[],"contents":[{"parts":[{"text":"x"}]}]}`, true, false},
		{"both spellings of the system instruction", jsonPath, `{"systemInstruction":{},"system_instruction":{},"contents":[]}`, true, false},
		{"another method", "/v1beta/models/m:countTokens", `{}`, false, false},
		{"no model", "/v1beta/models/:generateContent", `{}`, false, false},
		{"not a model path", "/v1beta/tunedModels/m:generateContent", `{}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := read([]byte(tt.body), tt.path, nil)
			var dup *wire.DuplicateKeyError
			var je *wire.JSONError
			if err == nil || errors.As(err, &dup) != tt.dup || errors.As(err, &je) != tt.json {
				t.Fatalf("err = %v", err)
			}
		})
	}
	if m, method, err := ParsePath("/v1beta/models/tuned%2Fx-1:streamGenerateContent"); err != nil || m != "tuned/x-1" || method != MethodStream {
		t.Fatalf("ParsePath: %q %q %v", m, method, err)
	}
}

func injectSystem(t *testing.T, body string, blocks ...wire.Block) []byte {
	t.Helper()
	r := readAt(t, jsonPath, body)
	out, err := r.Inject(nil, []byte(body), wire.Placement{Turn: blocks, System: true})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInjectSystemGolden(t *testing.T) {
	blocks := agenttest.Blocks()
	old := guard.Block([]guard.Entry{{Pattern: "RATE LIMIT", Count: 3, Hint: "Slow down."}})
	tests := []struct{ name, body string }{
		{"no_system", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"empty_object", `{}`},
		{"system", `{"systemInstruction":{"role":"user","parts":[{"text":"Be terse."}]},"contents":[]}`},
		{"proto_name", `{"system_instruction":{"parts":[{"text":"Be terse."}]},"contents":[]}`},
		{"null_system", `{"systemInstruction":null,"contents":[]}`},
		{"system_without_parts", `{"systemInstruction":{"role":"user"},"contents":[]}`},
		{"system_with_old_block", `{"systemInstruction":{"parts":[{"text":` + jsonString(old) + `},{"text":` + jsonString(old+"\nBe terse.") + `}]},"contents":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := injectSystem(t, tc.body, blocks...)
			if !json.Valid(out) {
				t.Fatalf("invalid JSON: %s", out)
			}
			var pretty bytes.Buffer
			json.Indent(&pretty, out, "", "  ")
			agenttest.Golden(t, "inject_"+tc.name+".json", pretty.Bytes())

			in := readAt(t, jsonPath, string(out)).Info()
			if !strings.HasPrefix(in.System, guard.BlockStart) || strings.Count(in.System, guard.BlockStart) != 1 {
				t.Fatalf("the system text does not open with the guard, once: %q", in.System)
			}
			// Injecting again changes nothing: a block never appears twice.
			if again := injectSystem(t, string(out), blocks...); !bytes.Equal(again, out) {
				t.Fatalf("re-injection is not stable:\n%s\n%s", out, again)
			}
			// Injecting nothing takes the blocks out again.
			stripped := injectSystem(t, string(out))
			if strings.Contains(string(stripped), guard.BlockStart) || strings.Contains(string(stripped), recall.BlockStart) {
				t.Fatalf("blocks left after strip: %s", stripped)
			}
		})
	}
}

func TestInjectLeavesWhatItCannotRead(t *testing.T) {
	for _, body := range []string{
		`{"systemInstruction":"KEEP ME","contents":[]}`,
		`{"systemInstruction":{"parts":"KEEP ME"},"contents":[]}`,
		`[1,2]`,
		`{"systemInstruction":{"parts":[{"text":"x"}]},"contents":[]}`, // nothing to inject
	} {
		var blocks []wire.Block
		if !strings.Contains(body, `"x"`) {
			blocks = agenttest.Blocks()
		}
		if out := injectSystem(t, body, blocks...); string(out) != body {
			t.Fatalf("changed %s -> %s", body, out)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestHardStop(t *testing.T) {
	f := New()
	for _, tc := range []struct{ body, want string }{
		{`{"contents":[]}`, `{"toolConfig":{"functionCallingConfig":{"mode":"NONE"}},"contents":[]}`},
		{`{"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]},"retrievalConfig":{"languageCode":"en"}}}`,
			`{"toolConfig":{"functionCallingConfig":{"mode":"NONE"},"retrievalConfig":{"languageCode":"en"}}}`},
		{`{"tool_config":{"function_calling_config":{"mode":"AUTO"}}}`, `{"tool_config":{"function_calling_config":{"mode":"NONE"}}}`},
		{`{"tool_config":{}}`, `{"tool_config":{"functionCallingConfig":{"mode":"NONE"}}}`},
		{`{"toolConfig":null}`, `{"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`},
	} {
		got, err := f.HardStop([]byte(tc.body))
		if err != nil || string(got) != tc.want {
			t.Errorf("HardStop(%s) = %s, %v; want %s", tc.body, got, err, tc.want)
		}
	}
	for _, body := range []string{`{"toolConfig":{},"tool_config":{}}`, `{"toolConfig":{"functionCallingConfig":{},"function_calling_config":{}}}`, `[`} {
		if _, err := f.HardStop([]byte(body)); err == nil {
			t.Errorf("HardStop(%s) did not refuse", body)
		}
	}
}

// FuzzInject: whatever the (valid JSON) body, the rewritten body is valid
// JSON. In the system instruction: every member but it keeps its bytes,
// and the system text opens with the blocks, once. In the turns: the
// blocks go where a plain reference puts them (placeRef: the client's
// bytes around them kept), every member but contents keeps its bytes,
// and nothing placed gives the body itself. The hard stop keeps JSON
// valid too.
func FuzzInject(f *testing.F) {
	f.Add(cliTurn, true)
	f.Add(`{"systemInstruction":{"parts":[{"text":"x"}]}}`, true)
	f.Add(`{"system_instruction":{"parts":[{"text":"a"},{"inlineData":{}}]},"contents":[]}`, false)
	f.Add(`{ }`, true)
	f.Add(`{"systemInstruction":null}`, true)
	f.Add(`{"contents":[{"parts":[{"text":"hi"}]},{"role":"model","parts":[{"text":"{"}]}]}`, true)
	f.Add(`{"contents":[{"role":"user","parts":[ ]},{"role":"user","parts":[{"text":""}]}],"toolConfig":{"functionCallingConfig":{}}}`, true)
	f.Fuzz(func(t *testing.T, body string, withBlocks bool) {
		r, err := read([]byte(body), jsonPath, nil)
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
				agenttest.SameMembers(t, []byte(body), out, r.systemKey)
				if n := strings.Count(string(out), jsonEscaped(guard.BlockStart)); withBlocks && !bytes.Equal(out, []byte(body)) && n != 1 {
					t.Fatalf("the guard appears %d times: %s", n, out)
				}
			}
		}
		if stopped, err := hardStop([]byte(body)); err == nil && !json.Valid(stopped) {
			t.Fatalf("hard stop: invalid JSON from %q: %q", body, stopped)
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
			agenttest.SameMembers(t, in, out, "contents")
		}
	})
}

// FuzzRead: any body reads without a panic, and one that reads reads the
// same twice, and the same through the memory of system instructions
// (whose threshold the fuzzer's bodies may pass with a long text).
func FuzzRead(f *testing.F) {
	f.Add(cliTurn)
	f.Add(`{"contents":{"role":"user"}}`)
	f.Add(`{"contents":[{"role":"function","parts":[{"functionResponse":{"id":"a"}}]}]}`)
	f.Add(`{"systemInstruction":{"parts":[{"text":"` + strings.Repeat(`a"b`, 400) + `"}]},"contents":[]}`)
	memo := newSystemMemo()
	f.Fuzz(func(t *testing.T, body string) {
		a, err := read([]byte(body), streamPath, nil)
		if err != nil {
			return
		}
		b, _ := read([]byte(body), streamPath, memo)
		x, y := a.Info(), b.Info()
		if x.Goal != y.Goal || x.Key != y.Key || x.System != y.System || x.ToolCount != y.ToolCount || len(x.ToolResults) != len(y.ToolResults) {
			t.Fatalf("two readings differ: %+v, %+v", x, y)
		}
		for i := range x.ToolResults {
			if x.ToolResults[i].Key != y.ToolResults[i].Key || x.ToolResults[i].Text() != y.ToolResults[i].Text() {
				t.Fatalf("result %d differs", i)
			}
		}
	})
}

func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// chunkJSON is one chunk of a Gemini stream as the API sends it.
func chunkJSON(parts, finish, usage string) string {
	c := `{"candidates":[{"content":{"parts":` + parts + `,"role":"model"},"index":0`
	if finish != "" {
		c += `,"finishReason":"` + finish + `"`
	}
	c += `}]`
	if usage != "" {
		c += `,"usageMetadata":` + usage
	}
	return c + `,"modelVersion":"gemini-2.5-flash","responseId":"abc"}`
}

const (
	partialUsage = `{"promptTokenCount":1200,"totalTokenCount":1200,"promptTokensDetails":[{"modality":"TEXT","tokenCount":1200}]}`
	fullUsage    = `{"promptTokenCount":1200,"candidatesTokenCount":7,"totalTokenCount":1230,"cachedContentTokenCount":1024,"thoughtsTokenCount":23,"promptTokensDetails":[{"modality":"TEXT","tokenCount":1200}]}`
)

// sse is an alt=sse stream: a text answer, or a function call.
func sse(finish string, call bool) string {
	s := "data: " + chunkJSON(`[{"text":"Hello "}]`, "", partialUsage) + "\r\n\r\n" +
		"data: " + chunkJSON(`[{"text":"thinking","thought":true}]`, "", partialUsage) + "\r\n\r\n"
	last := `[{"text":"world"}]`
	if call {
		last = `[{"functionCall":{"name":"run_shell_command","args":{"command":"ls"}},"thoughtSignature":"c2ln"}]`
	}
	return s + "data: " + chunkJSON(last, finish, fullUsage) + "\r\n\r\n"
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
	errChunk := "data: {\"error\":{\"code\":503,\"message\":\"The model is overloaded.\",\"status\":\"UNAVAILABLE\"}}\r\n\r\n"
	full := sse("STOP", false)
	// promptTokenCount counts the cached tokens; the thoughts are output.
	used := wire.Usage{Input: 1200, Output: 30, CacheRead: 1024}
	started := wire.Usage{Input: 1200}
	array := "[" + chunkJSON(`[{"text":"Hello "}]`, "", partialUsage) + "\n,\r\n" + chunkJSON(`[{"text":"world"}]`, "STOP", fullUsage) + "]"
	tests := []struct {
		name   string
		sse    bool
		answer string
		want   wire.Outcome
	}{
		{"final answer", true, full, wire.Outcome{Final: true, Answer: "Hello world", Usage: used}},
		{"a function call is not final", true, sse("STOP", true), wire.Outcome{Answer: "Hello ", Usage: used}},
		{"max tokens is not final", true, sse("MAX_TOKENS", false), wire.Outcome{Answer: "Hello world", Usage: used}},
		{"cut before the finishReason", true, full[:strings.LastIndex(full, "data: ")], wire.Outcome{Failure: "stream ended before a finishReason", Usage: started}},
		{"error chunk", true, full[:strings.LastIndex(full, "data: ")] + errChunk, wire.Outcome{Failure: "The model is overloaded.", Usage: started}},
		{"LF lines", true, strings.ReplaceAll(full, "\r\n", "\n"), wire.Outcome{Final: true, Answer: "Hello world", Usage: used}},
		{"blocked prompt", true, "data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"},\"usageMetadata\":{\"promptTokenCount\":9}}\r\n\r\n", wire.Outcome{Usage: wire.Usage{Input: 9}}},
		{"JSON final", false, chunkJSON(`[{"text":"Done."}]`, "STOP", fullUsage), wire.Outcome{Final: true, Answer: "Done.", Usage: used}},
		{"JSON function call", false, chunkJSON(`[{"functionCall":{"name":"f","args":{}}}]`, "STOP", ""), wire.Outcome{}},
		{"JSON array of chunks", false, array, wire.Outcome{Final: true, Answer: "Hello world", Usage: used}},
		{"JSON snake_case call with its id", false, chunkJSON(`[{"text":"Let me look."},{"function_call":{"id":"c9","name":"f","args":{}}}]`, "STOP", ""), wire.Outcome{Answer: "Let me look.", FirstCall: "c9"}},
		{"JSON call with its id first", false, chunkJSON(`[{"functionCall":{"id":"c1","name":"f","args":{}},"thoughtSignature":"`+strings.Repeat("c2ln", 512)+`"}]`, "STOP", ""), wire.Outcome{FirstCall: "c1"}},
		{"a thought is no answer", false, chunkJSON(`[{"thought":true,"text":"Thinking."},{"text":"Done."}]`, "STOP", ""), wire.Outcome{Final: true, Answer: "Done."}},
		{"members in another order", false, `{"usageMetadata":` + fullUsage + `,"candidates":[{"finishReason":"STOP","content":{"role":"model","parts":[{"text":"Done."}]}}]}`, wire.Outcome{Final: true, Answer: "Done.", Usage: used}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := observe(tt.sse, 1<<20, []byte(tt.answer)); got != tt.want {
				t.Fatalf("outcome %+v, want %+v", got, tt.want)
			}
			if !tt.sse {
				// Not kept whole: the usage, read from its tail.
				if got := observe(false, 0, []byte(tt.answer)); got != (wire.Outcome{Usage: tt.want.Usage}) {
					t.Fatalf("from the tail: %+v", got)
				}
			}
		})
	}
}

// FuzzObserve: the same stream, cut into reads anywhere, gives the same
// outcome.
func FuzzObserve(f *testing.F) {
	f.Add(sse("STOP", false), 7, 300, 555)
	f.Add(sse("STOP", true)[:400], 1, 2, 3)
	f.Add("data: {\"error\":{\"code\":500,\"message\":\"x\",\"status\":\"INTERNAL\"}}\n\n", 5, 40, 90)
	f.Fuzz(func(t *testing.T, answer string, a, b, c int) {
		whole := observe(true, 0, []byte(answer))
		if got := observe(true, 0, agenttest.SplitAt([]byte(answer), a, b, c)...); got != whole {
			t.Fatalf("split at %d,%d,%d: %+v, whole: %+v", a, b, c, got, whole)
		}
	})
}

func TestErrorShapes(t *testing.T) {
	tests := []struct {
		e      wire.Error
		status string
	}{
		{wire.Error{Status: 400}, "INVALID_ARGUMENT"}, {wire.Error{Status: 401}, "UNAUTHENTICATED"}, {wire.Error{Status: 403}, "PERMISSION_DENIED"},
		{wire.Error{Status: 404}, "NOT_FOUND"}, {wire.Error{Status: 413}, "INVALID_ARGUMENT"}, {wire.Error{Status: 426}, "FAILED_PRECONDITION"},
		{wire.Error{Status: 429}, "RESOURCE_EXHAUSTED"}, {wire.Error{Status: 500}, "INTERNAL"}, {wire.Error{Status: 502}, "UNAVAILABLE"},
		{wire.Error{Status: 503}, "UNAVAILABLE"}, {wire.Error{Status: 504}, "DEADLINE_EXCEEDED"}, {wire.Error{Status: 502, Type: "timeout"}, "DEADLINE_EXCEEDED"},
	}
	f := New()
	for _, tt := range tests {
		e := tt.e
		e.Message = "why"
		b := f.Error(e)
		if gjson.GetBytes(b, "error.code").Int() != int64(e.Status) || gjson.GetBytes(b, "error.status").Str != tt.status || gjson.GetBytes(b, "error.message").Str != "why" {
			t.Errorf("%d: %s", e.Status, b)
		}
		ev := string(f.StreamError(e))
		if !strings.HasPrefix(ev, "data: {\"error\":") || !strings.HasSuffix(ev, "\n\n") {
			t.Errorf("%d: stream error %q", e.Status, ev)
		}
		full := sse("STOP", false)
		if got := observe(true, 0, []byte(full[:strings.LastIndex(full, "data: ")]), []byte(ev)); got.Failure != "why" {
			t.Errorf("%d: the observer reads the proxy's own stream error as %+v", e.Status, got)
		}
	}
}

// TestSystemMemo: the format reads the CLI's system instruction as
// decoding it does, through its memo or not, with the conversation's key.
func TestSystemMemo(t *testing.T) {
	body := agentBody(t, "gemini-cli-turn3")
	sp, err := wire.Members(body, "systemInstruction")
	if err != nil {
		t.Fatal(err)
	}
	want := systemText(sp[0].Raw(body))
	if text, start := newSystemMemo().Text(sp[0].Raw(body)); text != want || start == nil {
		t.Fatal("the memo does not remember the CLI's system instruction")
	}
	// The format's key, the system text's first remembered, then not.
	f := New()
	for range 2 {
		r, err := f.Read(body, wire.Route{Path: streamPath})
		if err != nil || r.Info().System != want {
			t.Fatalf("the format reads %v", err)
		}
		if in := r.Info(); in.Goal == "" || in.Key != recall.ConversationKey(wire.Strip(want), in.Goal) {
			t.Fatalf("the format's key %q for the task %.40q", in.Key, in.Goal)
		}
	}
}

func agentBody(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "agents", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGeminiCLIRequests reads the requests the Gemini CLI sent, captured
// as they were (testdata/agents): its shell command fails the same way on
// the first two turns.
func TestGeminiCLIRequests(t *testing.T) {
	for turn, failed := range []int{0, 1, 2} {
		name := fmt.Sprintf("gemini-cli-turn%d", turn+1)
		body := agentBody(t, name)
		in := readAt(t, "/v1beta/models/gemini-3.8-flash:streamGenerateContent", string(body)).Info()
		if !in.Stream || in.Model != "gemini-3.8-flash" || !strings.HasPrefix(in.System, "You are Gemini CLI") || in.Goal != "Write hello.py that prints hello and run it" || in.Later != (turn > 0) {
			t.Fatalf("%s: model %q stream %v system %.60q goal %.80q later %v", name, in.Model, in.Stream, in.System, in.Goal, in.Later)
		}
		n := 0
		for _, tr := range in.ToolResults {
			if !tr.IsError && tr.Name == "run_shell_command" && guard.ToolFailed(tr.Text()) && strings.HasPrefix(tr.Key, "call:run_shell_command_") {
				n++
			}
			// The loop breaker's view of the call: its arguments, and the
			// tool among the request's definitions.
			if args := wire.CallArgs(tr.Args); args != `{"command":"python3 hello.py","description":"Run hello.py"}` {
				t.Errorf("%s: call arguments %q", name, args)
			}
			if !slices.Contains(wire.DefinedTools(in.ToolDefs), tr.Name) {
				t.Errorf("%s: %s not among the defined tools %v", name, tr.Name, wire.DefinedTools(in.ToolDefs))
			}
		}
		if n != failed || in.ToolCount != failed {
			t.Fatalf("%s: %d failed shell results of %d, want %d", name, n, in.ToolCount, failed)
		}
		out := injectAtPath(t, body, wire.Placement{Turn: agenttest.Blocks(), System: true})
		agenttest.SameMembers(t, body, out, "systemInstruction")
		sys := gjson.GetBytes(out, "systemInstruction")
		if !strings.HasPrefix(sys.Get("parts.0.text").Str, guard.BlockStart) || sys.Get("role").Str != "user" ||
			sys.Get("parts.1").Raw != gjson.GetBytes(body, "systemInstruction.parts.0").Raw {
			t.Fatalf("%s: system instruction %.300s", name, sys.Raw)
		}
	}
	// The CLI's router asks a small model for JSON; it is a conversation
	// of its own, whose task is the same.
	in := readAt(t, "/v1beta/models/gemini-3.5-flash-lite:generateContent", string(agentBody(t, "gemini-cli-router"))).Info()
	if in.Stream || in.Goal != "Write hello.py that prints hello and run it" || in.Later {
		t.Fatalf("router: %+v", in)
	}
}

func injectAtPath(t testing.TB, body []byte, p wire.Placement) []byte {
	t.Helper()
	r := readAt(t, streamPath, string(body))
	out, err := r.Inject(nil, body, p)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
	return out
}

// BenchmarkRead reads the Gemini CLI's third turn as captured (47 KB, 30
// of them its system instruction): with a system instruction the format
// has not seen, and with one it has (every turn of a conversation but
// the first).
func BenchmarkRead(b *testing.B) {
	body := agentBody(b, "gemini-cli-turn3")
	for _, bc := range []struct {
		name string
		memo *wire.SystemMemo
	}{{"first", nil}, {"again", newSystemMemo()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := read(body, streamPath, bc.memo); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInject places the blocks into the Gemini CLI's third turn as
// captured, in each placement.
func BenchmarkInject(b *testing.B) {
	body := agentBody(b, "gemini-cli-turn3")
	g, rc := agenttest.BlockParts()
	r, err := read(body, streamPath, nil)
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

// BenchmarkReadInject is what the format costs a request: reading the
// Gemini CLI's third turn (its system instruction seen before) and
// placing a guard in it (guard.placement: turn), as BenchmarkReadInject
// of proxy/messages does for Claude Code's.
func BenchmarkReadInject(b *testing.B) {
	body := agentBody(b, "gemini-cli-turn3")
	g, rc := agenttest.BlockParts()
	p := wire.Placement{Turn: []wire.Block{wire.NewBlock(g)}, Recall: wire.NewBlock(rc)}
	dst := make([]byte, 0, 2*len(body))
	memo := newSystemMemo()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := read(body, streamPath, memo)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Inject(dst, body, p); err != nil {
			b.Fatal(err)
		}
	}
}
