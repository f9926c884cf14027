package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/shared"
)

func noEnv(string) string { return "" }

// TestMain runs the program itself instead of the tests when
// SCARPROXY_TEST_MAIN=1: tests start it as a subprocess of the test
// binary (os.Args[0]) with the program's arguments.
func TestMain(m *testing.M) {
	if os.Getenv("SCARPROXY_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// start runs the real program in-process and stops it when the test ends.
func start(t *testing.T, args ...string) *instance {
	t.Helper()
	in, err := startServe(context.Background(), args, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := in.Stop(); err != nil {
			t.Errorf("serve returned %v", err)
		}
	})
	return in
}

func client(in *instance) openai.Client {
	return openai.NewClient(option.WithBaseURL(in.BaseURL+"/v1"), option.WithAPIKey("x"), option.WithMaxRetries(0))
}

// exercise drives one server with the official client: non-streaming,
// streaming, and a tool call.
func exercise(t *testing.T, c openai.Client, model string, wantTool string) {
	ctx := context.Background()
	t.Run("non-streaming", func(t *testing.T) {
		res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Say hello")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Choices) != 1 || res.Choices[0].Message.Content == "" || res.Choices[0].FinishReason != "stop" || res.Usage.TotalTokens == 0 {
			t.Fatalf("answer %+v", res)
		}
	})
	t.Run("streaming", func(t *testing.T) {
		stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         model,
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello in a stream")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if chunks < 3 || len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Choices[0].FinishReason != "stop" {
			t.Fatalf("%d chunks, accumulated %+v", chunks, acc.ChatCompletion)
		}
	})
	t.Run("tool call", func(t *testing.T) {
		res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[[mock:tool=" + wantTool + "]] What is the weather in Paris?")},
			Tools: []openai.ChatCompletionToolParam{{Function: shared.FunctionDefinitionParam{
				Name:       wantTool,
				Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{}},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		calls := res.Choices[0].Message.ToolCalls
		if len(calls) != 1 || calls[0].Function.Name != wantTool || calls[0].ID == "" || res.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("tool call %+v", res.Choices[0])
		}
	})
}

func TestEndToEndMock(t *testing.T) {
	in := start(t, "--mock", "--data", t.TempDir())
	exercise(t, client(in), "mock-gpt", "get_weather")

	t.Run("provider error surfaces to the client and is remembered", func(t *testing.T) {
		c := client(in)
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    "mock-gpt",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("[[mock:status=429]] hi")},
		})
		var apiErr *openai.Error
		if err == nil || !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Code != "rate_limit_exceeded" {
			t.Fatalf("err = %v", err)
		}
		res, err := http.Get(in.BaseURL + "/scar/v1/incidents")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !bytes.Contains(b, []byte(`"status_code":429`)) {
			t.Fatalf("incident not listed: %s", b)
		}
	})
	t.Run("models", func(t *testing.T) {
		c := client(in)
		page, err := c.Models.List(context.Background())
		if err != nil || len(page.Data) == 0 || page.Data[0].ID != "mock-gpt" {
			t.Fatalf("models %+v %v", page, err)
		}
	})
}

// fakeOpenAI answers like OpenAI for the three request kinds exercise sends.
func fakeOpenAI(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Authorization") != "Bearer sk-from-env" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		switch {
		case bytes.Contains(body, []byte(`"tools"`)):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		case bytes.Contains(body, []byte(`"stream":true`)):
			w.Header().Set("Content-Type", "text/event-stream")
			for _, piece := range []string{`{"role":"assistant","content":""}`, `{"content":"Hel"}`, `{"content":"lo"}`} {
				fmt.Fprintf(w, "data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", piece)
				w.(http.Flusher).Flush()
			}
			io.WriteString(w, "data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
			io.WriteString(w, "data: {\"id\":\"c2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":2,\"total_tokens\":3}}\n\ndata: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c3","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestEndToEndOpenAIProviderFromConfig(t *testing.T) {
	up := fakeOpenAI(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
data_dir: %s
providers:
  - name: fake
    type: openai
    base_url: %s/v1
    api_key_env: FAKE_KEY
`, t.TempDir(), up.URL)), 0o644)
	getenv := func(k string) string {
		if k == "FAKE_KEY" {
			return "sk-from-env"
		}
		return ""
	}
	in, err := startServe(context.Background(), []string{"--config", cfg}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Stop()
	exercise(t, client(in), "gpt-x", "lookup")
}

func TestBadConfigFailsNamingTheKey(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "listen: 127.0.0.1:0\nlisten_addr: x\n", "listen_addr"},
		{"bad provider type", "providers:\n  - name: a\n    type: grpc\n", "providers[0].type"},
		{"missing base_url", "providers:\n  - name: a\n    type: openai\n", "providers[0].base_url"},
		{"bad duration", "guard:\n  window: soon\n", "window"},
		{"bad driver", "mock: true\nstore:\n  driver: mysql\n", "store.driver"},
		{"bad fallback", "providers:\n  - name: a\n    type: mock\n    fallbacks: [b]\n", "fallbacks"},
		{"zero solutions age", "mock: true\nretention:\n  solutions_max_age: 0s\n", "retention.solutions_max_age"},
		{"negative solutions cap", "mock: true\nretention:\n  solutions_max_per_workspace: -1\n", "retention.solutions_max_per_workspace"},
		{"negative replica delay", "mock: true\nstore:\n  replica_delay: -5ms\n", "store.replica_delay"},
		{"bad durability", "mock: true\nstore:\n  durability: eventual\n", "store.durability"},
		{"embeddings without model", "mock: true\nrecall:\n  embeddings:\n    provider: mock\n", "recall.embeddings.model"},
		{"embeddings bad threshold", "mock: true\nrecall:\n  embeddings:\n    provider: mock\n    model: m\n    min_similarity: 2\n", "recall.embeddings.min_similarity"},
		{"embeddings of no provider", "providers:\n  - name: a\n    type: openai\n    base_url: http://127.0.0.1:1\nrecall:\n  embeddings:\n    provider: b\n    model: m\n", "recall.embeddings.provider"},
		{"embeddings of anthropic", "providers:\n  - name: a\n    type: anthropic\n    base_url: http://127.0.0.1:1\nrecall:\n  embeddings:\n    provider: a\n    model: m\n", "recall.embeddings.provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			os.WriteFile(path, []byte(tc.yaml), 0o644)
			err := run(context.Background(), []string{"serve", "--config", path, "--listen", "127.0.0.1:0", "--data", dir}, noEnv, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to name %q", err, tc.want)
			}
		})
	}
}

func TestEnvAndFlagsOverrideYAML(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("listen: 127.0.0.1:1\nmock: false\nlog:\n  format: text\n"), 0o644)
	fs, f := newServeFlags()
	if err := fs.Parse([]string{"--config", path, "--mock"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SCARPROXY_LISTEN": "127.0.0.1:2", "SCARPROXY_LOG_FORMAT": "json"}
	cfg, err := f.load(fs, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:2" || !cfg.Mock || cfg.Log.Format != "json" {
		t.Fatalf("cfg %+v", cfg)
	}
}

// TestRetentionOfSolutionsFromConfig: retention.solutions_max_per_workspace
// reaches the proxy: past the cap, the least recently updated solution is
// pruned, from the store and from recall.
func TestRetentionOfSolutionsFromConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("mock: true\ndata_dir: "+dir+"\nretention:\n  every: 20ms\n  solutions_max_per_workspace: 1\n"), 0o644)
	in := start(t, "--config", path)
	for _, goal := range []string{"Rotate the ingress TLS certificates", "Speed up the CI cache for Go modules"} {
		if r := do(t, "POST", in.BaseURL+"/scar/v1/solutions", `{"goal":"`+goal+`","approach":"did it","outcome":"ok","confidence":0.8}`, nil); r.status != 201 {
			t.Fatalf("post solution: %d %s", r.status, r.body)
		}
	}
	waitFor(t, 10*time.Second, "the older solution pruned from the store and from recall", func() bool {
		list := do(t, "GET", in.BaseURL+"/scar/v1/solutions", "", nil)
		rec := do(t, "GET", in.BaseURL+"/scar/v1/recall?goal=rotate+the+ingress+TLS+certificates", "", nil)
		return !strings.Contains(list.body, "ingress TLS") && strings.Contains(list.body, "CI cache") &&
			rec.status == 200 && !strings.Contains(rec.body, "ingress TLS")
	})
}

// TestShutdownLetsStreamsFinish: on shutdown the proxy stops accepting
// connections but an in-flight stream runs to its end.
func TestShutdownLetsStreamsFinish(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		close(arrived)
		<-release
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("data_dir: %s\nproviders:\n  - name: up\n    type: openai\n    base_url: %s\n", t.TempDir(), up.URL)), 0o644)
	in, err := startServe(context.Background(), []string{"--config", cfg}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		res, err := http.Post(in.BaseURL+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			done <- result{err: err}
			return
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		done <- result{string(b), err}
	}()
	<-arrived
	stopped := make(chan error, 1)
	go func() { stopped <- in.Stop() }()
	// Wait until the listener is closed: shutdown has begun.
	addr := strings.TrimPrefix(in.BaseURL, "http://")
	waitFor(t, 10*time.Second, "listener closed", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(release)
	r := <-done
	if r.err != nil || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Fatalf("in-flight stream cut by shutdown: %q %v", r.body, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// TestExampleConfigDocumentsEveryKey loads config.example.yaml and checks
// that every key of Config appears in it.
func TestExampleConfigDocumentsEveryKey(t *testing.T) {
	const path = "../../config.example.yaml"
	cfg := Default()
	if err := cfg.loadFile(path); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("example config does not validate: %v", err)
	}
	text, _ := os.ReadFile(path)
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Slice || typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeOf(time.Time{}) {
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if key == "" || key == "-" {
				continue
			}
			if !regexp.MustCompile(`(?m)^[\s#-]*` + regexp.QuoteMeta(key) + `:`).Match(text) {
				t.Errorf("config.example.yaml does not document %s (%s.%s)", key, typ.Name(), f.Name)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(Config{}))
}

// TestMemorySurvivesRestart: incidents and solutions written through one
// process are there for the next one on the same data directory.
func TestMemorySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	in := start(t, "--mock", "--data", dir)
	for i := 0; i < 2; i++ {
		do(t, "POST", in.BaseURL+"/v1/chat/completions", fmt.Sprintf(failingTurn, fmt.Sprint("r", i), fmt.Sprint("r", i), i), nil)
	}
	if r := do(t, "POST", in.BaseURL+"/scar/v1/solutions", `{"goal":"Speed up the CI cache for Go modules","approach":"cache GOMODCACHE keyed by go.sum","outcome":"builds 3x faster","confidence":0.8}`, nil); r.status != 201 {
		t.Fatalf("store solution: %d %s", r.status, r.body)
	}
	if err := in.Stop(); err != nil {
		t.Fatal(err)
	}
	again := start(t, "--mock", "--data", dir)
	// The failing conversation goes on: its guard is still there.
	r := do(t, "POST", again.BaseURL+"/v1/chat/completions", `{"model":"mock-gpt","messages":[{"role":"user","content":"build it"},
 {"role":"assistant","tool_calls":[{"id":"call_ls","type":"function","function":{"name":"ls","arguments":"{}"}}]},
 {"role":"tool","tool_call_id":"call_ls","content":"package.json src"},{"role":"user","content":"[[mock:echo]] and now?"}]}`, nil)
	if r.header.Get("X-Scar-Guard") != "1" || !strings.Contains(r.body, "REPEAT FAILURE GUARD") {
		t.Fatalf("after restart: guard %s\n%s", r.header.Get("X-Scar-Guard"), r.body)
	}
	// A new task recalls the stored solution.
	r = do(t, "POST", again.BaseURL+"/v1/chat/completions", `{"model":"mock-gpt","messages":[{"role":"user","content":"[[mock:echo]] make the go module cache in CI faster"}]}`, nil)
	if r.header.Get("X-Scar-Guard") != "0" || r.header.Get("X-Scar-Recall") != "1" || !strings.Contains(r.body, "GOMODCACHE") {
		t.Fatalf("after restart: guard %s recall %s\n%s", r.header.Get("X-Scar-Guard"), r.header.Get("X-Scar-Recall"), r.body)
	}
}
