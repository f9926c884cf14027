package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/providers"
	mockprovider "github.com/scarproxy/scarproxy/providers/mock"
	"github.com/tidwall/gjson"
)

// loopAgent is an agent that runs every tool call the model asks for and
// sends the result back, in one API, until the model answers in words.
type loopAgent struct {
	api string // chat, responses, messages or gemini
	// callIDs gives Gemini function calls ids of the agent's own, as the
	// Gemini CLI does ("name_<time>_<n>"); the Gen AI SDKs send none.
	callIDs bool
	calls   int
	history []any // messages, Responses input items, or Gemini contents
}

const (
	loopFailure = "Traceback (most recent call last):\n  File \"<string>\", line 1\n    print(1\n         ^\nSyntaxError: '(' was never closed"
	loopFixed   = `{"cmd":"python3 -c \"print(1)\""}`
)

var loopPaths = map[string]string{"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages",
	"gemini": "/v1beta/models/mock-gemini:generateContent"}

func (a *loopAgent) body(t *testing.T) []byte {
	t.Helper()
	req := map[string]any{"model": "mock-gpt"}
	switch a.api {
	case "chat":
		req["messages"] = a.history
	case "responses":
		req["input"], req["instructions"] = a.history, "You are a coding agent."
	case "messages":
		req["messages"], req["system"], req["max_tokens"] = a.history, "You are a coding agent.", 1024
	case "gemini":
		req = map[string]any{"contents": a.history, "systemInstruction": map[string]any{"parts": []any{map[string]any{"text": "You are a coding agent."}}}}
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// turn reads one answer: it runs the call it asks for (a call with the
// fixed arguments succeeds, any other fails) and returns true, or it
// returns false and the answer's words.
func (a *loopAgent) turn(t *testing.T, answer []byte) (bool, string) {
	t.Helper()
	result := func(args string) (string, bool) {
		if args == loopFixed {
			return "1", false
		}
		return loopFailure, true
	}
	j := gjson.ParseBytes(answer)
	switch a.api {
	case "chat":
		msg := j.Get("choices.0.message")
		tc := msg.Get("tool_calls.0")
		if !tc.Exists() {
			return false, msg.Get("content").Str
		}
		out, _ := result(tc.Get("function.arguments").Str)
		a.history = append(a.history, json.RawMessage(msg.Raw),
			map[string]any{"role": "tool", "tool_call_id": tc.Get("id").Str, "content": out})
	case "responses":
		item := j.Get("output.0")
		if item.Get("type").Str != "function_call" {
			return false, item.Get("content.0.text").Str
		}
		out, _ := result(item.Get("arguments").Str)
		a.history = append(a.history, json.RawMessage(item.Raw),
			map[string]any{"type": "function_call_output", "call_id": item.Get("call_id").Str, "output": out})
	case "messages":
		block := j.Get("content.0")
		if block.Get("type").Str != "tool_use" {
			return false, block.Get("text").Str
		}
		out, failed := result(block.Get("input").Raw)
		a.history = append(a.history, map[string]any{"role": "assistant", "content": json.RawMessage(j.Get("content").Raw)},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": block.Get("id").Str, "content": out, "is_error": failed}}})
	case "gemini":
		content := j.Get("candidates.0.content")
		fc := content.Get("parts.0.functionCall")
		if !fc.Exists() {
			return false, content.Get("parts.0.text").Str
		}
		// As the Gen AI SDKs send it: the model's content as it came, then
		// the function's response, without an id (the API gave none).
		out, failed := result(fc.Get("args").Raw)
		response := map[string]any{"output": out}
		if failed {
			response = map[string]any{"error": out}
		}
		model, fr := any(json.RawMessage(content.Raw)), map[string]any{"name": fc.Get("name").Str, "response": response}
		if a.callIDs {
			a.calls++
			id := fmt.Sprintf("%s_%d_%d", fc.Get("name").Str, time.Now().UnixNano(), a.calls)
			model = map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": fc.Get("name").Str, "args": json.RawMessage(fc.Get("args").Raw), "id": id}}}}
			fr["id"] = id
		}
		a.history = append(a.history, model, map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": fr}}})
	}
	return true, ""
}

// run sends the task and goes on until the model answers in words; it
// returns the calls made and those words.
func (a *loopAgent) run(t *testing.T, task string, send func(path string, body []byte) []byte) (int, string) {
	t.Helper()
	a.history = []any{map[string]any{"role": "user", "content": task}}
	if a.api == "gemini" {
		a.history = []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": task}}}}
	}
	if a.api == "chat" {
		a.history = append([]any{map[string]any{"role": "system", "content": "You are a coding agent."}}, a.history...)
	}
	for calls := 0; calls <= 20; calls++ {
		more, words := a.turn(t, send(loopPaths[a.api], a.body(t)))
		if !more {
			return calls, words
		}
	}
	t.Fatal("the loop did not end")
	return 0, ""
}

// TestMockLoopBrokenByTheGuard: an agent against the scripted mock loops
// on a failing call; through the proxy the guard appears at the second
// identical failure and the loop ends there, where alone it runs to the
// mock's cap. With fix, the loop ends with the fixed call.
func TestMockLoopBrokenByTheGuard(t *testing.T) {
	const loop = `[[mock:tool=run_shell args={"cmd":"python3 -c \"print(1\""} until=guard]] run the script`
	const loopFix = `[[mock:tool=run_shell args={"cmd":"python3 -c \"print(1\""} until=guard fix={"cmd":"python3 -c \"print(1)\""}]] run the script`
	mock := &http.Client{Transport: mockprovider.New()}
	direct := func(t *testing.T) func(string, []byte) []byte {
		return func(path string, body []byte) []byte {
			res, err := mock.Post("http://mock"+mockPath(path), "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return b
		}
	}
	for _, api := range []string{"chat", "responses", "messages", "gemini"} {
		t.Run(api, func(t *testing.T) {
			// through sends to a new proxy (a memory of its own) on the mock.
			through := func() func(string, []byte) []byte {
				h := newHarness(t, "", withProviders(providers.Config{Name: "mock", Type: providers.TypeMock}))
				return func(path string, body []byte) []byte {
					res := h.do(http.MethodPost, path, body, nil)
					defer res.Body.Close()
					b, _ := io.ReadAll(res.Body)
					h.inflight.Wait()
					if res.StatusCode != 200 {
						t.Fatalf("%s: %d %s", path, res.StatusCode, b)
					}
					return b
				}
			}
			a := &loopAgent{api: api}
			if calls, words := a.run(t, loop, direct(t)); calls != 10 || words != "Mock answer: gave up after 10 calls of run_shell." {
				t.Fatalf("without the proxy: %d calls, then %q", calls, words)
			}
			if calls, words := a.run(t, loop, through()); calls != 2 || words != "Mock answer: stopped calling run_shell after 2 calls: the repeat-failure guard appeared." {
				t.Fatalf("through the proxy: %d calls, then %q", calls, words)
			}
			calls, words := a.run(t, loopFix, through())
			if calls != 3 || words != `Mock answer: fixed run_shell by calling it with {"cmd":"python3 -c \"print(1)\""}.` {
				t.Fatalf("through the proxy, with fix: %d calls, then %q", calls, words)
			}
		})
	}
}
