package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/guard"
	mockprovider "github.com/scarproxy/scarproxy/providers/mock"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
)

// mockUpstream is a provider that answers as the mock provider does,
// recording what it was sent.
func mockUpstream(t *testing.T) *recorder {
	mock := &http.Client{Transport: mockprovider.New()}
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, err := http.NewRequest(r.Method, "http://mock"+strings.TrimPrefix(r.URL.RequestURI(), "/v1"), bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return
		}
		req.Header = r.Header.Clone()
		res, err := mock.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		io.Copy(w, res.Body)
	})
}

// toolFailuresOf sends body, a request of an agent, to path on a proxy in
// front of the mock and returns the tool failures it recorded.
func toolFailuresOf(t *testing.T, path string, body []byte) []string {
	t.Helper()
	up := mockUpstream(t)
	h := newHarness(t, "", withProviders(allAPIs(up.srv.URL+"/v1")))
	res := h.do(http.MethodPost, path, body, nil)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	h.inflight.Wait()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	var tools []string
	for _, in := range h.incidents("default", "default") {
		if in.Type == store.TypeToolError {
			tools = append(tools, in.Message)
		}
	}
	return tools
}

// TestRealAgentLoopIsStopped replays requests that real agents (Claude
// Code, qwen-code, the Gemini CLI, Codex CLI with gpt-5.5's exec_command
// and with its default model's code-mode exec tool) sent through scarproxy in front of
// the mock's scripted loop (a "cat config/settings.json" that fails until
// the STOP block appears, then a call that creates the file), captured as
// they were in each format's testdata/agents:
//
//   - *-loop-stop.json: the turn that carries the fourth identical failure;
//   - *-loop-fix.json: the next turn, which carries the fixed call's success.
//
// A new proxy sees the stop turn first: it must send it on with the STOP
// block opening the system text, answer X-Scar-Loop: stop and store the
// loop; then the fix turn, which no header ties to the first (the
// conversation is derived, as for the agents), must go out without a STOP
// block, end the loop and leave the successful call as the learned fix of
// the failure. The upstream is the mock behind an httptest server, so the
// answers are the ones the agents got.
func TestRealAgentLoopIsStopped(t *testing.T) {
	tests := []struct {
		name    string
		path    string // as the agent sent it
		dir     string // testdata directory and file prefix
		system  string // where the blocks are in the forwarded body
		tool    string
		fixArgs string // the fixed call's arguments (a custom tool's input)
		fixCall string // the learned fix's call: fixArgs, trimmed (the same when fixArgs is empty)
		// Replacements in the captured bodies: Codex's random chunk ids
		// made to read as a number, a duration, a word: the failures
		// must stay one, with one fingerprint.
		replace *strings.Replacer
	}{
		{
			name: "claude code", path: "/v1/messages?beta=true", dir: "messages/testdata/agents/claude",
			system: newestMessagesBlock, // framed: see unframed
			tool:   "Bash",
			fixCall: `{"command":"mkdir -p config && echo '{\"port\":8080}' > config/settings.json",` +
				`"description":"Create settings"}`,
		},
		{
			name: "qwen code", path: "/v1/chat/completions", dir: "chat/testdata/agents/qwen",
			system: "messages.@reverse.0.content.@reverse.0.text", // a part after the newest tool result's
			tool:   "run_shell_command",
			fixCall: `{"command":"mkdir -p config && echo '{\"port\":8080}' > config/settings.json",` +
				`"description":"Create settings"}`,
		},
		{
			name: "gemini cli", path: "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse", dir: "gemini/testdata/agents/gemini-cli",
			system: "contents.@reverse.0.parts.@reverse.0.text", // a text part after the newest function response
			tool:   "run_shell_command",
			fixCall: `{"command":"mkdir -p config && echo '{\"port\":8080}' > config/settings.json",` +
				`"description":"Create settings"}`,
		},
		{
			name: "codex gpt-5.5 exec_command", path: "/v1/responses", dir: "responses/testdata/agents/codex-gpt-5.5",
			system:  "input|@reverse|0.content.0.text", // a developer message after Codex's items
			tool:    "exec_command",
			fixCall: `{"cmd":"mkdir -p config && echo '{\"port\":8080}' > config/settings.json"}`,
		},
		{
			name: "codex gpt-5.5 exec_command, chunk ids of every kind", path: "/v1/responses", dir: "responses/testdata/agents/codex-gpt-5.5",
			system:  "input|@reverse|0.content.0.text",
			tool:    "exec_command",
			fixCall: `{"cmd":"mkdir -p config && echo '{\"port\":8080}' > config/settings.json"}`,
			replace: strings.NewReplacer("Chunk ID: 29d910", "Chunk ID: 123456", "Chunk ID: f7e94e", "Chunk ID: 64577d",
				"Chunk ID: 5bcea5", "Chunk ID: abcdef"),
		},
		{
			name: "codex code mode exec", path: "/v1/responses", dir: "responses/testdata/agents/codex",
			system: "input|@reverse|0.content.0.text",
			tool:   "exec",
			fixArgs: "const r = await tools.exec_command({ cmd: \"mkdir -p config && echo '{\\\"port\\\":8080}' > config/settings.json\" });\n" +
				"text(r);\n",
			fixCall: "const r = await tools.exec_command({ cmd: \"mkdir -p config && echo '{\\\"port\\\":8080}' > config/settings.json\" });\n" +
				"text(r);",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := mockUpstream(t)
			h := newHarness(t, "", withProviders(allAPIs(up.srv.URL+"/v1")))
			send := func(file string) (*http.Response, []byte, received) {
				t.Helper()
				body, err := os.ReadFile(filepath.Join(tt.dir + "-loop-" + file + ".json"))
				if err != nil {
					t.Fatal(err)
				}
				if tt.replace != nil {
					replaced := []byte(tt.replace.Replace(string(body)))
					if bytes.Equal(replaced, body) {
						t.Fatalf("%s turn: nothing replaced", file)
					}
					body = replaced
				}
				n := up.count()
				res := h.do(http.MethodPost, tt.path, body, nil)
				answer, _ := io.ReadAll(res.Body)
				res.Body.Close()
				h.inflight.Wait()
				if res.StatusCode != 200 || up.count() != n+1 {
					t.Fatalf("%s turn: %d %.300s (upstream %d requests)", file, res.StatusCode, answer, up.count()-n)
				}
				return res, answer, up.last(t)
			}
			loops := func() []string {
				t.Helper()
				var codes []string
				for _, in := range h.incidents("default", "default") {
					if in.Type == store.TypeLoop {
						codes = append(codes, in.Code)
					}
				}
				return codes
			}

			// The turn with four failures of the same call.
			res, _, got := send("stop")
			sys := gjson.GetBytes(got.Body, tt.system).Str
			if inner := unframed(sys); inner != "" {
				sys = inner
			}
			if l, g := res.Header.Get(HeaderLoop), res.Header.Get(HeaderGuard); l != "stop" || g != "1" {
				t.Fatalf("stop turn: X-Scar-Loop %q, X-Scar-Guard %q", l, g)
			}
			if !strings.HasPrefix(sys, guard.StopStart+"\n") || !strings.Contains(sys, "You are in a recursive error loop") ||
				!strings.Contains(sys, guard.StopEnd) || strings.Count(string(got.Body), guard.StopStart) != 1 {
				t.Fatalf("stop turn: the provider got the system text %.400q", sys)
			}
			if codes := loops(); strings.Join(codes, ",") != "stop" {
				t.Fatalf("after the stop turn: loop incidents %v, want [stop]", codes)
			}
			if status, b := h.apiCall(http.MethodGet, "/scar/v1/fixes?workspace=default", "", nil); status != 200 || len(decodeFixes(t, b)) != 0 {
				t.Fatalf("after the stop turn: fixes %d %s", status, b)
			}

			// The turn with the fixed call's success.
			res, answer, got := send("fix")
			if l := res.Header.Get(HeaderLoop); l != "" || bytes.Contains(got.Body, []byte(guard.StopStart)) {
				t.Fatalf("fix turn: X-Scar-Loop %q, STOP block sent: %v", l, bytes.Contains(got.Body, []byte(guard.StopStart)))
			}
			fixArgs := tt.fixArgs
			if fixArgs == "" {
				fixArgs = tt.fixCall
			}
			if words, want := streamText(answer), "Mock answer: fixed "+tt.tool+" by calling it with "+fixArgs+"."; words != want {
				t.Fatalf("fix turn: the mock answered %q, want %q", words, want)
			}
			codes := loops()
			if len(codes) != 2 || !strings.Contains(strings.Join(codes, ","), "broken") || !strings.Contains(strings.Join(codes, ","), "stop") {
				t.Fatalf("after the fix turn: loop incidents %v, want stop and broken", codes)
			}
			status, b := h.apiCall(http.MethodGet, "/scar/v1/fixes?workspace=default", "", nil)
			fixes := decodeFixes(t, b)
			if status != 200 || len(fixes) != 1 {
				t.Fatalf("after the fix turn: fixes %d %s", status, b)
			}
			if f := fixes[0]; f.Tool != tt.tool || f.Call != tt.fixCall || f.Failures != 4 || !strings.Contains(f.Failure, "config/settings.json: No such file or directory") {
				t.Fatalf("learned fix: tool %q call %q failures %d failure %q", f.Tool, f.Call, f.Failures, f.Failure)
			}
		})
	}
}

// streamText returns the text an answer streamed in any of the APIs: chat
// content deltas, Responses output_text deltas, Messages text deltas, the
// text parts of Gemini chunks.
func streamText(sse []byte) string {
	var b strings.Builder
	for _, line := range bytes.Split(sse, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		ev := gjson.ParseBytes(data)
		switch ev.Get("type").Str {
		case "response.output_text.delta":
			b.WriteString(ev.Get("delta").Str)
		case "content_block_delta":
			b.WriteString(ev.Get("delta.text").Str)
		case "":
			if ev.Get("candidates").Exists() {
				ev.Get("candidates.0.content.parts").ForEach(func(_, part gjson.Result) bool {
					b.WriteString(part.Get("text").Str)
					return true
				})
				continue
			}
			fallthrough
		default:
			b.WriteString(ev.Get("choices.0.delta.content").Str)
		}
	}
	return b.String()
}

// TestClineIsSeen: Cline sends each command's result as a JSON array of
// {"query", "result", "error", "success"}; its captured requests, sent
// turn by turn, record each failure once, with the command and its error
// as the message, and get the guard from the second.
func TestClineIsSeen(t *testing.T) {
	up := newRecorder(t, okCompletion)
	h := newHarness(t, up.srv.URL)
	send := func(turn int) *http.Response {
		t.Helper()
		body, err := os.ReadFile(fmt.Sprintf("chat/testdata/agents/cline-turn%d.json", turn))
		if err != nil {
			t.Fatal(err)
		}
		res := h.do(http.MethodPost, "/v1/chat/completions", body, nil)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		h.inflight.Wait()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: %d", turn, res.StatusCode)
		}
		return res
	}
	if g := send(1).Header.Get(HeaderGuard); g != "0" {
		t.Fatalf("first request: guard %s", g)
	}
	if g := send(2).Header.Get(HeaderGuard); g != "1" {
		t.Fatalf("after two failed commands: guard %s", g)
	}
	send(3) // two more failures, then the fixed command
	var tools []store.Incident
	for _, in := range h.incidents("default", "default") {
		if in.Type == store.TypeToolError {
			tools = append(tools, in)
		}
	}
	if len(tools) != 4 {
		t.Fatalf("%d tool failures recorded, want 4", len(tools))
	}
	for _, in := range tools {
		if !strings.HasPrefix(in.Message, "run_commands: cat config/settings.json\nCommand exited with code 1") || strings.Contains(in.Message, `"success"`) {
			t.Fatalf("message %q", in.Message)
		}
	}
	if fixes, _ := h.store.ListFixes(t.Context(), store.FixQuery{Workspace: "default", Project: "default"}); len(fixes) != 1 || fixes[0].Tool != "run_commands" {
		t.Fatalf("fixes %+v", fixes)
	}
}

// A file an agent's reader tool shows is no failure of the tool, whatever
// errors it quotes (requests captured from the agents through serve
// --mock, reading a Go file whose comment says "fails with: permission
// denied"): Claude Code's Read numbers the lines and sends no is_error,
// the Gemini CLI's read_file sends the text as its output. The same result
// saying the file could not be read is one.
func TestFileReadIsNoFailure(t *testing.T) {
	for _, tt := range []struct {
		agent, path, file string
		result, complaint string // as they stand in the body
	}{
		{
			"claude code", "/v1/messages?beta=true", "messages/testdata/agents/claude-read.json",
			`"1\tpackage main\n2\t\n3\t// fails with: permission denied\n4\tfunc main() {}\n5\t"`,
			`"cat: /home/dev/work/main.go: Permission denied"`,
		},
		{
			"gemini cli", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini/testdata/agents/gemini-cli-read.json",
			`"package main\n\n// fails with: permission denied\nfunc main() {}\n"`,
			`"Error: File not found: /home/dev/work/main.go"`,
		},
	} {
		body, err := os.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(body, []byte(tt.result)) {
			t.Fatalf("%s: the capture does not hold the file's text", tt.agent)
		}
		for _, c := range []struct {
			name    string
			result  string
			records int
		}{{"the file", tt.result, 0}, {"the file could not be read", tt.complaint, 1}} {
			t.Run(tt.agent+", "+c.name, func(t *testing.T) {
				tools := toolFailuresOf(t, tt.path, bytes.Replace(body, []byte(tt.result), []byte(c.result), 1))
				if len(tools) != c.records {
					t.Fatalf("%d tool failures recorded (%q), want %d", len(tools), tools, c.records)
				}
			})
		}
	}
}

// opencode and Continue send what their shell printed and no exit status
// (Continue marks a failure that wrote to stderr). A command that only
// prints a file is judged by its command: the file's text is no failure,
// whatever it quotes; its own complaint is (captured: each agent's `cat
// build.log` of a build log through serve --mock; the complaint as each
// agent sent it for a missing file). The same text after a build reads
// as the build's failure.
func TestShellReadIsNoFailure(t *testing.T) {
	const buildLog = `"content":"gcc -c x.c\nx.c:3:5: error: expected ';' before 'return'\nmake: *** [Makefile:4: x.o] Error 1\n"`
	for _, tt := range []struct {
		agent, file, call, complaint string
	}{
		{
			"opencode", "chat/testdata/agents/opencode-cat.json",
			`"arguments":"{\"command\":\"cat build.log\",\"description\":\"Print a file\"}"`,
			`"content":"cat: build.log: No such file or directory\n"`,
		},
		{
			"continue", "chat/testdata/agents/cn-cat.json",
			`"arguments":"{\"command\":\"cat build.log\"}"`,
			`"content":"Error executing tool Bash: Error (exit code 1): cat: build.log: No such file or directory\n"`,
		},
	} {
		body, err := os.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(body, []byte(tt.call)) || !bytes.Contains(body, []byte(buildLog)) {
			t.Fatalf("%s: the capture does not hold the call and its result", tt.agent)
		}
		sed := strings.Replace(tt.call, `cat build.log`, `sed -n '1,40p' build.log`, 1)
		for _, c := range []struct {
			name, call, result string
			records            int
		}{
			{"the log printed", tt.call, buildLog, 0},
			{"the log's lines printed", sed, buildLog, 0},
			{"the log missing", tt.call, tt.complaint, 1},
			{"a build", strings.Replace(tt.call, `cat build.log`, `make`, 1), buildLog, 1},
		} {
			t.Run(tt.agent+", "+c.name, func(t *testing.T) {
				req := bytes.Replace(bytes.Replace(body, []byte(tt.call), []byte(c.call), 1), []byte(buildLog), []byte(c.result), 1)
				tools := toolFailuresOf(t, "/v1/chat/completions", req)
				if len(tools) != c.records {
					t.Fatalf("%d tool failures recorded (%q), want %d", len(tools), tools, c.records)
				}
			})
		}
	}
}

// Claude Code sends is_error on every result of its shell, false when the
// command exited 0: such a result is no failure, whatever it printed
// (captured: the loop's last turn, whose fixed command succeeded). Without
// the flag the same text reads as a failure.
func TestClaudeCodeSuccessIsNoFailure(t *testing.T) {
	body, err := os.ReadFile("messages/testdata/agents/claude-loop-fix.json")
	if err != nil {
		t.Fatal(err)
	}
	const success = `"content":"(Bash completed with no output)","is_error":false`
	if !bytes.Contains(body, []byte(success)) {
		t.Fatal("the capture does not hold the fixed command's success")
	}
	printed := `"content":"grep: config/old.json: No such file or directory\nconfig/settings.json:1:{\"port\":8080}"`
	for _, c := range []struct {
		name    string
		result  string
		records int // the four failures of the loop, and this one?
	}{
		{"is_error false", printed + `,"is_error":false`, 4},
		{"no is_error", printed, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := len(toolFailuresOf(t, "/v1/messages?beta=true", bytes.Replace(body, []byte(success), []byte(c.result), 1)))
			if n != c.records {
				t.Fatalf("%d tool failures recorded, want %d", n, c.records)
			}
		})
	}
}
