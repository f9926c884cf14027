package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/scarproxy/scarproxy/providers/mock"
)

// The loop demo plays an agent harness around the mock's scripted model:
// the model calls run_shell to read a settings file that does not exist,
// the harness runs the call and sends the result back, and the model calls
// again with the same arguments until it sees the STOP block (at most 12
// times); then it makes a fixed call. The harness's run_shell fails for
// the file until the fixed call has created it.

const (
	loopBadArgs = `{"cmd":"cat config/settings.json"}`
	loopFixArgs = `{"cmd":"mkdir -p config && cp settings.example.json config/settings.json"}`
	loopFailure = "cat: config/settings.json: No such file or directory\nexit status 1"
	loopRepeat  = 12
)

// loopTask is the user's task, with the scripted model's directive.
func loopTask() string {
	return "[[mock:tool=run_shell args=" + loopBadArgs + " repeat=" + fmt.Sprint(loopRepeat) +
		" until=stop fix=" + loopFixArgs + "]] Load the service settings and print the port."
}

// loopTurn is one answer of the model in the demo.
type loopTurn struct {
	call   string // the tool call's arguments; "" for a final answer
	text   string // the final answer
	header http.Header
}

// loopAgent runs the harness: it sends the conversation, runs each call,
// and stops at the final answer. send posts a chat request body.
func loopAgent(ctx context.Context, task string, send func(ctx context.Context, body []byte) (*http.Response, error), each func(n int, t loopTurn, result string)) (int, error) {
	msgs := []chatMsg{
		{"role": "system", "content": "You are a coding agent. Use run_shell to work in the repository."},
		{"role": "user", "content": task},
	}
	fixed := false
	tools := []chatMsg{{"type": "function", "function": chatMsg{"name": "run_shell", "parameters": chatMsg{"type": "object"}}}}
	for n := 1; n <= loopRepeat+3; n++ {
		body, _ := json.Marshal(chatMsg{"model": "mock-gpt", "messages": msgs, "tools": tools})
		res, err := send(ctx, body)
		if err != nil {
			return n, err
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return n, fmt.Errorf("HTTP %d: %s", res.StatusCode, b)
		}
		var out struct {
			Choices []struct {
				Message struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
			return n, fmt.Errorf("unexpected answer: %s", b)
		}
		m := out.Choices[0].Message
		if len(m.ToolCalls) == 0 {
			each(n, loopTurn{text: m.Content, header: res.Header}, "")
			return n, nil
		}
		tc := m.ToolCalls[0]
		result := loopFailure
		if tc.Function.Arguments == loopFixArgs {
			fixed, result = true, "created config/settings.json"
		} else if fixed {
			result = "port: 8080"
		}
		each(n, loopTurn{call: tc.Function.Arguments, header: res.Header}, result)
		msgs = append(msgs,
			chatMsg{"role": "assistant", "content": nil, "tool_calls": []chatMsg{{"id": tc.ID, "type": "function",
				"function": chatMsg{"name": tc.Function.Name, "arguments": tc.Function.Arguments}}}},
			chatMsg{"role": "tool", "tool_call_id": tc.ID, "content": result})
	}
	return loopRepeat + 3, fmt.Errorf("the agent did not finish")
}

// demoLoop runs the loop once straight against the mock provider and once
// through scarproxy, then starts a new conversation that meets the same
// failure.
func demoLoop(ctx context.Context, target string, args []string, getenv func(string) string, out, logs io.Writer) error {
	fmt.Fprintln(out, "A scripted model (the mock provider's [[mock:tool=... repeat=12 until=stop fix=...]]) reads a")
	fmt.Fprintln(out, "settings file that does not exist, and calls run_shell the same way again until it sees")
	fmt.Fprintln(out, "scarproxy's STOP block. The harness runs each call; it fails until the file is created.")

	// Without scarproxy: the mock provider itself.
	direct := &http.Client{Transport: mock.New()}
	send := func(ctx context.Context, body []byte) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://mock/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return direct.Do(req)
	}
	failures := 0
	without, err := loopAgent(ctx, loopTask(), send, func(_ int, t loopTurn, result string) {
		if result == loopFailure {
			failures++
		}
	})
	if err != nil {
		return fmt.Errorf("without scarproxy: %w", err)
	}
	fmt.Fprintf(out, "\nWithout scarproxy: %d failed calls, %d turns, and the model gave up.\n", failures, without)

	in, err := connectOrStart(ctx, target, args, getenv, logs)
	if err != nil {
		return err
	}
	defer in.Stop()
	fmt.Fprintf(out, "\nWith scarproxy (mock provider) at %s/v1:\n", in.BaseURL)
	proxied := func(ctx context.Context, body []byte) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, in.BaseURL+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		return http.DefaultClient.Do(req)
	}
	failures = 0
	with, err := loopAgent(ctx, loopTask(), proxied, func(n int, t loopTurn, result string) {
		escalation := ""
		if l := t.header.Get("X-Scar-Loop"); l != "" {
			escalation = ", X-Scar-Loop: " + l
		}
		fmt.Fprintf(out, "  turn %2d  X-Scar-Guard: %s%s\n", n, t.header.Get("X-Scar-Guard"), escalation)
		if t.call == "" {
			fmt.Fprintf(out, "           final answer: %s\n", t.text)
			return
		}
		if result == loopFailure {
			failures++
		}
		fmt.Fprintf(out, "           run_shell %s -> %s\n", t.call, strings.SplitN(result, "\n", 2)[0])
	})
	if err != nil {
		return fmt.Errorf("with scarproxy: %w", err)
	}
	fmt.Fprintf(out, "\nWith scarproxy: %d failed calls, %d turns: the STOP block broke the loop.\n", failures, with)

	c := &demoClient{base: in.BaseURL}
	var fixes struct {
		Fixes []struct {
			Tool, Call, Pattern string
			Failures            int
		} `json:"fixes"`
	}
	if err := c.api(ctx, http.MethodGet, "/scar/v1/fixes", nil, &fixes); err != nil {
		return err
	}
	for _, f := range fixes.Fixes {
		fmt.Fprintf(out, "Learned fix (GET /scar/v1/fixes): after %d failures (%s), %s %s\n", f.Failures, f.Pattern, f.Tool, f.Call)
	}

	// A new conversation meets the same failure once: its guard already
	// says how it was fixed.
	body, _ := json.Marshal(chatMsg{"model": "mock-gpt", "messages": []chatMsg{
		{"role": "system", "content": "You are a coding agent. Use run_shell to work in the repository."},
		{"role": "user", "content": "[[mock:echo]] Start the worker with the service settings."},
		{"role": "assistant", "content": nil, "tool_calls": []chatMsg{{"id": "call_1", "type": "function",
			"function": chatMsg{"name": "run_shell", "arguments": loopBadArgs}}}},
		{"role": "tool", "tool_call_id": "call_1", "content": loopFailure},
	}})
	res, err := proxied(ctx, body)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var echo struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &echo); err != nil || len(echo.Choices) == 0 {
		return fmt.Errorf("new conversation: unexpected answer: %s", b)
	}
	fmt.Fprintf(out, "\nA new conversation fails the same way once; X-Scar-Guard: %s. What the model was told (its system prompt, then the blocks placed in its newest turn):\n", res.Header.Get("X-Scar-Guard"))
	fmt.Fprintln(out, indent(echo.Choices[0].Message.Content))
	dashboardHint(out, target, in.BaseURL)
	return nil
}
