package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/providers"
	mockprovider "github.com/scarproxy/scarproxy/providers/mock"
	"github.com/scarproxy/scarproxy/store"
	"github.com/tidwall/gjson"
)

// answerUsage reads the usage an answer reported to the client, with
// encoding/json and the APIs' documented fields: the oracle the proxy's
// own reading (gjson, the answer's tail, the stream's events) is checked
// against. Anthropic's input_tokens leave the cache's out: they are added.
// Gemini's promptTokenCount counts them, and its thoughts are output.
func answerUsage(t *testing.T, api string, stream bool, answer []byte) store.Usage {
	t.Helper()
	type openAI struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		InputTokens        int64 `json:"input_tokens"`
		OutputTokens       int64 `json:"output_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	type anthropic struct {
		InputTokens  *int64 `json:"input_tokens"`
		OutputTokens *int64 `json:"output_tokens"`
		CacheRead    *int64 `json:"cache_read_input_tokens"`
		CacheWrite   *int64 `json:"cache_creation_input_tokens"`
	}
	type gemini struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	}
	var u store.Usage
	fromGemini := func(g gemini) {
		u = store.Usage{Requests: 1, Input: g.PromptTokenCount + g.ToolUsePromptTokenCount, Output: g.CandidatesTokenCount + g.ThoughtsTokenCount,
			CacheRead: g.CachedContentTokenCount}
	}
	fromOpenAI := func(o openAI) {
		u = store.Usage{Requests: 1, Input: o.PromptTokens + o.InputTokens, Output: o.CompletionTokens + o.OutputTokens,
			CacheRead: o.PromptTokensDetails.CachedTokens + o.InputTokensDetails.CachedTokens}
	}
	var in, out, read, write int64
	fromAnthropic := func(a anthropic) {
		for _, f := range []struct {
			v   *int64
			dst *int64
		}{{a.InputTokens, &in}, {a.OutputTokens, &out}, {a.CacheRead, &read}, {a.CacheWrite, &write}} {
			if f.v != nil {
				*f.dst = *f.v
			}
		}
		u = store.Usage{Requests: 1, Input: in + read + write, Output: out, CacheRead: read, CacheWrite: write}
	}
	decode := func(b []byte, v any) {
		t.Helper()
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s answer: %v: %.200s", api, err, b)
		}
	}
	if !stream {
		switch api {
		case "messages":
			var a struct{ Usage anthropic }
			decode(answer, &a)
			fromAnthropic(a.Usage)
		case "gemini":
			var a struct{ UsageMetadata *gemini }
			decode(answer, &a)
			if a.UsageMetadata != nil {
				fromGemini(*a.UsageMetadata)
			}
		default:
			var a struct{ Usage openAI }
			decode(answer, &a)
			fromOpenAI(a.Usage)
		}
		return u
	}
	sc := bufio.NewScanner(bytes.NewReader(answer))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Type          string
			Usage         json.RawMessage
			Response      struct{ Usage json.RawMessage }
			Message       struct{ Usage json.RawMessage }
			UsageMetadata *gemini
		}
		decode([]byte(data), &ev)
		switch {
		case api == "gemini" && ev.UsageMetadata != nil: // the last one counts
			fromGemini(*ev.UsageMetadata)
		case api == "chat" && len(ev.Usage) > 0 && string(ev.Usage) != "null":
			var o openAI
			decode(ev.Usage, &o)
			fromOpenAI(o)
		case api == "responses" && ev.Type == "response.completed":
			var o openAI
			decode(ev.Response.Usage, &o)
			fromOpenAI(o)
		case api == "messages" && ev.Type == "message_start":
			var a anthropic
			decode(ev.Message.Usage, &a)
			fromAnthropic(a)
		case api == "messages" && ev.Type == "message_delta":
			var a anthropic
			decode(ev.Usage, &a)
			fromAnthropic(a)
		}
	}
	return u
}

// TestUsageOfEveryAPI runs a looping agent against the mock through the
// proxy, in every API, with JSON answers and with streams, and checks
// that the usage the answers reported reaches GET /scar/v1/usage (per
// conversation and per hour), scarproxy_tokens_total and the dashboard,
// token for token; and that with the blocks in the newest turn every
// turn after the first reads most of its input from the mock's prompt
// cache.
func TestUsageOfEveryAPI(t *testing.T) {
	for _, f := range wireFormats {
		for _, stream := range []bool{false, true} {
			name := f.name + "/json"
			if stream {
				name = f.name + "/stream"
			}
			t.Run(name, func(t *testing.T) {
				h := newHarness(t, "", withProviders(providers.Config{Name: "mock", Type: providers.TypeMock}))
				var total store.Usage
				var perTurn, bare []store.Usage
				conversation := ""
				mock := &http.Client{Transport: mockprovider.New()}
				for n := 0; n <= 5; n++ {
					body := withTools(t, f.name, []byte(f.turn(n)), stream)
					path := f.path
					if stream && f.streamPath != "" {
						path = f.streamPath
					}
					// The turns are made up, not the mock's answers: the
					// run is named the way opencode names its own.
					res := h.do(http.MethodPost, path, body, map[string]string{HeaderAgentSession: "ses_usage"})
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					h.inflight.Wait()
					if res.StatusCode != http.StatusOK {
						t.Fatalf("turn %d: %d %s", n, res.StatusCode, b)
					}
					conversation = res.Header.Get(HeaderConversation)
					u := answerUsage(t, f.name, stream, b)
					perTurn = append(perTurn, u)
					total.Add(u)

					// The same request sent to the mock without the proxy.
					res, err := mock.Post("http://mock"+mockPath(path), "application/json", bytes.NewReader(body))
					if err != nil {
						t.Fatal(err)
					}
					b, _ = io.ReadAll(res.Body)
					res.Body.Close()
					bare = append(bare, answerUsage(t, f.name, stream, b))
				}
				if total.Input == 0 || total.Output == 0 || total.CacheRead == 0 || conversation == "" {
					t.Fatalf("the answers reported %+v, in conversation %q", total, conversation)
				}
				// Each turn reads from the cache all that it reads without
				// the proxy, but for the blocks the turn before carried
				// (and a provider's rounding: OpenAI caches in blocks of
				// 128 tokens).
				for n := 1; n < len(perTurn); n++ {
					lost := perTurn[n-1].Input - perTurn[n].CacheRead
					lostBare := bare[n-1].Input - bare[n].CacheRead
					blocks := perTurn[n-1].Input - bare[n-1].Input
					if lost > lostBare+blocks+128 {
						t.Errorf("turn %d: %d input tokens of the turn before were not read from the cache; without the proxy %d, and the blocks were %d", n, lost, lostBare, blocks)
					}
				}

				var got struct {
					Usage []usageRecord
					Total usageRecord
				}
				for _, by := range []string{store.UsageByConversation, store.UsageByHour, store.UsageByModel, ""} {
					status, b := h.apiCall(http.MethodGet, "/scar/v1/usage?by="+by, "", nil)
					if status != http.StatusOK {
						t.Fatalf("by=%s: %d %s", by, status, b)
					}
					if err := json.Unmarshal(b, &got); err != nil {
						t.Fatal(err)
					}
					if counts(got.Total.Usage) != counts(total) || len(got.Usage) != 1 {
						t.Fatalf("by=%s: the API says %+v in %d records; the answers said %+v", by, got.Total.Usage, len(got.Usage), total)
					}
				}
				model := gjson.Get(f.turn(0), "model").String()
				if f.name == "gemini" {
					model = "gemini-2.5-flash" // from the path
				}
				if r := got.Usage[0]; r.Conversation != conversation || r.Provider != "mock" || r.Model != model {
					t.Errorf("the record is of %q, %q, %q; want conversation %q, mock, %s", r.Conversation, r.Provider, r.Model, conversation, model)
				}
				if want := float64(total.CacheRead) / float64(total.Input); got.Total.Ratio != want {
					t.Errorf("cache_hit_ratio %v, want %v", got.Total.Ratio, want)
				}
				for kind, want := range map[string]int64{"input": total.Input, "output": total.Output, "cache_read": total.CacheRead, "cache_write": total.CacheWrite} {
					if v := h.tokens(kind); v != float64(want) {
						t.Errorf("scarproxy_tokens_total{kind=%q} = %v, want %d", kind, v, want)
					}
				}

				pct := fmt.Sprintf("%.0f%%", got.Total.Ratio*100)
				for _, page := range []string{"/ui/usage?range=24h", "/ui/conversations/" + url.PathEscape(conversation), "/ui/"} {
					res := h.do(http.MethodGet, page, nil, nil)
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK || !strings.Contains(string(b), pct) {
						t.Errorf("%s: %d, without the hit ratio %s", page, res.StatusCode, pct)
					}
				}
			})
		}
	}
}

// usageRecord is a record of GET /scar/v1/usage.
type usageRecord struct {
	store.Usage
	Ratio float64 `json:"cache_hit_ratio"`
}

// withTools gives a request the tool definitions an agent sends, some 12
// KB of them (the provider caches a prompt from 1,024 tokens on), the
// last one marked for Anthropic's cache as Claude Code marks its own; and
// asks for a stream (in chat, with the usage at its end) when stream (the
// Gemini API's path says it).
func withTools(t *testing.T, api string, body []byte, stream bool) []byte {
	t.Helper()
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var tools []any
	for i := range 8 {
		name := fmt.Sprintf("tool_%d", i)
		desc := strings.Repeat(fmt.Sprintf("Tool %d runs a command in the project and returns what it printed. ", i), 20)
		schema := map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}
		switch api {
		case "chat":
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": name, "description": desc, "parameters": schema}})
		case "responses":
			tools = append(tools, map[string]any{"type": "function", "name": name, "description": desc, "parameters": schema})
		case "messages":
			tool := map[string]any{"name": name, "description": desc, "input_schema": schema}
			if i == 7 {
				tool["cache_control"] = map[string]any{"type": "ephemeral"}
			}
			tools = append(tools, tool)
		case "gemini":
			tools = append(tools, map[string]any{"name": name, "description": desc, "parameters": schema})
		}
	}
	req["tools"] = tools
	if api == "gemini" {
		req["tools"] = []any{map[string]any{"functionDeclarations": tools}}
		stream = false // in the path
	}
	if stream {
		req["stream"] = true
		if api == "chat" {
			req["stream_options"] = map[string]any{"include_usage": true}
		}
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tokens returns scarproxy_tokens_total of one kind, over every label.
func (h *harness) tokens(kind string) float64 {
	h.t.Helper()
	families, err := h.srv.metrics.registry.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "scarproxy_tokens_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// counts is the counts of a usage record, without its names.
func counts(u store.Usage) [5]int64 {
	return [5]int64{u.Requests, u.Input, u.Output, u.CacheRead, u.CacheWrite}
}
