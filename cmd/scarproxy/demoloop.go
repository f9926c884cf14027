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
	// input and cached are the answer's usage: its input tokens, and
	// those the provider read from its prompt cache.
	input, cached int
}

// cacheTally adds up the usage of a run's turns after its first (which
// fills the provider's cache): what the prompt cache served.
type cacheTally struct{ input, cached int }

func (c *cacheTally) add(n int, t loopTurn) {
	if n > 1 {
		c.input += t.input
		c.cached += t.cached
	}
}

func (c cacheTally) percent() int {
	if c.input == 0 {
		return 0
	}
	return (100*c.cached + c.input/2) / c.input
}

// demoSystemPrompt is the demo agent's system prompt, as long as a small
// agent's: a provider caches a prompt from 1,024 tokens on.
const demoSystemPrompt = `You are a coding agent working in a Git repository on the user's machine. Use run_shell to work in the repository: read files, run the build and the tests, and change files with the usual command-line tools.

Working rules:
- Before changing anything, read the files involved and the project's README, Makefile or equivalent, so that the change follows the project's conventions for layout, naming, error handling and tests.
- Prefer small, reviewable changes. Do not reformat code you do not otherwise touch, do not rename things for taste, and do not add dependencies unless the task needs one and the project already manages its dependencies in a way you can follow.
- Run the narrowest command that checks your change first (one test, one package), then the wider suite before you finish. When a command fails, read its whole output: the first error is usually the cause and the rest follows from it.
- When the same command fails twice the same way, do not run it a third time unchanged. Find out why it fails: read the file it names, list the directory, check the configuration, and change the call or fix the cause.
- Never print or write secrets: API keys, tokens, passwords and private keys stay where they are. If a command needs one, say which and stop.
- Keep the user's work safe: do not delete files you did not create, do not reset or rebase branches, and do not force-push. Ask before any operation you cannot undo.
- When the task is done, say in a few lines what you changed, how you checked it, and anything left for the user to decide.

About the environment:
- The shell is bash on Linux. Commands run in the repository's root unless you cd; each call starts a new shell, so environment changes do not persist between calls.
- Network access may be limited to the package registries the project uses. If a download fails, say so rather than retrying in a loop.
- Long-running processes (servers, watchers) must be started in the background with their output sent to a file, and stopped when you are done with them.
- Files you create for scratch work go under a temporary directory, not in the repository.

About answers:
- Quote file paths and commands exactly. Show only the relevant lines of long outputs.
- If the task is ambiguous, state the interpretation you chose and why, then proceed.
- If you cannot finish, say what you tried, what failed, and what you would try next.

Project notes (from the repository's CONTRIBUTING file):
- The service reads its settings from config/settings.json at start-up; config/settings.example.json documents every key with its default. The settings file is not committed: each developer creates it from the example.
- The port, the log level and the database URL can also be set from the environment (SERVICE_PORT, SERVICE_LOG_LEVEL, DATABASE_URL); the environment wins over the file.
- make build compiles the service into bin/; make test runs the unit tests; make check runs the linters and the tests, and is what CI runs on every pull request.
- Integration tests need a database: make db-up starts one in the background on port 5433, make db-down stops it. Tests that need it are skipped when DATABASE_URL is not set.
- Migrations live in migrations/, one file per change, numbered; never edit a migration that has been merged, add a new one.
- Logs are structured (JSON lines on standard error). Every request logs one line at info with its method, path, status and duration.
- Errors returned to clients never include internal details; they are logged with the request id instead.
- New endpoints need a test of their success path and of each error they return, and an entry in docs/api.md.
- Dependencies are pinned in the lock file; update them with the package manager's own command, never by hand, and say why in the commit message.
- Commit messages say what changed and why, in the imperative, with the subject under 72 characters.

Tool: run_shell runs one shell command and returns what it printed (standard output and standard error, interleaved) and its exit status. Use it for reading files (cat, sed -n, head), listing (ls, find), searching (grep -rn), building and testing (make, go test, npm test, pytest), and editing (sed -i, or a here-document written with cat). Keep each command short enough to read; chain with && when a step depends on the one before.`

// loopAgent runs the harness: it sends the conversation, runs each call,
// and stops at the final answer. send posts a chat request body.
func loopAgent(ctx context.Context, task string, send func(ctx context.Context, body []byte) (*http.Response, error), each func(n int, t loopTurn, result string)) (int, error) {
	msgs := []chatMsg{
		{"role": "system", "content": demoSystemPrompt},
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
			Usage struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
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
		turn := loopTurn{text: m.Content, header: res.Header, input: out.Usage.PromptTokens, cached: out.Usage.PromptTokensDetails.CachedTokens}
		if len(m.ToolCalls) == 0 {
			each(n, turn, "")
			return n, nil
		}
		tc := m.ToolCalls[0]
		result := loopFailure
		if tc.Function.Arguments == loopFixArgs {
			fixed, result = true, "created config/settings.json"
		} else if fixed {
			result = "port: 8080"
		}
		turn.call, turn.text = tc.Function.Arguments, ""
		each(n, turn, result)
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
	var bare cacheTally
	without, err := loopAgent(ctx, loopTask(), send, func(n int, t loopTurn, result string) {
		bare.add(n, t)
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
	var through cacheTally
	with, err := loopAgent(ctx, loopTask(), proxied, func(n int, t loopTurn, result string) {
		through.add(n, t)
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
	fmt.Fprintf(out, "Prompt cache (the usage in the mock provider's answers): after the first turn, %d%% of the input was read\n", through.percent())
	fmt.Fprintf(out, "from the cache with scarproxy, %d%% without. Its blocks go into the newest turn: a turn re-reads the\n", bare.percent())
	fmt.Fprintln(out, "blocks of the turn before, never the conversation (GET /scar/v1/usage, the dashboard's Usage page).")

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
