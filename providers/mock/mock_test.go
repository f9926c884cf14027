package mock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// viaMock serves an SDK client from a mock: the SDKs put /v1 in front of
// every path, the mock's paths are relative to the API root.
type viaMock struct{ m *Transport }

func (v viaMock) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Path = strings.TrimPrefix(r.URL.Path, "/v1")
	r.URL.RawPath = ""
	return v.m.RoundTrip(r)
}

func mockHTTPClient() *http.Client { return &http.Client{Transport: viaMock{fixedMock()}} }

// do sends body to path on m and returns the response with its body read.
func do(t *testing.T, m *Transport, method, path, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, "http://provider"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return res, string(b)
}

// post sends body to path on a fixed mock.
func post(t *testing.T, path, body string) (*http.Response, string) {
	t.Helper()
	return do(t, fixedMock(), http.MethodPost, path, body)
}

// parseSSE splits a stream into its events; it fails on a line that is
// neither "event:", "data:" nor blank, and on a stream that does not end
// with a blank line.
func parseSSE(t *testing.T, stream string) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	open := false
	sc := bufio.NewScanner(strings.NewReader(stream))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if open {
				out = append(out, cur)
			}
			cur, open = sseEvent{}, false
		case strings.HasPrefix(line, "event: "):
			cur.name, open = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			cur.data, open = []byte(strings.TrimPrefix(line, "data: ")), true
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if open {
		t.Fatalf("stream ends inside an event: %q", stream)
	}
	return out
}

// eventNames returns the names of events, checking that each one's data
// is JSON whose "type" is the name (Responses and Messages).
func eventNames(t *testing.T, events []sseEvent) []string {
	t.Helper()
	var names []string
	for _, ev := range events {
		var v struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(ev.data, &v); err != nil {
			t.Fatalf("event %s: %v: %s", ev.name, err, ev.data)
		}
		if v.Type != ev.name {
			t.Errorf("event %q carries type %q", ev.name, v.Type)
		}
		names = append(names, ev.name)
	}
	return names
}

func TestParseDirectives(t *testing.T) {
	// tool is a tool directive calling name with the JSON object args.
	tool := func(name, args string) toolScript {
		return toolScript{name: name, args: callArgs{json: args, text: args}}
	}
	tests := []struct {
		name string
		text string
		want directives
	}{
		{"none", "just text", directives{}},
		{"status", "[[mock:status=429]] hi", directives{status: 429}},
		{"status out of range", "[[mock:status=99]] [[mock:status=600]] [[mock:status=x]]", directives{}},
		{"delay", "[[mock:delay=3s]]", directives{delay: 3 * time.Second}},
		{"bad delay", "[[mock:delay=-1s]] [[mock:delay=soon]]", directives{}},
		{"tool", "[[mock:tool=get_weather]] Paris?", directives{tool: tool("get_weather", "{}")}},
		{"tool trims", "[[mock:tool= ls ]]", directives{tool: tool("ls", "{}")}},
		{"tool args", `[[mock:tool=read args={"path": "a.go", "lines": [1, 2]}]]`, directives{tool: tool("read", `{"path":"a.go","lines":[1,2]}`)}},
		{"tool args with brackets in strings", `[[mock:tool=grep args={"re":"a]]b","x":"}{"}]]`, directives{tool: tool("grep", `{"re":"a]]b","x":"}{"}`)}},
		{"tool args nested", `[[mock:tool=t args={"a":[[1],[2]]}]] then`, directives{tool: tool("t", `{"a":[[1],[2]]}`)}},
		{"tool args not an object", `[[mock:tool=t args=[1,2]]]`, directives{tool: tool("t", "{}")}},
		{"tool args invalid", `[[mock:tool=t args={"a":}]]`, directives{tool: tool("t", "{}")}},
		{"tool args empty", `[[mock:tool=t args=]]`, directives{tool: tool("t", "{}")}},
		{"tool name with args= inside", `[[mock:tool=xargs=1]]`, directives{tool: tool("xargs=1", "{}")}},
		{"tool args a string: a custom tool's input", `[[mock:tool=apply_patch args="*** Begin Patch\n*** End Patch"]]`,
			directives{tool: toolScript{name: "apply_patch", args: callArgs{json: "{}", text: "*** Begin Patch\n*** End Patch"}}}},
		{"tool args an input object: a custom tool's input", `[[mock:tool=exec args={"input": "const r = await tools.exec_command({cmd: \"ls\"}); text([r]);"}]]`,
			directives{tool: toolScript{name: "exec", args: callArgs{json: `{"input":"const r = await tools.exec_command({cmd: \"ls\"}); text([r]);"}`,
				text: `const r = await tools.exec_command({cmd: "ls"}); text([r]);`}}}},
		{"tool args an object with input and more", `[[mock:tool=t args={"input":"x","n":1}]]`, directives{tool: tool("t", `{"input":"x","n":1}`)}},
		{"repeat", `[[mock:tool=run args={"cmd": "make"} repeat=3]]`, directives{tool: toolScript{name: "run",
			args: callArgs{json: `{"cmd":"make"}`, text: `{"cmd":"make"}`}, repeat: 3}}},
		{"until guard: repeat 10", `[[mock:tool=run until=guard]]`, directives{tool: toolScript{name: "run", args: callArgs{json: "{}", text: "{}"}, repeat: 10, until: "guard"}}},
		{"until stop with repeat and fix, any order", `[[mock:tool=run fix={"cmd": "make -j1"} until=stop args={"cmd":"make"} repeat=6]]`,
			directives{tool: toolScript{name: "run", args: callArgs{json: `{"cmd":"make"}`, text: `{"cmd":"make"}`}, repeat: 6, until: "stop",
				fix: callArgs{json: `{"cmd":"make -j1"}`, text: `{"cmd":"make -j1"}`}, hasFix: true}}},
		{"the README's loop", `[[mock:tool=run_shell args={"cmd":"python3 -c \"print(1\""} until=guard fix={"cmd":"python3 -c \"print(1)\""}]] run the script`,
			directives{tool: toolScript{name: "run_shell", args: callArgs{json: `{"cmd":"python3 -c \"print(1\""}`, text: `{"cmd":"python3 -c \"print(1\""}`},
				repeat: 10, until: "guard", fix: callArgs{json: `{"cmd":"python3 -c \"print(1)\""}`, text: `{"cmd":"python3 -c \"print(1)\""}`}, hasFix: true}}},
		{"bad loop values ignored", `[[mock:tool=run repeat=0 until=never fix= stray]]`, directives{tool: tool("run", "{}")}},
		{"repeat capped", `[[mock:tool=run repeat=99999]]`, directives{tool: toolScript{name: "run", args: callArgs{json: "{}", text: "{}"}, repeat: 1000}}},
		{"flags", "[[mock:echo]][[mock:truncate]] [[mock:stream_error]]", directives{echo: true, truncate: true, streamError: true}},
		{"unknown and malformed", "[[mock:nope]] [[mock:]] [[mock:Status=500]] [[mock:status=500]", directives{}},
		{"last wins", "[[mock:status=500]] [[mock:status=429]]", directives{status: 429}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := parseDirectives(tc.text); got != tc.want {
				t.Errorf("parseDirectives(%q) = %+v, want %+v", tc.text, got, tc.want)
			}
		})
	}
}

// The regular expression the mock's directives used to be read with; the
// scanner must agree with it on every text without braces.
var directiveRE = regexp.MustCompile(`\[\[mock:([a-z_]+)(?:=([^\]]*))?\]\]`)

func FuzzScanDirectives(f *testing.F) {
	for _, s := range []string{
		"hello", "[[mock:status=429]] x", "[[mock:echo]][[mock:truncate]]", `[[mock:tool=t args={"a":["]]"]}]]`,
		"[[mock:[[mock:echo]]", "[[mock:status=5]0]]", `[[mock:tool=t args={"a":`, "[[mock:x=]]]", "[[[mock:a]]]",
		`[[mock:tool=t args="x y" repeat=3 until=guard fix={"a":[1]}]]`, `[[mock:tool=t fix="unclosed until=stop]]`,
		`[[mock:tool=t args={"input":"a]b"} repeat=-1 until=]]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		spans := scanDirectives(text)
		last := 0
		for _, sp := range spans {
			if sp.start < last || sp.end > len(text) || sp.start >= sp.end {
				t.Fatalf("span %+v out of order in %q", sp, text)
			}
			if !strings.HasPrefix(text[sp.start:], directivePrefix) || !strings.HasSuffix(text[:sp.end], "]]") {
				t.Fatalf("span %+v is not a directive in %q", sp, text)
			}
			last = sp.end
		}
		_, rest := parseDirectives(text)
		if strings.ContainsAny(text, "{") {
			return
		}
		want := directiveRE.FindAllStringSubmatchIndex(text, -1)
		if len(want) != len(spans) {
			t.Fatalf("%q: %d directives, the regexp finds %d", text, len(spans), len(want))
		}
		for i, m := range want {
			sp := spans[i]
			value := ""
			if m[4] >= 0 {
				value = text[m[4]:m[5]]
			}
			if sp.start != m[0] || sp.end != m[1] || sp.name != text[m[2]:m[3]] || sp.value != value {
				t.Fatalf("%q: span %+v, the regexp finds %v", text, sp, m)
			}
		}
		if want := directiveRE.ReplaceAllString(text, ""); rest != want {
			t.Fatalf("%q without its directives is %q, the regexp gives %q", text, rest, want)
		}
	})
}

func TestSplitBytes(t *testing.T) {
	for _, s := range []string{"", "{}", `{"path":"a.go"}`, `{"é":"ééééééééé"}`} {
		pieces := splitBytes(s, 4)
		if strings.Join(pieces, "") != s {
			t.Errorf("splitBytes(%q) = %q loses bytes", s, pieces)
		}
		for _, p := range pieces {
			if !json.Valid([]byte(`"`+strings.ReplaceAll(p, `"`, `\"`)+`"`)) || strings.ToValidUTF8(p, "?") != p {
				t.Errorf("splitBytes(%q): piece %q cuts a character", s, p)
			}
		}
	}
}

// TestMockEveryAPI covers what the three APIs share: a delay that ends
// with the request, determinism, and how unknown paths are answered.
func TestMockEveryAPI(t *testing.T) {
	bodies := map[string]func(user string) string{
		"/chat/completions": func(u string) string {
			return `{"model":"m","messages":[{"role":"user","content":` + strconvQuote(u) + `}]}`
		},
		"/responses": func(u string) string { return `{"model":"m","input":` + strconvQuote(u) + `}` },
		"/messages": func(u string) string {
			return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":` + strconvQuote(u) + `}]}`
		},
	}
	for path, body := range bodies {
		t.Run(path+" delay ends with the request", func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://provider"+path, strings.NewReader(body("[[mock:delay=1h]] x")))
			done := make(chan error, 1)
			go func() {
				_, err := New().RoundTrip(req)
				done <- err
			}()
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("delay did not end on cancellation")
			}
		})
		t.Run(path+" deterministic", func(t *testing.T) {
			_, a := post(t, path, body("same question"))
			_, b := post(t, path, body("same question"))
			_, c := post(t, path, body("other question"))
			if a != b || a == c {
				t.Fatalf("answers:\n%s\n%s\n%s", a, b, c)
			}
		})
		t.Run(path+" short delay", func(t *testing.T) {
			res, out := post(t, path, body("[[mock:delay=1ms]] hi"))
			if res.StatusCode != 200 || !strings.Contains(out, "Mock answer to: hi") {
				t.Fatalf("%d %s", res.StatusCode, out)
			}
		})
	}

	tests := []struct {
		name, method, path, want string
		status                   int
	}{
		{"openai path", http.MethodPost, "/audio/speech", `"type":"invalid_request_error"`, 404},
		{"responses by id", http.MethodGet, "/responses/resp_1", `"type":"invalid_request_error"`, 404},
		{"messages subpath", http.MethodPost, "/messages/count_tokens", `{"type":"error","error":{"type":"not_found_error","message":"Not Found"}`, 404},
		{"messages get", http.MethodGet, "/messages", `"not_found_error"`, 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := do(t, New(), tc.method, tc.path, "{}")
			if res.StatusCode != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("%s %s: %s", tc.method, tc.path, body)
			}
		})
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func chat(content string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"model": "mock-gpt", "stream": stream,
		"messages": []map[string]any{{"role": "system", "content": "SYSTEM TEXT"}, {"role": "user", "content": content}},
	})
	return string(b)
}

func TestMockDirectives(t *testing.T) {
	tests := []struct {
		name, content string
		stream        bool
		status        int
		has, hasNot   []string
	}{
		{"plain answer", "hello there", false, 200, []string{`"object":"chat.completion"`, `"finish_reason":"stop"`, `Mock answer to: hello there`, `"usage"`}, nil},
		{"429", "[[mock:status=429]] hi", false, 429, []string{`"code":"rate_limit_exceeded"`, "Rate limit reached for mock-gpt"}, nil},
		{"500", "[[mock:status=500]] hi", false, 500, []string{`"type":"server_error"`}, nil},
		{"tool call", "[[mock:tool=get_weather]] hi", false, 200, []string{`"tool_calls"`, `"name":"get_weather"`, `"finish_reason":"tool_calls"`}, nil},
		{"echo", "[[mock:echo]] hi", false, 200, []string{`"content":"SYSTEM TEXT"`}, nil},
		{"stream", "hello world one two three", true, 200, []string{"chat.completion.chunk", `"finish_reason":"stop"`, "data: [DONE]\n\n"}, nil},
		{"stream tool", "[[mock:tool=ls]] x", true, 200, []string{`"name":"ls"`, `"index":0`, "data: [DONE]"}, nil},
		{"truncate", "[[mock:truncate]] x", true, 200, []string{"chat.completion.chunk"}, []string{"[DONE]"}},
		{"stream error", "[[mock:stream_error]] x", true, 200, []string{`"error"`, "server_error"}, []string{"[DONE]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := do(t, New(), http.MethodPost, "/chat/completions", chat(tc.content, tc.stream))
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			for _, s := range tc.has {
				if !strings.Contains(body, s) {
					t.Errorf("missing %q in %s", s, body)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(body, s) {
					t.Errorf("unexpected %q in %s", s, body)
				}
			}
			if tc.stream && !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
				t.Errorf("content type %q", res.Header.Get("Content-Type"))
			}
		})
	}
}

// The same request at the same time gets the same answer, byte for byte;
// at another time, the same words with other ids, as from a provider: an
// agent run twice with one prompt makes two runs.
func TestMockIsDeterministic(t *testing.T) {
	at := func(sec int64) *Transport { return &Transport{Now: func() time.Time { return time.Unix(sec, 0) }} }
	req := chat("[[mock:tool=run_shell]] same question", false)
	_, a := do(t, at(1700000000), http.MethodPost, "/chat/completions", req)
	_, b := do(t, at(1700000000), http.MethodPost, "/chat/completions", req)
	if a != b {
		t.Fatalf("same request, same time, different answers:\n%s\n%s", a, b)
	}
	_, c := do(t, at(1700000001), http.MethodPost, "/chat/completions", req)
	ids := func(s string) []string {
		return []string{gjson.Get(s, "id").String(), gjson.Get(s, "choices.0.message.tool_calls.0.id").String()}
	}
	if ia, ic := ids(a), ids(c); ia[0] == ic[0] || ia[1] == ic[1] || ia[1] == "" {
		t.Fatalf("the same request a second later has ids %v, as before: %v", ic, ia)
	}
	words := func(s string) string { return gjson.Get(s, "choices.0.message.tool_calls.0.function").Raw }
	if words(a) != words(c) {
		t.Fatalf("the same request a second later got another call: %s, then %s", words(a), words(c))
	}
}

func TestMockToolOnlyWhileUserIsLast(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"[[mock:tool=run]] go"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"run","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`
	_, out := do(t, New(), http.MethodPost, "/chat/completions", body)
	if strings.Contains(out, "tool_calls") || !strings.Contains(out, `"finish_reason":"stop"`) {
		t.Fatalf("after a tool result the mock must finish: %s", out)
	}
}

func TestMockModelsAndUnknownPath(t *testing.T) {
	res, body := do(t, New(), http.MethodGet, "/models", "")
	if res.StatusCode != 200 || !strings.Contains(body, `"id":"mock-gpt"`) {
		t.Fatalf("models %d %s", res.StatusCode, body)
	}
	res, body = do(t, New(), http.MethodPost, "/audio/speech", "{}")
	if res.StatusCode != 404 || !strings.Contains(body, `"error"`) {
		t.Fatalf("unknown path %d %s", res.StatusCode, body)
	}
	res, body = do(t, New(), http.MethodPost, "/chat/completions", "{not json")
	if res.StatusCode != 400 || !strings.Contains(body, "invalid_request_error") {
		t.Fatalf("bad json %d %s", res.StatusCode, body)
	}
}
