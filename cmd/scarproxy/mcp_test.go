package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// lockedBuffer is a concurrency-safe log sink.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stdioMCP runs `scarproxy mcp args...` in-process on pipes, as an MCP
// client launching the command would, and connects the SDK's client to
// it. Closing the session ends the command; wait returns its error.
func stdioMCP(t *testing.T, args ...string) (cs *mcp.ClientSession, wait func() error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		err := cmdMCP(context.Background(), args, noEnv, inR, outW, stderr)
		outW.Close()
		inR.Close()
		done <- err
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "scarproxy-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		t.Fatalf("connect to scarproxy mcp: %v (command: %v)\n%s", err, <-done, stderr.String())
	}
	var once sync.Once
	var werr error
	wait = func() error {
		once.Do(func() {
			cs.Close()
			select {
			case werr = <-done:
			case <-time.After(10 * time.Second):
				werr = errors.New("scarproxy mcp did not end after the client closed")
			}
		})
		return werr
	}
	t.Cleanup(func() { wait() })
	return cs, wait
}

// httpMCP connects the SDK's client to a running serve's MCP endpoint.
func httpMCP(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	cs, err := connectHTTPMCP(url, key)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func connectHTTPMCP(url, key string) (*mcp.ClientSession, error) {
	hc := http.DefaultClient
	if key != "" {
		hc = &http.Client{Transport: bearerTransport(key)}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "scarproxy-test", Version: "1"}, nil)
	return client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
}

type bearerTransport string

func (k bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}

// tool calls a tool and returns its result as JSON (its text content),
// failing the test when the call fails.
func tool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) map[string]any {
	t.Helper()
	out, err := toolCall(cs, name, args)
	if err != nil {
		t.Fatalf("%s(%v): %v", name, args, err)
	}
	return out
}

func toolCall(cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, error) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return nil, err
	}
	text := ""
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if res.IsError {
		return nil, errors.New(text)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("text content is not JSON: %w: %q", err, text)
	}
	return out, nil
}

func keySum(k string) string {
	s := sha256.Sum256([]byte(k))
	return hex.EncodeToString(s[:])
}

// TestMCPStdio drives every tool over `scarproxy mcp` (stdio), then
// recalls what it stored through serve's /mcp on the same data, where a
// gateway key reaches its own workspace only.
func TestMCPStdio(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("mock: true\ndata_dir: %q\ngateway:\n  keys:\n    - key_sha256: %s\n      workspace: team-a\n    - key_sha256: %s\n      workspace: team-b\n",
		dir, keySum("key-a"), keySum("key-b"))), 0o644)

	cs, wait := stdioMCP(t, "--config", cfg, "--workspace", "team-b")
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if want := []string{"recall_context", "recall_info", "recall_similar", "recall_store", "scar_fixes", "scar_guard", "scar_record"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	goal := "Fix OAuth token refresh failing after 1 hour"
	r := tool(t, cs, "recall_store", map[string]any{"goal": goal, "approach": "Refresh proactively at 80% of expiry using a background timer",
		"outcome": "No more 401s; sessions stay alive", "confidence": 0.9})
	if r["stored"] != true || r["id"] == "" || r["solution"].(map[string]any)["workspace"] != "team-b" {
		t.Fatalf("recall_store: %v", r)
	}
	if r = tool(t, cs, "recall_similar", map[string]any{"goal": "OAuth token refresh keeps failing on expiry"}); r["found"] != true {
		t.Fatalf("recall_similar: %v", r)
	}
	if r = tool(t, cs, "recall_context", map[string]any{"goal": "OAuth token refresh keeps failing on expiry"}); r["found"] != true ||
		!strings.Contains(r["context"].(string), "### RECALL: Similar Task Found in Memory") {
		t.Fatalf("recall_context: %v", r)
	}
	if r = tool(t, cs, "recall_similar", map[string]any{"goal": "OAuth token refresh keeps failing on expiry", "workspace": "team-a"}); r["found"] != false {
		t.Fatalf("another workspace: %v", r)
	}
	if r = tool(t, cs, "recall_info", nil); r["name"] != "scarproxy" || r["version"] != moduleVersion(buildInfo) || r["workspace"] != "team-b" {
		t.Fatalf("recall_info: %v", r)
	}
	for i := range 2 {
		r = tool(t, cs, "scar_record", map[string]any{"type": "network_error", "message": fmt.Sprintf("read ECONNRESET (attempt %d)", i), "code": "ECONNRESET", "session": "s1"})
		if inc := r["incident"].(map[string]any); inc["code"] != "ECONNRESET" || inc["workspace"] != "team-b" || inc["project"] != "default" {
			t.Fatalf("scar_record: %v", r)
		}
	}
	r = tool(t, cs, "scar_guard", map[string]any{"session": "s1"})
	if p := r["patterns"].([]any); len(p) != 1 || p[0].(map[string]any)["count"] != 2.0 || !strings.Contains(r["block"].(string), "REPEAT FAILURE GUARD") {
		t.Fatalf("scar_guard: %v", r)
	}
	if r = tool(t, cs, "scar_fixes", map[string]any{"error": "Error: 429 Too Many Requests: rate limit exceeded"}); len(r["fixes"].([]any)) != 1 {
		t.Fatalf("scar_fixes: %v", r)
	}
	if _, err := toolCall(cs, "recall_store", map[string]any{"goal": "x"}); err == nil || !strings.Contains(err.Error(), "approach") {
		t.Fatalf("recall_store without approach: %v", err)
	}
	if err := wait(); err != nil {
		t.Fatalf("scarproxy mcp: %v", err)
	}

	// The store is released and holds what the tools wrote.
	if out := mustCLI(t, "incidents", "list", "--config", cfg, "--workspace", "team-b"); strings.Count(out, "ECONNRESET") != 4 {
		t.Fatalf("incidents list:\n%s", out)
	}

	// serve on the same data: another client recalls over HTTP, within
	// its key's workspace only.
	in := start(t, "--config", cfg)
	b := httpMCP(t, in.BaseURL+"/mcp", "key-b")
	if r = tool(t, b, "recall_similar", map[string]any{"goal": "OAuth token refresh keeps failing on expiry"}); r["found"] != true ||
		r["solution"].(map[string]any)["goal"] != goal {
		t.Fatalf("key-b over HTTP: %v", r)
	}
	a := httpMCP(t, in.BaseURL+"/mcp", "key-a")
	if _, err := toolCall(a, "recall_similar", map[string]any{"goal": goal, "workspace": "team-b"}); err == nil || !strings.Contains(err.Error(), "team-b") {
		t.Fatalf("key-a naming team-b: %v", err)
	}
	if r = tool(t, a, "recall_similar", map[string]any{"goal": goal}); r["found"] != false {
		t.Fatalf("key-a recalled team-b's solution: %v", r)
	}
	if _, err := connectHTTPMCP(in.BaseURL+"/w/team-b/default/mcp", "key-a"); err == nil {
		t.Fatal("key-a connected to team-b's tenant path")
	}
	if _, err := connectHTTPMCP(in.BaseURL+"/mcp", ""); err == nil {
		t.Fatal("connected without a key")
	}
}

// TestMCPStdioAndServeSharePostgres runs `scarproxy mcp` and serve at once
// on one PostgreSQL: what one stores, the other recalls.
func TestMCPStdioAndServeSharePostgres(t *testing.T) {
	cfg := postgresConfig(t, schemaDSN(t, postgresDSN(t)))
	in := start(t, "--config", cfg)
	cs, wait := stdioMCP(t, "--config", cfg)
	h := httpMCP(t, in.BaseURL+"/mcp", "")

	tool(t, cs, "recall_store", map[string]any{"goal": "Speed up the CI cache restore", "approach": "key the cache on go.sum", "outcome": "2 minutes faster"})
	waitFor(t, 10*time.Second, "serve recalls what stdio stored", func() bool {
		return tool(t, h, "recall_similar", map[string]any{"goal": "speed up CI cache restore"})["found"] == true
	})
	tool(t, h, "recall_store", map[string]any{"goal": "Shrink the Docker image", "approach": "distroless base, static binary", "outcome": "12 MB"})
	waitFor(t, 10*time.Second, "stdio recalls what serve stored", func() bool {
		return tool(t, cs, "recall_similar", map[string]any{"goal": "shrink the docker image"})["found"] == true
	})
	tool(t, cs, "scar_record", map[string]any{"type": "build_error", "message": "go: module not found", "code": "ENOENT"})
	r := do(t, "GET", in.BaseURL+"/scar/v1/incidents", "", nil)
	if !strings.Contains(r.body, `"code":"ENOENT"`) {
		t.Fatalf("incidents through serve: %s", r.body)
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
}

func TestMCPCommandErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"--data", dir, "extra"}, true, "unexpected argument"},
		{[]string{"--data", dir, "--nope"}, true, "nope"},
		{[]string{"--data", dir, "--workspace", "my team"}, false, "workspace"},
	} {
		err := cmdMCP(context.Background(), c.args, noEnv, strings.NewReader(""), io.Discard, io.Discard)
		var ue usageError
		if err == nil || errors.As(err, &ue) != c.usage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v", c.args, err)
		}
	}
	// A client that connects and leaves at once ends the command cleanly.
	if err := cmdMCP(context.Background(), []string{"--data", dir}, noEnv, strings.NewReader(""), io.Discard, io.Discard); err != nil {
		t.Fatalf("stdin closed at once: %v", err)
	}
}

// TestMCPStdioAnswersMalformedLines: `scarproxy mcp` answers a line that
// is not JSON with JSON-RPC's -32700 and one that is not a message with
// -32600, and the session carries on.
func TestMCPStdioAnswersMalformedLines(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := cmdMCP(context.Background(), []string{"--data", t.TempDir()}, noEnv, inR, outW, io.Discard)
		outW.Close()
		done <- err
	}()
	lines := bufio.NewReader(outR)
	// call sends one line and returns the answer's JSON-RPC error code (0:
	// none) and result.
	call := func(line string) (int, map[string]any) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("write %q: %v", line, err)
		}
		if strings.Contains(line, `"notifications/`) {
			return 0, nil
		}
		b, err := lines.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %q: %v (the command ended: %v)", line, err, <-done)
		}
		var msg struct {
			Result map[string]any      `json:"result"`
			Error  *struct{ Code int } `json:"error"`
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatalf("answer to %q is not JSON: %s", line, b)
		}
		if msg.Error != nil {
			return msg.Error.Code, nil
		}
		return 0, msg.Result
	}
	for _, tc := range []struct {
		line string
		code int
	}{
		{`this is not json`, -32700},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, 0},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list"`, -32700},
		{`{"hello":"world"}`, -32600},
		{`[]`, -32600},
		{`42`, -32600},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, 0},
	} {
		if code, _ := call(tc.line); code != tc.code {
			t.Fatalf("%s: error code %d, want %d", tc.line, code, tc.code)
		}
	}
	if _, res := call(`{"jsonrpc":"2.0","id":4,"method":"tools/list"}`); len(res["tools"].([]any)) == 0 {
		t.Fatalf("tools/list after malformed lines: %v", res)
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("scarproxy mcp ended with %v", err)
	}
}
