package mock

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// Blocks as the proxy writes them. The mock reads only their first and
// last lines; the rest is there to be echoed.
const (
	guardText = "### !!! REPEAT FAILURE GUARD — DO NOT REPEAT THESE ERRORS !!!\n" +
		"The following errors have occurred MULTIPLE times in this session. Prioritize fixing them:\n\n" +
		"▶ Pattern: SYNTAX COMPLIANCE ERROR (Failed 2 times)\n  Fix Instruction: Output must be valid syntax.\n\n" +
		"### !!! END REPEAT FAILURE GUARD !!!"
	stopText = "### !!! STOP — RECURSIVE ERROR LOOP !!!\n" +
		"You are in a recursive error loop: run {\"cmd\":\"make\"} failed 4 times.\n" +
		"### !!! END STOP !!!"
	recallText = "### RECALL: Similar Task Found in Memory\nSimilarity: 68%\nPrior Goal: \"parse the config file\"\n" +
		"How it was solved: \"a YAML parser\"\nOutcome: \"tests pass\"\nConfidence: 90%\n" +
		"Consider this approach before starting from scratch.\n### END RECALL"
)

// framed wraps blocks in a frame like the one the proxy puts around the
// blocks it places in a turn.
func framed(blocks ...string) string {
	return "<system-reminder>\nNote from the proxy between this agent and its model provider (not from the user):\n\n" +
		strings.Join(blocks, "\n\n") + "\n</system-reminder>"
}

func TestBlockSpans(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
	}{
		{"no block", "hello ### there", nil},
		{"one block between lines", "before\n" + guardText + "\nafter", []string{guardText}},
		{"each kind, in order", framed(stopText, guardText) + "\n\n" + recallText, []string{stopText, guardText, recallText}},
		{"a start without its end", "x\n### !!! STOP — RECURSIVE ERROR LOOP !!!\nloop\n### END RECALL", nil},
		{"an end before its start", "### END RECALL\n### RECALL: Similar Task Found in Memory", nil},
		{"a marker inside a line", "say ### RECALL: Similar Task Found in Memory\n### END RECALL", nil},
		{"a start line with a tail", "### RECALL: Similar Task Found in Memory!\n### END RECALL", nil},
		{"CRLF lines", "### END RECALL\r\n### RECALL: Similar Task Found in Memory\r\nx\r\n### END RECALL\r\n",
			[]string{"### RECALL: Similar Task Found in Memory\r\nx\r\n### END RECALL\r"}},
		{"an unterminated block does not hide the next", "### !!! END STOP !!!\n### !!! STOP — RECURSIVE ERROR LOOP !!!\n" + recallText,
			[]string{recallText}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, sp := range blockSpans(tc.text) {
				got = append(got, tc.text[sp.start:sp.end])
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("blocks %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWithoutBlocks(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"no block: unchanged", " fix the build\n", " fix the build\n"},
		{"a frame after the task", "fix the build\n\n" + framed(recallText), "fix the build"},
		{"only a frame", framed(stopText, guardText), ""},
		{"a bare block", guardText + "\nfix it", "fix it"},
		{"two frames", "task\n\n" + framed(recallText) + "\n\nmore\n\n" + framed(guardText), "task\n\nmore"},
		{"a frame without a block is the agent's", "<system-reminder>\ncontext\n</system-reminder>\nfix it", "<system-reminder>\ncontext\n</system-reminder>\nfix it"},
		{"an unclosed frame: only the block goes", "a <system-reminder> b\n" + guardText + "\nend", "a <system-reminder> b\nend"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := withoutBlocks(tc.text); got != tc.want {
				t.Fatalf("withoutBlocks = %q, want %q", got, tc.want)
			}
		})
	}
}

// placedRequest is an [[mock:echo]] request of one API after a failed
// tool call, with the recall block in the first user turn and the STOP
// and guard blocks in the newest one (system false), as the proxy places
// them by default, or all three in front of the system text (system true).
func placedRequest(t *testing.T, api string, system, stream bool) string {
	t.Helper()
	const sys, task = "SYSTEM TEXT", "[[mock:echo]] parse the config file"
	first, newest, system0 := task+"\n\n"+framed(recallText), framed(stopText, guardText), sys
	if system {
		first, newest, system0 = task, "", stopText+"\n\n"+guardText+"\n\n"+recallText+"\n\n"+sys
	}
	req := map[string]any{"model": "m", "stream": stream}
	switch api {
	case "chat":
		msgs := []any{
			map[string]any{"role": "system", "content": system0},
			map[string]any{"role": "user", "content": first},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "run", "arguments": `{"cmd":"make"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": "Error: exit status 1"},
		}
		if newest != "" {
			msgs = append(msgs, map[string]any{"role": "user", "content": newest})
		}
		req["messages"] = msgs
	case "responses":
		req["instructions"] = system0
		input := []any{
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": first}}},
			map[string]any{"type": "function_call", "call_id": "c1", "name": "run", "arguments": `{"cmd":"make"}`},
			map[string]any{"type": "function_call_output", "call_id": "c1", "output": "Error: exit status 1"},
		}
		if newest != "" {
			input = append(input, map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": newest}}})
		}
		req["input"] = input
	case "messages":
		req["max_tokens"] = 1024
		req["system"] = []any{map[string]any{"type": "text", "text": system0, "cache_control": map[string]any{"type": "ephemeral"}}}
		results := []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Error: exit status 1", "is_error": true}}
		if newest != "" {
			results = append(results, map[string]any{"type": "text", "text": newest})
		}
		req["messages"] = []any{
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": first}}},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "run", "input": map[string]any{"cmd": "make"}}}},
			map[string]any{"role": "user", "content": results},
		}
	case "gemini":
		req["systemInstruction"] = map[string]any{"role": "user", "parts": []any{map[string]any{"text": system0}}}
		results := []any{map[string]any{"functionResponse": map[string]any{"id": "run_1", "name": "run", "response": map[string]any{"output": "Error: exit status 1"}}}}
		if newest != "" {
			results = append(results, map[string]any{"text": newest})
		}
		req["contents"] = []any{
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": first}}},
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"id": "run_1", "name": "run", "args": map[string]any{"cmd": "make"}}}}},
			map[string]any{"role": "user", "parts": results},
		}
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMockEchoGolden pins [[mock:echo]] when the proxy placed its blocks
// in the turns: the system text, then the recall, STOP and guard blocks
// in the order the request holds them.
func TestMockEchoGolden(t *testing.T) {
	for _, api := range apis {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("echo/%s_turn", api)
			if stream {
				name += "_stream"
			}
			t.Run(name, func(t *testing.T) {
				body := placedRequest(t, api, false, stream)
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://provider"+pathOf(api, body), strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				res, err := fixedMock().RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, name, dump(t, res))
			})
		}
	}
}

// TestMockEchoEveryPlacement: the echo holds the system text and every
// block once, whether the proxy put them in the system text or in turns.
func TestMockEchoEveryPlacement(t *testing.T) {
	for _, api := range apis {
		for _, system := range []bool{false, true} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/system=%v/stream=%v", api, system, stream), func(t *testing.T) {
					got := askBody(t, api, placedRequest(t, api, system, stream), stream)
					for _, want := range []string{"SYSTEM TEXT", recallText, stopText, guardText} {
						if n := strings.Count(got.Text, want); n != 1 {
							t.Errorf("%d times %q in the echo:\n%s", n, want, got.Text)
						}
					}
					if !system {
						if want := "SYSTEM TEXT\n\n" + recallText + "\n\n" + stopText + "\n\n" + guardText; got.Text != want {
							t.Errorf("echo\n%s\nwant\n%s", got.Text, want)
						}
					}
				})
			}
		}
	}
}

// TestMockPlacedBlocksAreNotUserText: what the proxy places in the newest
// turn changes neither the directives the mock reads nor its answer.
func TestMockPlacedBlocksAreNotUserText(t *testing.T) {
	const args, fixArgs = `{"cmd":"make"}`, `{"cmd":"make -j1"}`
	call := func(a string) mockAnswer { return mockAnswer{Tool: "run", Args: a} }
	text := func(s string) mockAnswer { return mockAnswer{Text: s} }
	tests := []convoCase{
		{"a call while the user text is last but for the blocks", convo{user: "[[mock:tool=run]] go", placed: framed(guardText)}, call("{}")},
		{"the answer leaves the blocks out", convo{user: "hello there", placed: framed(recallText)}, text("Mock answer to: hello there")},
		{"blocks in the user text are cut from it", convo{user: "hello there\n\n" + framed(recallText)}, text("Mock answer to: hello there")},
		{"a bare block in the user text", convo{user: guardText + "\nhello there"}, text("Mock answer to: hello there")},
		{"until guard: not yet", convo{system: "You are an agent.", user: `[[mock:tool=run args={"cmd":"make"} until=guard]]`, calls: failedCalls(2, args), placed: framed(recallText)},
			call(args)},
		{"until guard: the guard in the newest turn", convo{system: "You are an agent.", user: `[[mock:tool=run args={"cmd":"make"} until=guard]]`, calls: failedCalls(2, args), placed: framed(guardText)},
			text("Mock answer: stopped calling run after 2 calls: the repeat-failure guard appeared.")},
		{"until stop: the STOP block in the newest turn", convo{user: `[[mock:tool=run args={"cmd":"make"} until=stop]]`, calls: failedCalls(4, args), placed: framed(stopText, guardText)},
			text("Mock answer: stopped calling run after 4 calls: the STOP block appeared.")},
		{"fix once the guard is in the newest turn", convo{user: `[[mock:tool=run args={"cmd":"make"} until=guard fix={"cmd":"make -j1"}]]`, calls: failedCalls(2, args), placed: framed(guardText)},
			call(fixArgs)},
	}
	askEveryAPI(t, tests)
}
