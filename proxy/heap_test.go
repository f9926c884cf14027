package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// TestALargeToolResultIsNotKept: conversations that each read a 1 MB
// file leave the proxy holding a small part of it per conversation, in
// every API: the state kept per conversation (its loop steps, memos)
// holds copies of what it needs, never a slice that keeps a request's
// text alive. Measured on the live heap after a collection; before the
// copies, each conversation held its whole result (about 1 MB).
func TestALargeToolResultIsNotKept(t *testing.T) {
	const convs = 24
	big := strings.Repeat("line of a file the agent read\n", 1<<20/30)
	for _, api := range []string{"chat", "responses", "messages"} {
		t.Run(api, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				answerByPath(w, r)
			}))
			t.Cleanup(up.Close)
			h := newHarness(t, "", withProviders(allAPIs(up.URL)))
			send := func(i int) {
				id := fmt.Sprintf("call_%d", i)
				task := fmt.Sprintf("task number %d: read the log", i)
				var b []byte
				path := "/v1/chat/completions"
				switch api {
				case "chat":
					b, _ = json.Marshal(map[string]any{"model": "gpt-4o", "messages": []any{
						map[string]any{"role": "system", "content": "You are a coding agent."},
						map[string]any{"role": "user", "content": task},
						map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "read_file", "arguments": "{}"}}}},
						map[string]any{"role": "tool", "tool_call_id": id, "content": big},
					}})
				case "responses":
					path = "/v1/responses"
					b, _ = json.Marshal(map[string]any{"model": "gpt-4o", "instructions": "You are a coding agent.", "input": []any{
						map[string]any{"role": "user", "content": task},
						map[string]any{"type": "function_call", "call_id": id, "name": "read_file", "arguments": "{}"},
						map[string]any{"type": "function_call_output", "call_id": id, "output": big},
					}})
				case "messages":
					path = "/v1/messages"
					b, _ = json.Marshal(map[string]any{"model": "claude", "max_tokens": 100, "system": "You are a coding agent.", "messages": []any{
						map[string]any{"role": "user", "content": task},
						map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "read_file", "input": map[string]any{}}}},
						map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": big}}},
					}})
				}
				res := h.do(http.MethodPost, path, b, nil)
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				h.inflight.Wait()
				if res.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d", path, res.StatusCode)
				}
			}
			send(-1) // the first request's one-off allocations
			h.bodiesReleased()
			before := liveHeap()
			for i := range convs {
				send(i)
			}
			h.bodiesReleased()
			held := liveHeap() - before
			t.Logf("%d conversations: %d KB more live heap, %d KB each", convs, held>>10, held/convs>>10)
			if perConv := held / convs; perConv > 100<<10 {
				t.Fatalf("%d conversations with a 1 MB tool result each: %d KB more live heap, %d KB each; want under 100 KB each",
					convs, held>>10, perConv>>10)
			}
		})
	}
}

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
