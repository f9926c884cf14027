package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
)

// instance is a scarproxy started in-process by run("serve", ...).
type instance struct {
	BaseURL string // http://127.0.0.1:PORT
	stop    context.CancelFunc
	done    chan error
	once    sync.Once
	err     error
}

// Stop shuts the instance down gracefully and returns serve's error. It
// may be called more than once.
func (in *instance) Stop() error {
	in.once.Do(func() {
		in.stop()
		in.err = <-in.done
	})
	return in.err
}

// startServe runs `serve args...` in-process (on 127.0.0.1:0 unless args
// say otherwise) and waits until it listens.
func startServe(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) (*instance, error) {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	in := &instance{stop: cancel, done: make(chan error, 1)}
	full := append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)
	go func() {
		err := run(ctx, full, getenv, pw, stderr)
		pw.CloseWithError(errors.Join(err, io.EOF))
		in.done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	if err != nil {
		cancel()
		<-in.done
		return nil, fmt.Errorf("scarproxy did not start: %w", err)
	}
	const marker = "listening on "
	i := strings.Index(line, marker)
	if i < 0 {
		cancel()
		return nil, fmt.Errorf("scarproxy did not start: %q", line)
	}
	url := strings.Fields(line[i+len(marker):])[0]
	in.BaseURL = strings.TrimSuffix(url, "/v1")
	return in, nil
}

// connectOrStart returns the running scarproxy at target (its URL, without
// /v1), or, when target is empty, one started in-process.
func connectOrStart(ctx context.Context, target string, args []string, getenv func(string) string, logs io.Writer) (*instance, error) {
	if target == "" {
		return startServe(ctx, args, getenv, logs)
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Sprintf("demo: --url %q: want the proxy's address, e.g. http://127.0.0.1:8080", target)}
	}
	in := &instance{BaseURL: strings.TrimSuffix(strings.TrimSuffix(target, "/"), "/v1"), stop: func() {}, done: make(chan error, 1)}
	in.done <- nil
	return in, nil
}

// dashboardHint says where to see what a demo did.
func dashboardHint(out io.Writer, target, base string) {
	if target != "" {
		fmt.Fprintf(out, "\nSee it in the dashboard: %s/ui/\n", base)
		return
	}
	fmt.Fprintln(out, "\nTo see this in the dashboard, run `scarproxy serve --mock`, then this demo with --url http://127.0.0.1:8080, and open http://127.0.0.1:8080/ui/")
}

// demoClient sends chat requests the way an agent does.
type demoClient struct {
	base    string
	session string
}

type chatMsg = map[string]any

// chat posts messages and returns the answer text and the response headers.
func (c *demoClient) chat(ctx context.Context, msgs []chatMsg) (string, http.Header, error) {
	body, _ := json.Marshal(map[string]any{"model": "mock-gpt", "messages": msgs})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer demo")
	if c.session != "" {
		req.Header.Set("X-Scar-Session", c.session)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", nil, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &out)
	switch {
	case out.Error != nil:
		return "", res.Header, fmt.Errorf("HTTP %d: %s", res.StatusCode, out.Error.Message)
	case len(out.Choices) == 0:
		return "", res.Header, fmt.Errorf("HTTP %d: unexpected answer", res.StatusCode)
	}
	return out.Choices[0].Message.Content, res.Header, nil
}

func (c *demoClient) api(ctx context.Context, method, path string, body any, into any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, res.StatusCode, b)
	}
	if into != nil {
		return json.Unmarshal(b, into)
	}
	return nil
}

func indent(s string) string {
	return "    | " + strings.ReplaceAll(s, "\n", "\n    | ")
}

func cmdDemo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"demo: want guard, persist, recall or loop"}
	}
	fs := newFlagSet("demo")
	data := fs.String("data", "", "data directory (default: a temporary one, removed afterwards)")
	target := fs.String("url", "", "run against this running `scarproxy serve --mock` (e.g. http://127.0.0.1:8080) instead of starting one: its dashboard (/ui/) then shows what the demo did (not persist)")
	if isHelp(args[0]) {
		return printHelp(stdout, "demo", fs)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return parseError(err, "demo", fs, stdout)
	}
	if *target != "" && args[0] == "persist" {
		return usageError{"demo persist restarts its own proxy: --url does not apply"}
	}
	dir := *data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "scarproxy-demo-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	// Demos run on the embedded store and the mock, whatever the environment says.
	env := func(k string) string {
		if strings.HasPrefix(k, "SCARPROXY_") {
			return ""
		}
		return getenv(k)
	}
	quiet := []string{"--mock", "--data", dir}
	logs := io.Discard
	switch args[0] {
	case "guard":
		return demoGuard(ctx, *target, quiet, env, stdout, logs)
	case "persist":
		return demoPersist(ctx, quiet, env, stdout, logs)
	case "recall":
		return demoRecall(ctx, *target, quiet, env, stdout, logs)
	case "loop":
		return demoLoop(ctx, *target, quiet, env, stdout, logs)
	}
	return usageError{fmt.Sprintf("demo: unknown demo %q (want guard, persist, recall or loop)", args[0])}
}

// demoGuard shows an agent loop failing with the same syntax error: after
// the second failure the guard appears in the system prompt the model sees.
func demoGuard(ctx context.Context, target string, args []string, getenv func(string) string, out, logs io.Writer) error {
	in, err := connectOrStart(ctx, target, args, getenv, logs)
	if err != nil {
		return err
	}
	defer in.Stop()
	c := &demoClient{base: in.BaseURL, session: "demo-guard"}
	fmt.Fprintf(out, "scarproxy (mock provider) at %s/v1\n\n", in.BaseURL)
	fmt.Fprintln(out, "An agent writes parser.js, runs its syntax check, gets the same error, tries again...")
	msgs := []chatMsg{
		{"role": "system", "content": "You are a coding agent. Fix the task with the tools you have."},
		{"role": "user", "content": "[[mock:echo]] Write parser.js that parses the config file."},
	}
	for turn := 1; turn <= 3; turn++ {
		id := fmt.Sprintf("call_check_%d", turn)
		msgs = append(msgs,
			chatMsg{"role": "assistant", "content": nil, "tool_calls": []chatMsg{{
				"id": id, "type": "function",
				"function": chatMsg{"name": "run_syntax_check", "arguments": `{"file":"parser.js"}`},
			}}},
			chatMsg{"role": "tool", "tool_call_id": id,
				"content": fmt.Sprintf("SyntaxError: Unexpected end of input\n    at parser.js:%d:%d", 40+turn*3, turn+1)},
		)
		answer, h, err := c.chat(ctx, msgs)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\n--- turn %d: run_syntax_check failed (failure #%d); X-Scar-Guard: %s\n", turn, turn, h.Get("X-Scar-Guard"))
		fmt.Fprintln(out, "    system prompt the model received:")
		fmt.Fprintln(out, indent(answer))
		msgs = append(msgs, chatMsg{"role": "assistant", "content": "Let me try again."})
	}
	var g struct {
		Patterns []struct {
			Pattern string `json:"pattern"`
			Count   int    `json:"count"`
		} `json:"patterns"`
	}
	if err := c.api(ctx, http.MethodGet, "/scar/v1/guard?workspace=default&project=default&session=demo-guard", nil, &g); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nGET /scar/v1/guard: %d repeated pattern(s)", len(g.Patterns))
	for _, p := range g.Patterns {
		fmt.Fprintf(out, "; %s x%d", p.Pattern, p.Count)
	}
	fmt.Fprintln(out)
	dashboardHint(out, target, in.BaseURL)
	return nil
}

// demoPersist records failures, restarts the proxy on the same data
// directory and shows the failures are still remembered.
func demoPersist(ctx context.Context, args []string, getenv func(string) string, out, logs io.Writer) error {
	in, err := startServe(ctx, args, getenv, logs)
	if err != nil {
		return err
	}
	c := &demoClient{base: in.BaseURL, session: "demo-persist"}
	fmt.Fprintf(out, "1. scarproxy started at %s; the provider rate-limits the agent twice:\n", in.BaseURL)
	for i := 1; i <= 2; i++ {
		_, _, err := c.chat(ctx, []chatMsg{{"role": "user", "content": "[[mock:status=429]] Summarise the changelog."}})
		fmt.Fprintf(out, "   request %d -> %v\n", i, err)
	}
	if err := in.Stop(); err != nil {
		return err
	}
	fmt.Fprintln(out, "2. scarproxy stopped (store closed).")
	in, err = startServe(ctx, args, getenv, logs)
	if err != nil {
		return err
	}
	defer in.Stop()
	c.base = in.BaseURL
	fmt.Fprintf(out, "3. scarproxy started again at %s on the same data directory.\n", in.BaseURL)
	var incs struct {
		Incidents []struct {
			Type       string `json:"type"`
			StatusCode int    `json:"status_code"`
			Message    string `json:"message"`
		} `json:"incidents"`
	}
	if err := c.api(ctx, http.MethodGet, "/scar/v1/incidents?workspace=default&project=default&session=demo-persist", nil, &incs); err != nil {
		return err
	}
	fmt.Fprintf(out, "4. GET /scar/v1/incidents: %d incidents remembered\n", len(incs.Incidents))
	for _, i := range incs.Incidents {
		fmt.Fprintf(out, "   %s %d %s\n", i.Type, i.StatusCode, oneLine(i.Message, 90))
	}
	answer, h, err := c.chat(ctx, []chatMsg{{"role": "user", "content": "[[mock:echo]] Summarise the changelog."}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "5. the next request gets the guard (X-Scar-Guard: %s); the model sees:\n%s\n", h.Get("X-Scar-Guard"), indent(answer))
	return nil
}

// demoRecall stores solutions, then sends new tasks, one reworded with
// synonyms and other word forms, and shows the recall block the model got.
func demoRecall(ctx context.Context, target string, args []string, getenv func(string) string, out, logs io.Writer) error {
	in, err := connectOrStart(ctx, target, args, getenv, logs)
	if err != nil {
		return err
	}
	defer in.Stop()
	c := &demoClient{base: in.BaseURL}
	solutions := []chatMsg{
		{"goal": "Download a web page and extract all links from the HTML", "approach": "http.Get the URL, parse with golang.org/x/net/html, walk <a href> nodes, resolve relative URLs with url.ResolveReference", "outcome": "Links extracted; relative links resolved correctly", "confidence": 0.9},
		{"goal": "Fix the flaky TestServerShutdown test", "approach": "Replaced time.Sleep with a channel closed by the handler; waited on it before calling Shutdown", "outcome": "Test passed 1000 runs with -race", "confidence": 0.95},
		{"goal": "Parse the YAML configuration file and reject unknown keys", "approach": "yaml.v3 Decoder with KnownFields(true); wrapped errors with the file name", "outcome": "Typos in config now fail at start-up", "confidence": 0.85},
	}
	fmt.Fprintln(out, "Stored solutions (POST /scar/v1/solutions):")
	for _, s := range solutions {
		s["workspace"] = "default"
		if err := c.api(ctx, http.MethodPost, "/scar/v1/solutions", s, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "  - %s\n", s["goal"])
	}
	tasks := []string{
		"fetch the html of a site and get every link in it",
		"the shutdown test is flaky, fix it",
		"write a haiku about autumn",
	}
	for _, task := range tasks {
		answer, h, err := c.chat(ctx, []chatMsg{
			{"role": "system", "content": "You are a coding agent."},
			{"role": "user", "content": "[[mock:echo]] " + task},
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\nNew task: %q  (X-Scar-Recall: %s)\n", task, h.Get("X-Scar-Recall"))
		fmt.Fprintln(out, "  system prompt the model received:")
		fmt.Fprintln(out, indent(answer))
	}
	dashboardHint(out, target, in.BaseURL)
	return nil
}
