package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
)

// wireFormat builds requests of one API and reads what the provider
// received of the proxy's.
type wireFormat struct {
	name, path string
	// streamPath is where a streaming request goes, when its path says
	// so (gemini); "" when the body does ("stream": true).
	streamPath string
	// noTools is the gjson path of the member the hard stop sets, and
	// noToolsValue its value.
	noTools, noToolsValue string
	// turn is a request whose history holds n failed calls of run_shell,
	// each answered by the same syntax error.
	turn func(n int) string
	// system is what the proxy told the model in a request as forwarded:
	// the system text, or the blocks it placed in the newest turn.
	system func(body []byte) string
	// answer is the provider's final answer in the API's shape.
	answer string
}

const syntaxError = "  File \"hello.py\", line 1\n    print(1\n         ^\nSyntaxError: '(' was never closed"

func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var wireFormats = []wireFormat{
	{
		name: "chat", path: "/v1/chat/completions",
		turn: func(n int) string {
			msgs := []string{`{"role":"system","content":"You are a coding agent."}`, `{"role":"user","content":"Write hello.py and run it"}`}
			for i := 1; i <= n; i++ {
				id := fmt.Sprintf("call_%d", i)
				msgs = append(msgs,
					`{"role":"assistant","content":null,"tool_calls":[{"id":"`+id+`","type":"function","function":{"name":"run_shell","arguments":"{\"cmd\":\"python3 hello.py\"}"}}]}`,
					`{"role":"tool","tool_call_id":"`+id+`","content":`+jsonText("Exit code 1\n"+syntaxError)+`}`)
			}
			return `{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`
		},
		system:  chatTold,
		answer:  `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`,
		noTools: "tool_choice", noToolsValue: `"none"`,
	},
	{
		name: "responses", path: "/v1/responses",
		turn: func(n int) string {
			items := []string{`{"type":"message","role":"user","content":[{"type":"input_text","text":"Write hello.py and run it"}]}`}
			for i := 1; i <= n; i++ {
				id := fmt.Sprintf("call_%d", i)
				items = append(items,
					`{"type":"function_call","name":"run_shell","arguments":"{}","call_id":"`+id+`"}`,
					`{"type":"function_call_output","call_id":"`+id+`","output":`+jsonText("Chunk ID: 1\nWall time: 0.1 seconds\nProcess exited with code 1\nOutput:\n"+syntaxError)+`}`)
			}
			return `{"model":"m","instructions":"You are Codex.","input":[` + strings.Join(items, ",") + `]}`
		},
		// The blocks go into a developer message at the end of the input.
		system:  func(b []byte) string { return unframed(gjson.GetBytes(b, "input|@reverse|0.content.0.text").String()) },
		answer:  `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}]}`,
		noTools: "tool_choice", noToolsValue: `"none"`,
	},
	{
		name: "messages", path: "/v1/messages?beta=true",
		turn: func(n int) string {
			msgs := []string{`{"role":"user","content":[{"type":"text","text":"Write hello.py and run it"}]}`}
			for i := 1; i <= n; i++ {
				id := fmt.Sprintf("toolu_%d", i)
				msgs = append(msgs,
					`{"role":"assistant","content":[{"type":"tool_use","id":"`+id+`","name":"Bash","input":{"command":"python3 hello.py"}}]}`,
					`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","is_error":true,"content":`+jsonText("Exit code 1\n"+syntaxError)+`}]}`)
			}
			return `{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}}],"messages":[` + strings.Join(msgs, ",") + `]}`
		},
		system:  func(b []byte) string { return unframed(gjson.GetBytes(b, newestMessagesBlock).Str) },
		answer:  `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn"}`,
		noTools: "tool_choice", noToolsValue: `{"type":"none"}`,
	},
	{
		name: "gemini", path: "/v1beta/models/gemini-2.5-flash:generateContent",
		streamPath: "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		turn: func(n int) string {
			contents := []string{`{"role":"user","parts":[{"text":"Write hello.py and run it"}]}`}
			for i := 1; i <= n; i++ {
				id := fmt.Sprintf("run_shell_%d", i)
				contents = append(contents,
					`{"role":"model","parts":[{"functionCall":{"id":"`+id+`","name":"run_shell","args":{"cmd":"python3 hello.py"}}}]}`,
					`{"role":"user","parts":[{"functionResponse":{"id":"`+id+`","name":"run_shell","response":{"output":`+jsonText("Exit Code: 1\n"+syntaxError)+`}}}]}`)
			}
			return `{"systemInstruction":{"role":"user","parts":[{"text":"You are Gemini CLI."}]},"contents":[` + strings.Join(contents, ",") + `]}`
		},
		system:  func(b []byte) string { return unframed(gjson.GetBytes(b, newestGeminiPart).Str) },
		answer:  `{"candidates":[{"content":{"role":"model","parts":[{"text":"done"}]},"finishReason":"STOP","index":0}],"modelVersion":"gemini-2.5-flash"}`,
		noTools: "toolConfig.functionCallingConfig.mode", noToolsValue: `"NONE"`,
	},
}

// mockPath is where a request sent to the proxy at path goes at the
// mock: below the API root, which holds /v1 for the OpenAI and Anthropic
// APIs; the Gemini API's paths name their version.
func mockPath(path string) string {
	if rest, ok := strings.CutPrefix(path, "/v1/"); ok {
		return "/" + rest
	}
	return path
}

// newestGeminiPart is the path of the text of the last part of the last
// content of a Gemini body, where the proxy places the blocks of the turn
// (guard.placement: turn).
const newestGeminiPart = "contents.@reverse.0.parts.@reverse.0.text"

// newestMessagesBlock is the path of the text of the last block of the
// last message of a Messages body, where the proxy places the blocks of
// the turn (guard.placement: turn).
const newestMessagesBlock = "messages.@reverse.0.content.@reverse.0.text"

// unframed returns the blocks inside text when it is a frame the proxy
// placed in a turn (wire.Framed), else "".
func unframed(text string) string {
	inner, ok := strings.CutPrefix(text, wire.FrameStart+"\n"+wire.FrameNote+"\n\n")
	if inner, found := strings.CutSuffix(inner, "\n"+wire.FrameEnd); ok && found {
		return inner
	}
	return ""
}

// allAPIs is an upstream that serves every API, answering each in its own
// shape.
func allAPIs(url string) providers.Config {
	return providers.Config{Name: "up", Type: providers.TypeOpenAI, BaseURL: url, APIs: []string{providers.APIChat, providers.APIResponses, providers.APIMessages, providers.APIGemini}}
}

func answerByPath(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	for _, f := range wireFormats {
		if strings.HasPrefix(f.path, "/v1"+strings.TrimPrefix(r.URL.Path, "/v1")) {
			io.WriteString(w, f.answer)
			return
		}
	}
	http.NotFound(w, r)
}

// TestEveryFormatRecordsOnceAndGuardsTheNextTurn: in each wire format, a
// failed tool result is recorded once however often the history is
// re-sent, and once the failure repeats the provider receives the guard.
func TestEveryFormatRecordsOnceAndGuardsTheNextTurn(t *testing.T) {
	for _, f := range wireFormats {
		t.Run(f.name, func(t *testing.T) {
			up := newRecorder(t, answerByPath)
			h := newHarness(t, "", withProviders(allAPIs(up.srv.URL)))
			ws := "ws-" + f.name
			send := func(n int) (*http.Response, received) {
				t.Helper()
				res := h.do(http.MethodPost, f.path, []byte(f.turn(n)), map[string]string{tenant.HeaderWorkspace: ws})
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				h.inflight.Wait()
				if res.StatusCode != 200 {
					t.Fatalf("status %d", res.StatusCode)
				}
				return res, up.last(t)
			}
			res, got := send(1)
			if n := len(h.incidents(ws, "default")); n != 1 || res.Header.Get(HeaderGuard) != "0" {
				t.Fatalf("turn 1: %d incidents, guard %s", n, res.Header.Get(HeaderGuard))
			}
			if strings.Contains(f.system(got.Body), guard.BlockStart) {
				t.Fatal("turn 1 carries a guard for a failure seen once")
			}
			if got.RawPath+"?"+got.Query != "/"+strings.TrimPrefix(f.path, "/v1/") && !strings.HasPrefix(f.path, "/v1"+got.RawPath) && got.RawPath != f.path {
				t.Fatalf("forwarded to %s?%s", got.RawPath, got.Query)
			}
			// The same history again, then with a second failure of the
			// same kind: the first is not recorded again.
			send(1)
			res, got = send(2)
			incs := h.incidents(ws, "default")
			if len(incs) != 2 || incs[0].Type != store.TypeToolError {
				t.Fatalf("turn 3: %d incidents %+v", len(incs), incs)
			}
			if res.Header.Get(HeaderGuard) != "1" || !strings.Contains(f.system(got.Body), guard.BlockStart) {
				t.Fatalf("turn 3: guard header %s, system text %q", res.Header.Get(HeaderGuard), f.system(got.Body))
			}
			// And the next turn, which re-sends both, is guarded too.
			res, got = send(2)
			if n := len(h.incidents(ws, "default")); n != 2 || res.Header.Get(HeaderGuard) != "1" || !strings.Contains(f.system(got.Body), guard.BlockStart) {
				t.Fatalf("turn 4: %d incidents, guard %s", n, res.Header.Get(HeaderGuard))
			}
		})
	}
}

// TestAmbiguousBodiesAreRefused: a body that gives a member the proxy
// reads twice gets a 400 in the API's own error shape and never reaches
// the provider: the proxy would rewrite one copy and a provider that keeps
// the last (Python's json) would read the other.
func TestAmbiguousBodiesAreRefused(t *testing.T) {
	up := newRecorder(t, answerByPath)
	h := newHarness(t, "", withProviders(allAPIs(up.srv.URL)))
	for _, tc := range []struct{ path, body, errPath string }{
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"a"}],"messages":[{"role":"user","content":"b"}]}`, "error.message"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"system","content":"a","content":"b"}]}`, "error.message"},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":1,"function":{"name":"ls","arguments":"{}"}}]}]}`, "error.message"},
		{"/v1/responses", `{"model":"m","instructions":"a","input":"x","instructions":"b"}`, "error.message"},
		{"/v1/messages", `{"model":"m","system":"a","messages":[],"system":"b"}`, "error.message"},
		{"/v1beta/models/gemini-2.5-flash:generateContent", `{"systemInstruction":{"parts":[{"text":"a"}]},"contents":[],"system_instruction":{"parts":[{"text":"b"}]}}`, "error.message"},
	} {
		res := h.do(http.MethodPost, tc.path, []byte(tc.body), nil)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		msg := gjson.GetBytes(b, tc.errPath).String()
		if res.StatusCode != 400 || !strings.Contains(msg, "more than once") {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, res.StatusCode, b)
		}
		if strings.HasPrefix(tc.path, "/v1/messages") != (gjson.GetBytes(b, "type").String() == "error") ||
			strings.HasPrefix(tc.path, "/v1beta/") != (gjson.GetBytes(b, "error.status").String() == "INVALID_ARGUMENT") {
			t.Errorf("%s: error shape %s", tc.path, b)
		}
	}
	if up.count() != 0 {
		t.Fatalf("the upstream received %d requests", up.count())
	}
}

// TestPassThroughGoesToTheAPIsProvider: a pass-through path below an API
// (/v1/messages/count_tokens) goes to a provider that serves that API; a
// WebSocket upgrade, which the proxy cannot observe, gets 426 (Codex CLI
// then speaks HTTP at once).
func TestPassThroughGoesToTheAPIsProvider(t *testing.T) {
	oa := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"from":"openai"}`) })
	an := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"input_tokens":3}`) })
	h := newHarness(t, "", withProviders(
		providers.Config{Name: "openai", Type: providers.TypeOpenAI, BaseURL: oa.srv.URL + "/v1"},
		providers.Config{Name: "anthropic", Type: providers.TypeAnthropic, BaseURL: an.srv.URL + "/v1"},
	))
	res := h.do(http.MethodPost, "/v1/messages/count_tokens?beta=true", []byte(`{"model":"claude-x","messages":[]}`), nil)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(b) != `{"input_tokens":3}` || an.count() != 1 || oa.count() != 0 {
		t.Fatalf("count_tokens: %d %s (anthropic %d, openai %d requests)", res.StatusCode, b, an.count(), oa.count())
	}
	if got := an.last(t); got.RawPath != "/v1/messages/count_tokens" || got.Query != "beta=true" || got.Header.Get("Anthropic-Version") == "" {
		t.Fatalf("the anthropic upstream got %s?%s %v", got.RawPath, got.Query, got.Header)
	}
	res = h.do(http.MethodGet, "/v1/responses", nil, map[string]string{"Connection": "Upgrade", "Upgrade": "websocket"})
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUpgradeRequired || oa.count() != 0 {
		t.Fatalf("websocket: %d %s, upstream %d", res.StatusCode, b, oa.count())
	}
	// A rewritten route whose API no provider serves.
	h2 := newHarness(t, "", withProviders(providers.Config{Name: "anthropic", Type: providers.TypeAnthropic, BaseURL: an.srv.URL + "/v1"}))
	res = h2.do(http.MethodPost, "/v1/responses", []byte(`{"model":"gpt","input":"hi"}`), nil)
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 404 || !strings.Contains(gjson.GetBytes(b, "error.message").String(), "responses") {
		t.Fatalf("no provider for the API: %d %s", res.StatusCode, b)
	}
	res = h2.do(http.MethodPost, "/w/a/b/v1beta/models/gemini-2.5-flash:generateContent", []byte(`{"contents":[]}`), nil)
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 404 || gjson.GetBytes(b, "error.status").Str != "NOT_FOUND" || !strings.Contains(gjson.GetBytes(b, "error.message").Str, "/v1beta/models/gemini-2.5-flash:generateContent") {
		t.Fatalf("no provider for the Gemini API: %d %s", res.StatusCode, b)
	}
}

// TestGeminiPassThrough: every Gemini API path but generateContent and
// streamGenerateContent (countTokens, the model list, a model, files)
// goes untouched to a provider that serves the Gemini API, below its
// host, the version kept; the OpenAI APIs' /v1/models/{model} still goes
// to theirs.
func TestGeminiPassThrough(t *testing.T) {
	oa := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"from":"openai"}`) })
	gm := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"from":"gemini"}`) })
	h := newHarness(t, "", withProviders(
		providers.Config{Name: "openai", Type: providers.TypeOpenAI, BaseURL: oa.srv.URL + "/v1"},
		providers.Config{Name: "gemini", Type: providers.TypeGemini, BaseURL: gm.srv.URL},
	))
	for _, tc := range []struct{ method, path, want, from string }{
		{http.MethodPost, "/v1beta/models/gemini-2.5-flash:countTokens?alt=json", "/v1beta/models/gemini-2.5-flash:countTokens", "gemini"},
		{http.MethodPost, "/v1/models/gemini-2.5-flash:countTokens", "/v1/models/gemini-2.5-flash:countTokens", "gemini"},
		{http.MethodPost, "/w/team/api/v1beta/models/gemini-2.5-flash:embedContent", "/v1beta/models/gemini-2.5-flash:embedContent", "gemini"},
		{http.MethodGet, "/v1beta/models", "/v1beta/models", "gemini"},
		{http.MethodGet, "/v1beta/models/gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash", "gemini"},
		{http.MethodGet, "/v1beta/files?pageSize=2", "/v1beta/files", "gemini"},
		{http.MethodGet, "/v1/models/gpt-4o", "/v1/models/gpt-4o", "openai"},
		{http.MethodDelete, "/v1/models/ft:gpt-4o:acme", "/v1/models/ft:gpt-4o:acme", "openai"},
	} {
		var body []byte
		if tc.method == http.MethodPost {
			body = []byte(`{"contents":[{"parts":[{"text":"x"}]}]}`)
		}
		res := h.do(tc.method, tc.path, body, map[string]string{"X-Goog-Api-Key": "client-key"})
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		up := map[string]*recorder{"openai": oa, "gemini": gm}[tc.from]
		if res.StatusCode != 200 || gjson.GetBytes(b, "from").Str != tc.from || res.Header.Get(HeaderGuard) != "" {
			t.Fatalf("%s %s: %d %s, guard %q", tc.method, tc.path, res.StatusCode, b, res.Header.Get(HeaderGuard))
		}
		got := up.last(t)
		_, query, _ := strings.Cut(tc.path, "?")
		if got.RawPath != tc.want && got.RawPath != "/v1"+tc.want || got.Query != query || got.Header.Get("X-Goog-Api-Key") != "client-key" {
			t.Fatalf("%s %s: the %s upstream got %s?%s", tc.method, tc.path, tc.from, got.RawPath, got.Query)
		}
	}
}

// TestStalledStreamEndsWithAnErrorEvent: when the provider goes silent in
// the middle of a stream, the proxy cuts it and tells the client in the
// API's own stream format (an error chunk for chat, an error event for
// Responses and Messages) instead of just closing; the timeout is an
// incident. The client's SDK then sees an error, not a short answer.
func TestStalledStreamEndsWithAnErrorEvent(t *testing.T) {
	first := map[string]string{
		"/v1/chat/completions": "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
		"/v1/responses":        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\"}}\n\n",
		"/v1/messages":         "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"}}\n\n",
		"/v1beta/models/gemini-2.5-flash:streamGenerateContent": "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"a\"}]},\"index\":0}]}\n\n",
	}
	idle := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		if f, ok := first[r.URL.Path]; ok {
			io.WriteString(w, f)
		} else {
			io.WriteString(w, first["/v1"+r.URL.Path])
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	p := allAPIs(idle.srv.URL)
	p.IdleTimeout = 50 * time.Millisecond
	for _, tc := range []struct {
		path, body string
		last       func([]byte) bool // the error event the client gets last
	}{
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, func(b []byte) bool {
			return bytes.HasPrefix(b, []byte("data: {\"error\":")) && gjson.GetBytes(b[6:], "error.code").String() == "provider_timeout"
		}},
		{"/v1/responses", `{"model":"m","stream":true,"input":"hi"}`, func(b []byte) bool {
			return bytes.HasPrefix(b, []byte("event: error\ndata: ")) && gjson.GetBytes(b[len("event: error\ndata: "):], "type").String() == "error"
		}},
		{"/v1/messages", `{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, func(b []byte) bool {
			return bytes.HasPrefix(b, []byte("event: error\ndata: ")) && gjson.GetBytes(b[len("event: error\ndata: "):], "error.type").String() == "timeout_error"
		}},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, func(b []byte) bool {
			return bytes.HasPrefix(b, []byte("data: {\"error\":")) && gjson.GetBytes(b[6:], "error.status").String() == "DEADLINE_EXCEEDED"
		}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			h := newHarness(t, "", withProviders(p))
			res := h.do(http.MethodPost, tc.path, []byte(tc.body), nil)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			h.inflight.Wait()
			events := bytes.Split(bytes.TrimSpace(b), []byte("\n\n"))
			if res.StatusCode != 200 || len(events) != 2 || !bytes.Equal(append(events[0], "\n\n"...), []byte(first[tc.path])) || !tc.last(events[1]) {
				t.Fatalf("status %d, stream %q", res.StatusCode, b)
			}
			if incs := h.incidents("default", "default"); len(incs) != 1 || incs[0].Type != store.TypeTimeout {
				t.Fatalf("incidents %+v", incs)
			}
		})
	}
}

// TestConversationsAreApart: without X-Scar-Session, each conversation is
// named by its start. A tool failure repeats within its conversation only:
// an unrelated task in the same project starts without the guard, and a
// conversation that numbers its calls as another does (call_1, call_2...)
// still has its failures recorded. Provider failures hit every
// conversation: they count tenant-wide, per provider.
func TestConversationsAreApart(t *testing.T) {
	var fail429 atomic.Bool
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if fail429.Load() {
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
		answerByPath(w, r)
	})
	h := newHarness(t, "", withProviders(allAPIs(up.srv.URL)))
	chat := wireFormats[0]
	send := func(body string) *http.Response {
		t.Helper()
		res := h.do(http.MethodPost, chat.path, []byte(body), nil)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		h.inflight.Wait()
		return res
	}
	// A coding task fails twice the same way: guarded.
	if res := send(chat.turn(2)); res.Header.Get(HeaderGuard) != "1" {
		t.Fatalf("the failing conversation: guard %s", res.Header.Get(HeaderGuard))
	}
	// An unrelated task starts clean.
	haiku := `{"model":"m","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"Write a haiku about autumn"}]}`
	if res := send(haiku); res.Header.Get(HeaderGuard) != "0" || strings.Contains(chat.system(up.last(t).Body), guard.BlockStart) {
		t.Fatalf("an unrelated task got the other conversation's guard: %s", res.Header.Get(HeaderGuard))
	}
	// A third conversation that reuses the ids call_1 and call_2 has its
	// own failures recorded, and guarded.
	other := strings.Replace(chat.turn(2), "Write hello.py and run it", "Build the parser", 1)
	if res := send(other); res.Header.Get(HeaderGuard) != "1" {
		t.Fatalf("a conversation reusing call ids: guard %s", res.Header.Get(HeaderGuard))
	}
	if n := len(h.incidents("default", "default")); n != 4 {
		t.Fatalf("%d incidents, want 4 (two per conversation)", n)
	}
	// Two 429s, in two conversations, reach the haiku too.
	fail429.Store(true)
	send(chat.turn(0))
	send(other)
	fail429.Store(false)
	if res := send(haiku); res.Header.Get(HeaderGuard) != "1" || !strings.Contains(chat.system(up.last(t).Body), "Provider: up") {
		t.Fatalf("provider failures: guard %s, system %q", res.Header.Get(HeaderGuard), chat.system(up.last(t).Body))
	}
}

// TestBodiesThatAreNotObjectsAreRefused: a body that is JSON but not an
// object (null, an array, a number...) gets a 400 in the API's own error
// shape on every route the proxy reads, and never reaches the provider.
func TestBodiesThatAreNotObjectsAreRefused(t *testing.T) {
	up := newRecorder(t, answerByPath)
	h := newHarness(t, "", withProviders(allAPIs(up.srv.URL)))
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1beta/models/gemini-2.5-flash:generateContent"} {
		for _, body := range []string{`null`, ` [ ] `, `42`, `"x"`, `true`, `[{"model":"m","input":"hi"}]`} {
			res := h.do(http.MethodPost, path, []byte(body), nil)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 400 || !strings.Contains(gjson.GetBytes(b, "error.message").String(), "JSON object") {
				t.Errorf("%s %s: %d %s", path, body, res.StatusCode, b)
			}
			if strings.HasPrefix(path, "/v1/messages") != (gjson.GetBytes(b, "type").String() == "error") ||
				strings.HasPrefix(path, "/v1beta/") != (gjson.GetBytes(b, "error.status").String() == "INVALID_ARGUMENT") {
				t.Errorf("%s: error shape %s", path, b)
			}
		}
	}
	if up.count() != 0 {
		t.Fatalf("the upstream received %d requests", up.count())
	}
}
