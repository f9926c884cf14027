package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/chat"
	"github.com/scarproxy/scarproxy/proxy/gemini"
	"github.com/scarproxy/scarproxy/proxy/messages"
	"github.com/scarproxy/scarproxy/proxy/responses"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
)

// TestMain lets the test binary play the child roles scarbench re-executes
// itself for (the end-to-end tests start it as the upstream and bare proxy).
func TestMain(m *testing.M) {
	if os.Getenv(envRole) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, nil, os.Getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestConversationIsARealisticAgentTurn(t *testing.T) {
	sols := seedSolutions(200, time.Now())
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			cv := newConversation(3, stream, sols, 0, prefix{})
			body := cv.requestBody(nil, 3, 41, false)
			if !json.Valid(body) {
				t.Fatalf("body is not valid JSON: %.200s", body)
			}
			if n := len(body); n < 18<<10 || n > 24<<10 {
				t.Errorf("body is %d bytes, want about 20 KB", n)
			}
			if got := gjson.GetBytes(body, "stream").Bool(); got != stream {
				t.Errorf("stream = %v, want %v", got, stream)
			}
			msgs := gjson.GetBytes(body, "messages").Array()
			if len(msgs) < 20 || msgs[0].Get("role").Str != "system" || msgs[1].Get("role").Str != "user" {
				t.Fatalf("want a system prompt, the task and 10+ turns; got %d messages", len(msgs))
			}
			if goal := msgs[1].Get("content").Str; goal != cv.goal {
				t.Errorf("first user message %q, want the goal %q", goal, cv.goal)
			}
			failed, ok := 0, 0
			for _, m := range msgs {
				if m.Get("role").Str != "tool" {
					continue
				}
				if guard.ToolFailed(m.Get("content").Str) {
					failed++
				} else {
					ok++
				}
			}
			if failed < 3 || ok < 3 {
				t.Errorf("tool results: %d failed, %d succeeded; want a mix with at least 3 of each", failed, ok)
			}
			last := msgs[len(msgs)-1]
			if id := last.Get("tool_call_id").Str; id != "call_new_c3s41" {
				t.Errorf("newest tool_call_id = %q, want call_new_c3s41", id)
			}
			if call := msgs[len(msgs)-2].Get("tool_calls.0.id").Str; call != "call_new_c3s41" {
				t.Errorf("newest tool call id = %q, want call_new_c3s41", call)
			}
			if guard.ToolFailed(last.Get("content").Str) {
				t.Errorf("newest tool result %q reads as failed; want success", last.Get("content").Str)
			}
			// A test run's timings change: the next request's output, and
			// another client's, are new bytes, which still read as success.
			newest := func(client, seq int) string {
				m := gjson.GetBytes(cv.requestBody(nil, client, seq, false), "messages").Array()
				return m[len(m)-1].Get("content").Str
			}
			if a, b, c := newest(3, 41), newest(3, 43), newest(4, 41); a == b || a == c || b == c || guard.ToolFailed(b) || guard.ToolFailed(c) {
				t.Errorf("newest outputs %q, %q, %q: want three successes, each its own", a, b, c)
			}
			failedBody := cv.requestBody(nil, 3, 42, true)
			fl := gjson.GetBytes(failedBody, "messages").Array()
			if c := fl[len(fl)-1].Get("content").Str; !guard.ToolFailed(c) {
				t.Errorf("failed newest tool result %q does not read as failed", c)
			}
		})
	}
}

func TestConversationGoalsAreRecalled(t *testing.T) {
	sols := seedSolutions(10_000, time.Now())
	ix := recall.NewIndex()
	for i, s := range sols {
		s.ID = fmt.Sprint(i)
		ix.Put(s)
	}
	for c := range 32 {
		cv := newConversation(c, false, sols, 0, prefix{})
		m := ix.Search(recall.Query{Workspace: benchWorkspace, Goal: cv.goal, K: 1, MinSimilarity: recall.DefaultMinSimilarity})
		if len(m) == 0 {
			t.Errorf("client %d: goal %q recalls nothing", c, cv.goal)
		}
	}
}

// TestSystemPadsEveryAPI: -system makes the system prompt of every API's
// request about the size asked, read as the system text.
func TestSystemPadsEveryAPI(t *testing.T) {
	system := systemOf(30 << 10)
	if n := len(system); n < 30<<10 || n > 31<<10 || !strings.HasPrefix(system, systemPrompt) {
		t.Fatalf("system prompt of %d bytes", n)
	}
	for _, name := range apiNames {
		a := apiByName(name)
		body := a.newConv(0, false, nil, 0, prefix{system: system}).requestBody(nil, 0, 1, false)
		req, err := formats[name]().Read(body, routeOf(a, false))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(req.Info().System, system) {
			t.Errorf("%s: the system text read is %d bytes, want the %d of -system", name, len(req.Info().System), len(system))
		}
	}
}

// TestAgentPrefix: with the agent prefix, every API's requests (the
// first of a run and the later ones) carry the system prompt and the
// tools of its agent's capture byte for byte, read by scarproxy's reader
// as the system text, the task after them; growing such a conversation
// keeps it JSON.
func TestAgentPrefix(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	sols := seedSolutions(200, time.Now())
	for _, name := range apiNames {
		t.Run(name, func(t *testing.T) {
			pre, err := prefixOf("agent", name, 0, wd)
			if err != nil {
				t.Fatal(err)
			}
			a := apiByName(name)
			own := a.newConv(5, false, sols, 0, prefix{})
			cv := a.newConv(5, false, sols, 0, pre)
			if err := cv.markRound(); err != nil {
				t.Fatal(err)
			}
			body := cv.requestBody(nil, 5, 1, false)
			grown := cv.grownBody(nil, 5, 3, 4, func(int) bool { return false })
			for _, b := range [][]byte{cv.first, body, grown} {
				if !json.Valid(b) {
					t.Fatalf("not JSON: %.200s", b)
				}
				if !bytes.Contains(b, pre.agent.tools) {
					t.Errorf("the capture's %d bytes of tools are not in the request", len(pre.agent.tools))
				}
				if !bytes.Contains(b, []byte(cv.goal)) {
					t.Errorf("the task is not in the request")
				}
			}
			if name == "responses" {
				// The developer items, one after the other.
				sys := pre.agent.system[1 : len(pre.agent.system)-1]
				if !bytes.Contains(body, sys) {
					t.Errorf("the capture's developer items are not in the request")
				}
				checkClientMetadata(t, cv, pre.agent.metadata)
			} else if !bytes.Contains(body, pre.agent.system) {
				t.Errorf("the capture's %d bytes of system prompt are not in the request", len(pre.agent.system))
			}
			if len(body) < len(own.requestBody(nil, 5, 1, false))+10<<10 {
				t.Errorf("the request is %d bytes, not much more than scarbench's own prompt's", len(body))
			}
			req, err := formats[name]().Read(body, routeOf(a, false))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(req.Info().System); n < 5<<10 {
				t.Errorf("the system text read is %d bytes", n)
			}
		})
	}
	if _, err := prefixOf("agent", "chat", 0, t.TempDir()); err == nil || !strings.Contains(err.Error(), "-prefix synthetic") {
		t.Errorf("outside the module: %v, want the error to name -prefix synthetic", err)
	}
}

// checkClientMetadata: every request of a Codex CLI conversation, the
// first and grown ones too, sends the capture's client_metadata members,
// each once, in an order that changes from request to request.
func checkClientMetadata(t *testing.T, cv conversation, members [][]byte) {
	t.Helper()
	if len(members) < 5 {
		t.Fatalf("%d client_metadata members read from the capture", len(members))
	}
	orders := map[string]bool{}
	for seq := range 8 {
		for _, b := range [][]byte{cv.first, cv.requestBody(nil, 5, seq, false), cv.grownBody(nil, 5, seq, 4, func(int) bool { return false })} {
			raw := gjson.GetBytes(b, "client_metadata")
			var keys []string
			raw.ForEach(func(k, v gjson.Result) bool {
				keys = append(keys, k.String())
				if !slices.ContainsFunc(members, func(m []byte) bool { return string(m) == k.Raw+":"+v.Raw }) {
					t.Errorf("member %s:%.40s is not the capture's", k.Raw, v.Raw)
				}
				return true
			})
			if len(keys) != len(members) {
				t.Fatalf("client_metadata has %d members, want %d: %.200s", len(keys), len(members), raw.Raw)
			}
			orders[strings.Join(keys, ",")] = true
		}
	}
	if len(orders) < 4 {
		t.Errorf("%d orders of client_metadata over 17 requests, want them to change", len(orders))
	}
}

// TestOneTaskSharesTheHead: with -one-task the clients' requests, in
// every API, are the same bytes up to and past the task (the head that
// names a conversation), then differ (each client is its own run);
// without it, they differ at the task.
func TestOneTaskSharesTheHead(t *testing.T) {
	sols := seedSolutions(200, time.Now())
	for _, name := range []string{"chat", "responses", "messages", "gemini"} {
		a := apiByName(name)
		for _, oneTask := range []bool{true, false} {
			convs := clientConversations(a, 2, false, sols, 0, oneTask, prefix{})
			b0, b1 := convs[0].requestBody(nil, 0, 1, false), convs[1].requestBody(nil, 1, 1, false)
			n := 0
			for n < min(len(b0), len(b1)) && b0[n] == b1[n] {
				n++
			}
			task := bytes.Index(b0, []byte(convs[0].goal))
			if task < 0 {
				t.Fatalf("%s: the goal is not in the body", name)
			}
			if shared := n > task+len(convs[0].goal); shared != oneTask || bytes.Equal(b0, b1) {
				t.Errorf("%s, one task %v: the bodies share %d bytes, the task ends at %d", name, oneTask, n, task+len(convs[0].goal))
			}
		}
	}
}

func TestSeedSolutionsAreDistinct(t *testing.T) {
	sols := seedSolutions(5000, time.Now())
	keys := map[string]bool{}
	for _, s := range sols {
		if keys[s.Key] {
			t.Fatalf("key %s used twice", s.Key)
		}
		keys[s.Key] = true
		if s.Key != recall.GoalKey(s.Goal) || s.Workspace != benchWorkspace {
			t.Fatalf("solution %+v: key or workspace wrong", s)
		}
	}
}

func TestSeedIncidentsRepeatInsideTheGuardWindow(t *testing.T) {
	now := time.Now()
	g, err := guard.New(guard.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	var newest []store.Incident
	for i := range 1000 {
		inc := seedIncident(i, n, now, incidentSpan)
		if now.Sub(inc.Time) > guard.DefaultWindow {
			t.Fatalf("incident %d is %s old; the newest 1000 must be inside the guard window", i, now.Sub(inc.Time))
		}
		newest = append(newest, inc)
	}
	if got := seedIncident(n-1, n, now, incidentSpan); now.Sub(got.Time) < 23*time.Hour {
		t.Errorf("oldest incident is %s old, want about %s", now.Sub(got.Time), incidentSpan)
	}
	if entries := g.Detect(newest, now); len(entries) < 3 {
		t.Errorf("guard found %d repeated patterns in the newest incidents, want at least 3", len(entries))
	}
}

// formats are scarproxy's readers of the four APIs: the tests check that
// the workloads and the fake's answers read as the agents' and the
// providers' do (scarbench itself never imports the proxy).
var formats = map[string]func() wire.Format{
	"chat":      func() wire.Format { return chat.New() },
	"responses": func() wire.Format { return responses.New() },
	"messages":  func() wire.Format { return messages.New() },
	"gemini":    func() wire.Format { return gemini.New() },
}

// routeOf is the route scarproxy reads a request of a with: its path below
// the provider's root, without the query (the Gemini API's path whole, the
// others' below /v1).
func routeOf(a *api, stream bool) wire.Route {
	path, _, _ := strings.Cut(a.pathOf(stream), "?")
	if a.name != "gemini" {
		path = strings.TrimPrefix(path, "/v1")
	}
	return wire.Route{Tenant: "default\x00default", Path: path}
}

// TestRequestsOfEveryAPI checks the Responses, Messages and Gemini
// requests item by item, and all four as scarproxy reads them: the same
// task, fifteen tool calls and results, the newest with the request's id.
func TestRequestsOfEveryAPI(t *testing.T) {
	sols := seedSolutions(200, time.Now())
	for _, name := range apiNames {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", name, stream), func(t *testing.T) {
				a := apiByName(name)
				cv := a.newConv(3, stream, sols, 0, prefix{})
				for _, failed := range []bool{false, true} {
					body := cv.requestBody(nil, 3, 41, failed)
					if !json.Valid(body) {
						t.Fatalf("body is not valid JSON: %.300s", body)
					}
					if n := len(body); n < 18<<10 || n > 24<<10 {
						t.Errorf("body is %d bytes, want about 20 KB", n)
					}
					if name == "gemini" {
						// Streaming is the path's: the body has no such field.
						if gjson.GetBytes(body, "stream").Exists() {
							t.Error("a Gemini request names stream in its body")
						}
					} else if got := gjson.GetBytes(body, "stream").Bool(); got != stream {
						t.Errorf("stream = %v, want %v", got, stream)
					}
					newest := checkShape(t, name, body, cv.goal)
					if got := guard.ToolFailed(newest); got != failed {
						t.Errorf("newest tool result %q reads as failed = %v, want %v", newest, got, failed)
					}
					if name == "messages" {
						msgs := gjson.GetBytes(body, "messages").Array()
						last := msgs[len(msgs)-1].Get("content.0")
						if last.Get("is_error").Type != map[bool]gjson.Type{false: gjson.False, true: gjson.True}[failed] {
							t.Errorf("newest tool_result is_error = %s, want %v", last.Get("is_error").Raw, failed)
						}
					}

					req, err := formats[name]().Read(body, routeOf(a, stream))
					if err != nil {
						t.Fatalf("scarproxy's %s reader: %v", name, err)
					}
					in := req.Info()
					if in.Goal != cv.goal || in.Stream != stream || in.ToolCount != 15 || len(in.Tools) != 15 || len(in.ToolResults) != 15 {
						t.Errorf("read as goal %q, stream %v, %d tool results, %d calls (%d results to judge); want goal %q, 15, 15, 15",
							in.Goal, in.Stream, in.ToolCount, len(in.Tools), len(in.ToolResults), cv.goal)
					}
					if strings.TrimSpace(in.System) == "" {
						t.Error("read no system text")
					}
					failures := 0
					for _, tr := range in.ToolResults {
						if tr.IsError || guard.ToolFailed(tr.Text()) {
							failures++
						}
					}
					want := 0
					for _, tr := range toolTurns {
						if guard.ToolFailed(tr.result) {
							want++
						}
					}
					if failed {
						want++
					}
					if want < 4 || failures != want {
						t.Errorf("read %d failed tool results, want %d", failures, want)
					}
					if nt := in.ToolResults[len(in.ToolResults)-1]; !strings.HasSuffix(nt.Key, "c3s41") {
						t.Errorf("newest tool result's key %q does not carry the request's id", nt.Key)
					}
				}
			})
		}
	}
}

// checkShape checks one request in its API's shape and returns the text of
// its newest tool result.
func checkShape(t *testing.T, api string, body []byte, goal string) string {
	t.Helper()
	count := func(items []gjson.Result, path, value string) int {
		n := 0
		for _, it := range items {
			if it.Get(path).Str == value {
				n++
			}
		}
		return n
	}
	switch api {
	case "chat":
		msgs := gjson.GetBytes(body, "messages").Array()
		if len(msgs) != 33 || count(msgs, "role", "tool") != 15 {
			t.Errorf("%d messages, %d tool results; want 33 and 15", len(msgs), count(msgs, "role", "tool"))
		}
		return msgs[len(msgs)-1].Get("content").Str
	case "responses":
		if gjson.GetBytes(body, "instructions").Exists() || gjson.GetBytes(body, "store").Bool() {
			t.Error("want no instructions (the system prompt is a developer message) and store false")
		}
		items := gjson.GetBytes(body, "input").Array()
		// The system prompt, the task, the user's interjection, fifteen
		// rounds of the assistant's text, a function call and its output.
		if len(items) != 48 || count(items, "type", "function_call") != 15 || count(items, "type", "function_call_output") != 15 ||
			count(items, "role", "user") != 2 || count(items, "role", "assistant") != 15 || count(items, "role", "developer") != 1 {
			t.Errorf("%d input items: %d calls, %d outputs, %d user, %d assistant, %d developer messages; want 48, 15, 15, 2, 15, 1", len(items),
				count(items, "type", "function_call"), count(items, "type", "function_call_output"), count(items, "role", "user"), count(items, "role", "assistant"), count(items, "role", "developer"))
		}
		if items[0].Get("content.0.text").Str != systemPrompt || items[1].Get("content.0.text").Str != goal {
			t.Errorf("first input items %s, %.80s; want the system prompt, then the task", items[0].Raw, items[1].Raw)
		}
		call, out := items[len(items)-2], items[len(items)-1]
		if call.Get("call_id").Str != "call_new_c3s41" || out.Get("call_id").Str != "call_new_c3s41" {
			t.Errorf("newest call_id %q and output call_id %q, want call_new_c3s41", call.Get("call_id").Str, out.Get("call_id").Str)
		}
		if n := len(gjson.GetBytes(body, "tools").Array()); n != len(benchTools) || gjson.GetBytes(body, "tools.0.parameters").Type != gjson.JSON {
			t.Errorf("%d tools, want %d with parameters", n, len(benchTools))
		}
		return out.Get("output").Str
	case "messages":
		sys := gjson.GetBytes(body, "system").Array()
		if len(sys) != 3 || sys[0].Get("cache_control").Exists() || !sys[2].Get("cache_control").Exists() || sys[2].Get("text").Str != systemPrompt {
			t.Errorf("system %.200s: want three text blocks, the system prompt last with cache_control", gjson.GetBytes(body, "system").Raw)
		}
		msgs := gjson.GetBytes(body, "messages").Array()
		var uses, results, texts int
		for _, m := range msgs {
			for _, b := range m.Get("content").Array() {
				switch b.Get("type").Str {
				case "tool_use":
					uses++
				case "tool_result":
					results++
				case "text":
					texts++
				}
			}
		}
		// The task, then fifteen rounds of an assistant message (text and
		// tool_use) and a user message (tool_result; one with the user's
		// interjection after it).
		if len(msgs) != 31 || uses != 15 || results != 15 || texts != 17 || count(msgs, "role", "user") != 16 {
			t.Errorf("%d messages, %d user; %d tool_use, %d tool_result, %d text blocks; want 31, 16, 15, 15, 17",
				len(msgs), count(msgs, "role", "user"), uses, results, texts)
		}
		if msgs[0].Get("content.0.text").Str != goal {
			t.Errorf("first message %s, want the task", msgs[0].Raw)
		}
		use, res := msgs[len(msgs)-2].Get("content.1"), msgs[len(msgs)-1].Get("content.0")
		if use.Get("id").Str != "toolu_new_c3s41" || res.Get("tool_use_id").Str != "toolu_new_c3s41" || !res.Get("cache_control").Exists() {
			t.Errorf("newest tool_use %s and tool_result %.120s: want id toolu_new_c3s41 in both, cache_control on the result", use.Raw, res.Raw)
		}
		if use.Get("input").Type != gjson.JSON {
			t.Errorf("tool_use input %s is not an object", use.Get("input").Raw)
		}
		if n := len(gjson.GetBytes(body, "tools").Array()); n != len(benchTools) || gjson.GetBytes(body, "tools.0.input_schema").Type != gjson.JSON {
			t.Errorf("%d tools, want %d with input_schema", n, len(benchTools))
		}
		return res.Get("content").Str
	case "gemini":
		sys := gjson.GetBytes(body, "systemInstruction.parts").Array()
		if len(sys) != 1 || sys[0].Get("text").Str != systemPrompt {
			t.Errorf("systemInstruction %.200s: want the system prompt as its one part", gjson.GetBytes(body, "systemInstruction").Raw)
		}
		contents := gjson.GetBytes(body, "contents").Array()
		var calls, responses, errors int
		ids := map[string]bool{}
		for _, c := range contents {
			for _, p := range c.Get("parts").Array() {
				if fc := p.Get("functionCall"); fc.Exists() {
					calls++
					if c.Get("role").Str != "model" || fc.Get("args").Type != gjson.JSON || !p.Get("thoughtSignature").Exists() {
						t.Errorf("functionCall part %.200s: want it in a model content, with args and a thoughtSignature", p.Raw)
					}
					ids[fc.Get("id").Str] = true
				}
				if fr := p.Get("functionResponse"); fr.Exists() {
					responses++
					if c.Get("role").Str != "user" || !ids[fr.Get("id").Str] {
						t.Errorf("functionResponse %.200s: want it in a user content, with the id of a call before it", p.Raw)
					}
					if fr.Get("response.error").Exists() {
						errors++
					}
				}
			}
		}
		// The task, the user's interjection, then fifteen rounds of a
		// model content (text and functionCall) and a user content (its
		// functionResponse); the failed edit's response is an error.
		if len(contents) != 32 || calls != 15 || responses != 15 || len(ids) != 15 || errors != 1 || count(contents, "role", "user") != 17 {
			t.Errorf("%d contents, %d user; %d calls (%d ids), %d responses, %d errors; want 32, 17, 15 (15), 15, 1",
				len(contents), count(contents, "role", "user"), calls, len(ids), responses, errors)
		}
		if first := contents[0].Get("parts").Array(); len(first) != 2 || !strings.HasPrefix(first[0].Get("text").Str, "<session_context>") || first[1].Get("text").Str != goal {
			t.Errorf("first content %.200s, want the session context and the task", contents[0].Raw)
		}
		call, res := contents[len(contents)-2].Get("parts.1.functionCall"), contents[len(contents)-1].Get("parts.0.functionResponse")
		if call.Get("id").Str != "run_tests_1795737000000_c3s41" || res.Get("id").Str != call.Get("id").Str || res.Get("name").Str != "run_tests" {
			t.Errorf("newest call %s and response %.120s: want id run_tests_1795737000000_c3s41 in both", call.Raw, res.Raw)
		}
		decls := gjson.GetBytes(body, "tools.0.functionDeclarations").Array()
		if len(decls) != len(benchTools) || decls[0].Get("parametersJsonSchema").Type != gjson.JSON {
			t.Errorf("%d function declarations, want %d with parametersJsonSchema", len(decls), len(benchTools))
		}
		if !gjson.GetBytes(body, "generationConfig.thinkingConfig").Exists() {
			t.Error("want a generationConfig with a thinkingConfig")
		}
		return res.Get("response.output").Str
	}
	t.Fatalf("unknown API %q", api)
	return ""
}

// TestFakeUpstream checks the fake's answers of every API, as scarproxy's
// observer of that API reads them: a tool call or a final answer, and no
// failure.
func TestFakeUpstream(t *testing.T) {
	up := newFakeUpstream()
	srv := httptest.NewServer(up)
	defer srv.Close()
	for _, name := range apiNames {
		a := apiByName(name)
		for _, stream := range []bool{false, true} {
			for _, final := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/stream=%v/final=%v", name, stream, final), func(t *testing.T) {
					body := a.newConv(0, stream, nil, 0, prefix{}).requestBody(nil, 0, 1, false)
					req, _ := http.NewRequest(http.MethodPost, srv.URL+a.pathOf(stream), bytes.NewReader(body))
					if final {
						req.Header.Set(headerFinal, "1")
					}
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer res.Body.Close()
					b, _ := io.ReadAll(res.Body)
					wantType := map[bool]string{false: "application/json", true: "text/event-stream"}[stream]
					if res.StatusCode != 200 || res.Header.Get("Content-Type") != wantType {
						t.Fatalf("status %d, type %q", res.StatusCode, res.Header.Get("Content-Type"))
					}
					if stream {
						ended := endWatch{marker: a.end}
						ended.write(b)
						if !ended.seen {
							t.Fatalf("stream lacks %q: %s", a.end, b)
						}
						// The Gemini API ends its lines with CRLF.
						for _, ev := range strings.Split(strings.TrimSpace(strings.ReplaceAll(string(b), "\r\n", "\n")), "\n\n") {
							_, data, _ := strings.Cut(ev, "data: ")
							if data != "[DONE]" && !gjson.Valid(data) {
								t.Fatalf("event %q is not JSON", ev)
							}
						}
					} else if !json.Valid(b) {
						t.Fatalf("answer is not JSON: %s", b)
					}
					r, err := formats[name]().Read(body, routeOf(a, stream))
					if err != nil {
						t.Fatal(err)
					}
					obs := r.Observe(stream, 1<<20)
					for p := b; len(p) > 0; p = p[min(len(p), 100):] { // in pieces, as a stream arrives
						obs.Write(p[:min(len(p), 100)])
					}
					out := obs.Outcome()
					if out.Failure != "" || out.Final != final || final && out.Answer == "" {
						t.Errorf("scarproxy reads the answer as %+v; want final %v and no failure", out, final)
					}
					if name != "chat" && out.Usage.CacheRead != 4096 {
						t.Errorf("scarproxy reads the usage as %+v; want 4096 tokens read from the cache", out.Usage)
					}
				})
			}
		}
	}
}

func TestEndWatch(t *testing.T) {
	marker := []byte("event: message_stop\n")
	stream := []byte("event: content_block_stop\ndata: {}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	for _, size := range []int{1, 2, 3, 7, 19, 20, 21, 64, len(stream)} {
		t.Run(fmt.Sprintf("reads of %d", size), func(t *testing.T) {
			w := endWatch{marker: marker}
			for p := stream; len(p) > 0; p = p[min(len(p), size):] {
				w.write(p[:min(len(p), size)])
			}
			if !w.seen {
				t.Error("marker not seen")
			}
			cut := endWatch{marker: marker}
			for p := stream[:40]; len(p) > 0; p = p[min(len(p), size):] {
				cut.write(p[:min(len(p), size)])
			}
			if cut.seen {
				t.Error("marker seen in a stream cut before it")
			}
		})
	}
	none := endWatch{}
	none.write(stream)
	if none.seen {
		t.Error("a nil marker must never be seen")
	}
}

func TestFakeUpstreamHoldsStreamsUntilRelease(t *testing.T) {
	up := newFakeUpstream()
	srv := httptest.NewServer(up)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
		bytes.NewReader(newConversation(0, true, nil, 0, prefix{}).requestBody(nil, 0, 1, false)))
	req.Header.Set(headerHold, "1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Connection") != "close" && !res.Close {
		t.Error("a held stream must close its connection when done")
	}
	br := bufio.NewReader(res.Body)
	first, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "data: ") {
		t.Fatalf("first event: %q, %v", first, err)
	}
	// The stream is held: release it, then it must finish.
	rel, err := http.Post(srv.URL+"/bench/release", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rel.Body.Close()
	rest, err := io.ReadAll(br)
	if err != nil || !bytes.HasSuffix(rest, []byte("data: [DONE]\n\n")) {
		t.Fatalf("rest of the stream: %q, %v", rest, err)
	}
}

func TestBareProxyStreamsThrough(t *testing.T) {
	up := httptest.NewServer(newFakeUpstream())
	defer up.Close()
	u, _ := url.Parse(up.URL)
	bare := httptest.NewServer(newBareProxy(u))
	defer bare.Close()
	for _, name := range apiNames {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", name, stream), func(t *testing.T) {
				a := apiByName(name)
				wl := newWorkload(a, 2, stream, 0, 3, []conversation{a.newConv(0, stream, nil, 0, prefix{}), a.newConv(1, stream, nil, 0, prefix{})})
				// A closed loop bounded by a short duration: it ends by itself.
				// On a loaded machine a window may close before the first
				// answer: drive again, as warmUp does.
				tg := newTarget("bare", bare.URL, 2)
				res := drive(context.Background(), tg, wl, 200*time.Millisecond)
				for i := 0; res.Requests == 0 && res.Errors == 0 && i < 50; i++ {
					res = drive(context.Background(), tg, wl, 200*time.Millisecond)
				}
				if res.Errors != 0 || res.Requests == 0 {
					t.Fatalf("%d requests, %d errors (%s)", res.Requests, res.Errors, res.FirstError)
				}
				if l := res.Latency; !(l.P50 > 0 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) {
					t.Errorf("latency percentiles out of order: %+v", l)
				}
				if stream != (res.TTFB != nil) {
					t.Errorf("ttfb reported = %v, want %v", res.TTFB != nil, stream)
				}
				if res.Guard != -1 || res.Recall != -1 {
					t.Errorf("bare proxy answered X-Scar headers: guard %d recall %d", res.Guard, res.Recall)
				}
			})
		}
	}
}

func TestDriveCountsErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
	}))
	defer srv.Close()
	wl := newWorkload(apiByName("chat"), 1, false, 0, 0, []conversation{newConversation(0, false, nil, 0, prefix{})})
	res := drive(context.Background(), newTarget("broken", srv.URL, 1), wl, 100*time.Millisecond)
	if res.Errors == 0 || res.Requests != 0 || !strings.Contains(res.FirstError, "500") {
		t.Fatalf("requests %d, errors %d, first error %q; want only errors naming the status", res.Requests, res.Errors, res.FirstError)
	}
}

func TestNewDist(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // reversed: newDist sorts
	}
	tests := []struct {
		name string
		in   []time.Duration
		want dist
	}{
		{"empty", nil, dist{}},
		{"one", ms(7), dist{P50: 7, P90: 7, P99: 7, Max: 7}},
		{"hundred", ms(hundred...), dist{P50: 50, P90: 90, P99: 99, Max: 100}},
		{"two", ms(1, 3), dist{P50: 1, P90: 3, P99: 3, Max: 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newDist(tt.in); got != tt.want {
				t.Errorf("newDist = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSpreadOf(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		want spread
	}{
		{"empty", nil, spread{}},
		{"odd", []float64{3, 1, 2}, spread{1, 2, 3}},
		{"even", []float64{4, 1, 3, 2}, spread{1, 2.5, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := spreadOf(tt.in); got != tt.want {
				t.Errorf("spreadOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(options) bool
	}{
		{"defaults", nil, "", func(o options) bool {
			return o.conc == 1 && o.rounds == 3 && o.incidents == 100_000 && o.solutions == 10_000 && len(o.targets) == 3
		}},
		{"targets deduplicated", []string{"-targets", "scar, bare,scar"}, "", func(o options) bool {
			return strings.Join(o.targets, ",") == "scar,bare"
		}},
		{"bad target", []string{"-targets", "nginx"}, "not direct, bare or scar", nil},
		{"zero clients", []string{"-c", "0"}, "-c", nil},
		{"unbounded duration", []string{"-d", "1h"}, "-d", nil},
		{"stray argument", []string{"extra"}, "unexpected argument", nil},
		{"negative fail-every", []string{"-fail-every", "-1"}, "must not be negative", nil},
		{"api", []string{"-api", "messages"}, "", func(o options) bool { return o.api == "messages" }},
		{"default api", nil, "", func(o options) bool { return o.api == "chat" }},
		{"gemini api", []string{"-api", "gemini"}, "", func(o options) bool { return o.api == "gemini" }},
		{"unknown api", []string{"-api", "embeddings"}, "not chat, responses, messages or gemini", nil},
		{"retries", []string{"-storm", "-retries", "4"}, "", func(o options) bool { return o.storm && o.retries == 4 }},
		{"retries without a storm", []string{"-retries", "4"}, "only with -storm", nil},
		{"negative retries", []string{"-storm", "-retries", "-1"}, "-retries", nil},
		{"default start timeout", nil, "", func(o options) bool { return o.startWait == time.Minute }},
		{"start timeout", []string{"-start-timeout", "10m"}, "", func(o options) bool { return o.startWait == 10*time.Minute }},
		{"zero start timeout", []string{"-start-timeout", "0s"}, "-start-timeout", nil},
		{"grow", []string{"-grow", "7"}, "", func(o options) bool { return o.grow == 7 }},
		{"branches", []string{"-grow", "0"}, "", func(o options) bool { return o.grow == 0 }},
		{"default grow", nil, "", func(o options) bool { return o.grow == defaultGrow && defaultGrow > 1 }},
		{"default prefix", nil, "", func(o options) bool { return o.prefix == "agent" }},
		{"synthetic prefix", []string{"-prefix", "synthetic", "-system", "27"}, "", func(o options) bool { return o.prefix == "synthetic" && o.system == 27 }},
		{"unknown prefix", []string{"-prefix", "claude"}, "not agent or synthetic", nil},
		{"system without the synthetic prefix", []string{"-system", "27"}, "-prefix synthetic", nil},
		{"negative grow", []string{"-grow", "-1"}, "-grow", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(o) {
				t.Fatalf("parseFlags = %+v, %v", o, err)
			}
		})
	}
}

func TestRequestSeq(t *testing.T) {
	for _, c := range []struct{ retries, n, want int }{
		{0, 1, 1}, {0, 2, 2}, {0, 7, 7},
		{2, 1, 1}, {2, 2, 1}, {2, 3, 1}, {2, 4, 2}, {2, 6, 2}, {2, 7, 3},
		{4, 5, 1}, {4, 6, 2},
	} {
		if got := requestSeq(c.n, c.retries); got != c.want {
			t.Errorf("requestSeq(%d, %d) = %d, want %d", c.n, c.retries, got, c.want)
		}
	}
}

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": true, "[::1]:80": true, "0.0.0.0:80": false, "10.1.2.3:80": false, "localhost": false,
	} {
		if err := checkLoopback(addr); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 17\n"+
			"scarproxy_overhead_seconds_bucket{le=\"1e-05\"} 3\nscarproxy_overhead_seconds_sum 0.25\nscarproxy_overhead_seconds_count 100\n")
	}))
	defer srv.Close()
	m, err := scrape(context.Background(), srv.URL, "go_goroutines", "scarproxy_overhead_seconds_sum", "scarproxy_overhead_seconds_count")
	if err != nil {
		t.Fatal(err)
	}
	if m["go_goroutines"] != 17 || m["scarproxy_overhead_seconds_sum"] != 0.25 || m["scarproxy_overhead_seconds_count"] != 100 {
		t.Errorf("scrape = %v", m)
	}
	if _, err := scrape(context.Background(), srv.URL, "go_threads"); err == nil {
		t.Error("a missing series must be an error")
	}
}

func TestProcStatus(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	rss, err := procStatus(os.Getpid(), "VmRSS")
	if err != nil || rss < 1<<20 {
		t.Fatalf("VmRSS = %d, %v", rss, err)
	}
	if _, err := procStatus(os.Getpid(), "NoSuchField"); err == nil {
		t.Error("a missing field must be an error")
	}
}

// TestProcCPU: the CPU time read grows as the process works, and a
// process that is not there is an error.
func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	start, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := uint64(1)
	for i := 0; ; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		if i%(1<<20) != 0 {
			continue
		}
		now, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now < start {
			t.Fatalf("CPU time went back: %v after %v", now, start)
		}
		if now > start {
			break
		}
	}
	if x == 0 {
		t.Log(x) // keeps the loop's work
	}
	if _, err := procCPU(1 << 30); err == nil {
		t.Error("a process that is not there must be an error")
	}
}

// TestSummaryComparesCPU: the CPU time per request of both proxies gives
// scarproxy's added CPU and the ratio, per round; without a reading in
// every run there is none.
func TestSummaryComparesCPU(t *testing.T) {
	run := func(target string, rps, cpu float64) runResult {
		return runResult{Target: target, Requests: 100, RPS: rps, CPUUS: cpu}
	}
	o := options{targets: []string{"bare", "scar"}, rounds: 2, conc: 32}
	s := summarize([][]runResult{{run("bare", 1000, 100), run("scar", 800, 150)}, {run("bare", 1000, 110), run("scar", 800, 210)}}, o)
	if c := s.Comparison; c.AddedCPU.Min != 50 || c.AddedCPU.Max != 100 || c.RatioCPU.Min != 1.5 || s.Targets[1].CPUUS.Max != 210 {
		t.Errorf("added CPU %+v, ratio %+v, scar %+v", c.AddedCPU, c.RatioCPU, s.Targets[1].CPUUS)
	}
	var out bytes.Buffer
	printSummary(&out, s, o)
	if !strings.Contains(out.String(), "added CPU per request (c)-(b): 50.0 / 75.0 / 100.0 µs") {
		t.Errorf("summary:\n%s", out.String())
	}
	s = summarize([][]runResult{{run("bare", 1000, 100), run("scar", 800, 0)}}, o)
	if s.Comparison.AddedCPU != (spread{}) || s.Targets[1].CPUUS != (spread{}) {
		t.Errorf("a run without a CPU reading gave %+v", s.Comparison.AddedCPU)
	}
}

// TestSummaryOfARunThatAnsweredNothing: a run with no request answered in
// its window has no ratio, and the report still encodes as JSON.
func TestSummaryOfARunThatAnsweredNothing(t *testing.T) {
	o := options{targets: []string{"direct", "bare", "scar"}, rounds: 1, conc: 32}
	s := summarize([][]runResult{{{Target: "direct"}, {Target: "bare", RPS: 100, CPUUS: 90}, {Target: "scar", RPS: 0, CPUUS: 0}}}, o)
	if _, err := json.Marshal(s); err != nil {
		t.Fatalf("summary does not encode: %v", err)
	}
	if c := s.Comparison; c.RatioRPS.Median != 0 || c.BareDirect.Median != 0 {
		t.Errorf("ratios of a run that answered nothing: %+v, %+v", c.RatioRPS, c.BareDirect)
	}
}

// TestEndToEnd runs the tool as a user does, small: it builds scarproxy,
// seeds a small store, and runs one round of each target, then a soak.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds scarproxy and starts servers")
	}
	out := filepath.Join(t.TempDir(), "result.json")
	var stdout bytes.Buffer
	err := run(context.Background(), []string{"-c", "2", "-d", "300ms", "-warmup", "100ms", "-rounds", "2", "-stream",
		"-incidents", "3000", "-solutions", "300", "-out", out}, func(string) string { return "" }, &stdout, io.Discard)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rounds) != 2 || len(rep.Rounds[0]) != 3 || rep.Summary == nil || rep.Summary.Comparison == nil {
		t.Fatalf("report: %d rounds, summary %+v\n%s", len(rep.Rounds), rep.Summary, stdout.String())
	}
	for _, runs := range rep.Rounds {
		for _, r := range runs {
			if r.Requests == 0 || r.Errors != 0 || r.TTFB == nil {
				t.Errorf("%s: %d requests, %d errors (%s)", r.Target, r.Requests, r.Errors, r.FirstError)
			}
			if r.Target == "scar" && (r.Guard < 1 || r.Recall < 1 || r.OverheadUS <= 0) {
				t.Errorf("scarproxy ran without memory: guard %d, recall %d, overhead %.1f µs", r.Guard, r.Recall, r.OverheadUS)
			}
		}
	}
	for _, want := range []string{"throughput (c)/(b)", "added p50", "added ttfb p50", "target stream time to first byte"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}

	// The Responses, Messages and Gemini workloads: scarproxy reads them
	// (guard and recall blocks on every answer) and counts their new
	// failures. The Gemini API's streams go to another path than its JSON
	// answers, and through a provider of type gemini.
	for _, tc := range []struct {
		api  string
		args []string
	}{
		{"responses", []string{"-stream"}},
		{"messages", []string{"-final-every", "3"}},
		{"gemini", []string{"-final-every", "3"}},
		{"gemini", []string{"-stream"}},
	} {
		stdout.Reset()
		args := append([]string{"-api", tc.api, "-c", "2", "-d", "300ms", "-warmup", "100ms", "-rounds", "1", "-fail-every", "4",
			"-incidents", "3000", "-solutions", "300", "-out", out}, tc.args...)
		if err := run(context.Background(), args, func(string) string { return "" }, &stdout, io.Discard); err != nil {
			t.Fatalf("%s: %v\n%s", tc.api, err, stdout.String())
		}
		b, _ := os.ReadFile(out)
		rep = report{}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Rounds) != 1 || len(rep.Rounds[0]) != 3 || rep.Options["api"] != tc.api {
			t.Fatalf("%s: report of %d rounds, options %v", tc.api, len(rep.Rounds), rep.Options)
		}
		for _, r := range rep.Rounds[0] {
			if r.Requests == 0 || r.Errors != 0 {
				t.Errorf("%s: %s: %d requests, %d errors (%s)", tc.api, r.Target, r.Requests, r.Errors, r.FirstError)
			}
			if r.Target == "scar" && (r.Guard < 1 || r.Recall < 1) {
				t.Errorf("%s: scarproxy injected no blocks: guard %d, recall %d", tc.api, r.Guard, r.Recall)
			}
		}
		if path := apiByName(tc.api).pathOf(slices.Contains(tc.args, "-stream")); !strings.Contains(stdout.String(), tc.api+" API (POST "+path+")") {
			t.Errorf("%s: output does not name the API and its path %s:\n%s", tc.api, path, stdout.String())
		}
	}

	// The storm: every answer a 429, every one of them stored (bbolt, and
	// PostgreSQL when the tests have one).
	stores := []string{""}
	if dsn := os.Getenv("SCARPROXY_TEST_POSTGRES_DSN"); dsn != "" {
		stores = append(stores, freshPostgres(t, dsn))
	}
	// On bbolt, a storm of retries too: each 429 is an incident, however
	// often the same request was sent.
	for i, pg := range append(stores, "") {
		stdout.Reset()
		args := []string{"-storm", "-c", "4", "-d", "300ms", "-warmup", "100ms", "-rounds", "1",
			"-incidents", "3000", "-solutions", "300", "-out", out}
		if pg != "" {
			args = append(args, "-postgres", pg)
		}
		if i == len(stores) {
			args = append(args, "-retries", "2")
		}
		if err := run(context.Background(), args, func(string) string { return "" }, &stdout, io.Discard); err != nil {
			t.Fatalf("storm (postgres %v): %v\n%s", pg != "", err, stdout.String())
		}
		b, _ := os.ReadFile(out)
		rep = report{}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		c := rep.Storm
		if c == nil || c.Answered == 0 || c.Stored != c.Answered || c.Missing != 0 {
			t.Fatalf("storm (postgres %v): count check %+v\n%s", pg != "", c, stdout.String())
		}
		for _, r := range rep.Rounds[0] {
			if r.Requests == 0 || r.Errors != 0 {
				t.Errorf("storm: %s: %d requests, %d errors (%s)", r.Target, r.Requests, r.Errors, r.FirstError)
			}
		}
	}

	stdout.Reset()
	err = run(context.Background(), []string{"-soak", "50", "-incidents", "3000", "-solutions", "300", "-out", out},
		func(string) string { return "" }, &stdout, io.Discard)
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, stdout.String())
	}
	b, _ = os.ReadFile(out)
	rep = report{}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Soak) != 2 {
		t.Fatalf("soak results: %d, want scar and bare", len(rep.Soak))
	}
	s := rep.Soak[0]
	if s.Target != "scar" || s.Opened != 50 || s.Completed != 50 || s.Errors != 0 || s.RSSOpenMB <= 0 || s.GoroutinesOpen <= s.GoroutinesBefore {
		t.Errorf("scar soak: %+v", s)
	}
	if s.LeftBehind > 0 {
		t.Errorf("scarproxy kept %d goroutines after the streams closed", s.LeftBehind)
	}
}

// strictBody fails any read once its data is exhausted, as a request body
// the server already closed does.
type strictBody struct {
	data   []byte
	closed bool
}

func (b *strictBody) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, http.ErrBodyReadAfterClose
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *strictBody) Close() error { b.closed = true; return nil }

func TestLengthBodyNeverReadsPastItsLength(t *testing.T) {
	for _, bufSize := range []int{1, 7, 64, 4096} {
		t.Run(fmt.Sprintf("buf=%d", bufSize), func(t *testing.T) {
			inner := &strictBody{data: []byte("0123456789abcdef")}
			lb := &lengthBody{rc: inner, left: 16}
			var got []byte
			buf := make([]byte, bufSize)
			for {
				n, err := lb.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
			}
			// The transport's check for extra bytes: one more read.
			if n, err := lb.Read(buf); n != 0 || err != io.EOF {
				t.Fatalf("read past the length = %d, %v; want 0, EOF", n, err)
			}
			if string(got) != "0123456789abcdef" {
				t.Errorf("read %q", got)
			}
			if lb.Close() != nil || !inner.closed {
				t.Error("Close must close the inner body")
			}
		})
	}
}

// freshPostgres creates an empty schema in the test database, dropped
// when t ends, and returns dsn with its search_path set to it.
func freshPostgres(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("scarbench_%d", time.Now().UnixNano())
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
			c.Close(ctx)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestNumberedFinalAnswers(t *testing.T) {
	for _, tc := range []struct{ in, turn, want string }{
		{`{"text":"It works. Tests pass."}`, "7", `{"text":"It works. Tests pass (turn 7)."}`},
		{`{"text":"It works. Tests pass."}`, "1", `{"text":"It works. Tests pass (turn 1)."}`},
		{`{"text":"It works. Tests pass."}`, "x", `{"text":"It works. Tests pass."}`},
		{`{"text":"no mark"}`, "3", `{"text":"no mark"}`},
	} {
		if got := string(numbered([]byte(tc.in), finalMark, tc.turn)); got != tc.want {
			t.Errorf("numbered(%s, %s) = %s, want %s", tc.in, tc.turn, got, tc.want)
		}
	}
	// Every API's final answer, JSON and streamed, carries the mark.
	for _, a := range []*answers{&chatAnswers, &responsesAnswers, &messagesAnswers, &geminiAnswers} {
		if !bytes.Contains(a.jsonFinal, finalMark) || !bytes.Contains(bytes.Join(a.eventsFinal, nil), streamMark) {
			t.Errorf("a final answer lacks its mark")
		}
	}
}

// TestHistoryPadsEveryAPI: -history makes every API's request about the
// size asked, with its rounds of history read as tool calls that
// succeeded before the fifteen rounds of the turn.
func TestHistoryPadsEveryAPI(t *testing.T) {
	for _, name := range apiNames {
		t.Run(name, func(t *testing.T) {
			a := apiByName(name)
			const size = 1 << 20
			pad := historyPad(a, size, nil, prefix{})
			cv := a.newConv(2, false, nil, pad, prefix{})
			body := cv.requestBody(nil, 2, 7, true)
			if n := len(body); n < size || n > size+8<<10 {
				t.Fatalf("padded with %d rounds: %d bytes, want %d to %d", pad, n, size, size+8<<10)
			}
			req, err := formats[name]().Read(body, routeOf(a, false))
			if err != nil {
				t.Fatal(err)
			}
			in := req.Info()
			if in.Goal != cv.goal || in.ToolCount != 15+pad {
				t.Errorf("read goal %q and %d tool calls, want %q and %d", in.Goal, in.ToolCount, cv.goal, 15+pad)
			}
			failures := 0
			for _, tr := range in.ToolResults {
				if tr.IsError || guard.ToolFailed(tr.Text()) {
					failures++
				}
			}
			if want := 5; failures != want { // the turn's four and the newest
				t.Errorf("%d tool results failed, want %d", failures, want)
			}
			if historyPad(a, 10<<10, nil, prefix{}) != 0 {
				t.Error("a size below the conversation's pads it")
			}
		})
	}
}

// TestGrowingConversations: with -grow, each request of a run is the one
// before it with one more round (its bytes up to the array's end a prefix
// of the next request's), a run's first request is the branch request of
// that turn, and every body is JSON whose array grows by a round a turn.
func TestGrowingConversations(t *testing.T) {
	const grow = 4
	failed := func(seq int) bool { return seq%3 == 0 }
	for _, name := range apiNames {
		t.Run(name, func(t *testing.T) {
			a := apiByName(name)
			cv := a.newConv(3, false, nil, 0, prefix{})
			if err := cv.markRound(); err != nil {
				t.Fatal(err)
			}
			key := map[string]string{"chat": "messages", "responses": "input", "messages": "messages", "gemini": "contents"}[name]
			count := func(body []byte) int { return len(gjson.GetBytes(body, key).Array()) }
			round := cv.fill(nil, cv.round, 3, 1, false)
			perRound := len(gjson.ParseBytes(append(append([]byte("["), round...), ']')).Array())
			if perRound < 2 {
				t.Fatalf("the newest round holds %d elements: %s", perRound, round)
			}
			var prev []byte
			for seq := 8; seq < 16; seq++ {
				body := cv.grownBody(nil, 3, seq, grow, failed)
				if !json.Valid(body) {
					t.Fatalf("request %d is not JSON: %.300s", seq, body)
				}
				branch := cv.requestBody(nil, 3, seq, failed(seq))
				if got, want := count(body), count(branch)+seq%grow*perRound; got != want {
					t.Errorf("request %d: %d elements, want %d", seq, got, want)
				}
				switch {
				case seq%grow == 0:
					if !bytes.Equal(body, branch) {
						t.Errorf("request %d, a run's first, differs from the branch request", seq)
					}
				default:
					// The request before, up to its newest round, then
					// that round as an older one (without the cache
					// marker, for Messages).
					newest := cv.fill(nil, cv.round, 3, seq-1, failed(seq-1))
					cut := len(prev) - len(cv.tail) - len(newest)
					if !bytes.HasPrefix(body, prev[:cut]) || !bytes.HasPrefix(body[cut:], cv.fill(nil, cv.older, 3, seq-1, failed(seq-1))) {
						t.Errorf("request %d does not extend request %d", seq, seq-1)
					}
				}
				if n := strings.Count(gjson.GetBytes(body, key).Raw, `"cache_control"`); name == "messages" && n != 1 {
					t.Errorf("request %d: %d cache markers in the messages, want the newest one's", seq, n)
				}
				if failed(seq) != bytes.Contains(body, []byte("[build failed] (c3s"+strconv.Itoa(seq)+")")) {
					t.Errorf("request %d: its newest result is not the failure it should be", seq)
				}
				prev = body
			}
		})
	}
}
