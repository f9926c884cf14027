package mock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// longSystem is a system text above OpenAI's 1024-token floor for caching.
var longSystem = strings.Repeat("You are a careful coding agent; read before you write. ", 120)

// failure is a tool's output, long enough for a turn to add more than one
// of OpenAI's 128-token cache blocks.
var failure = strings.Repeat("make: *** [Makefile:12: all] Error 1\n", 20)

// cacheTurn is request n (1, 2, 3...) of a conversation in one API: the
// system text, the first user text, then n-1 failed calls of run, each
// with its result. Each turn extends the one before. Messages marks the
// system block for caching, as agents do.
func cacheTurn(t *testing.T, api, system, first string, n int, stream bool) string {
	t.Helper()
	req := map[string]any{"model": "m", "stream": stream}
	if stream && api == "chat" {
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	var msgs []any
	switch api {
	case "chat":
		msgs = append(msgs, map[string]any{"role": "system", "content": system}, map[string]any{"role": "user", "content": first})
		for i := 1; i < n; i++ {
			id := fmt.Sprint("call_", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "run", "arguments": `{"cmd":"make"}`}}}},
				map[string]any{"role": "tool", "tool_call_id": id, "content": failure})
		}
		req["messages"] = msgs
	case "responses":
		req["instructions"] = system
		msgs = append(msgs, map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": first}}})
		for i := 1; i < n; i++ {
			id := fmt.Sprint("call_", i)
			msgs = append(msgs,
				map[string]any{"type": "function_call", "call_id": id, "name": "run", "arguments": `{"cmd":"make"}`},
				map[string]any{"type": "function_call_output", "call_id": id, "output": failure})
		}
		req["input"] = msgs
	case "messages":
		req["max_tokens"] = 1024
		req["system"] = []any{map[string]any{"type": "text", "text": system, "cache_control": map[string]any{"type": "ephemeral"}}}
		msgs = append(msgs, map[string]any{"role": "user", "content": first})
		for i := 1; i < n; i++ {
			id := fmt.Sprint("toolu_", i)
			msgs = append(msgs,
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": id, "name": "run", "input": map[string]any{"cmd": "make"}}}},
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": failure}}})
		}
		req["messages"] = msgs
	case "gemini":
		req["systemInstruction"] = map[string]any{"parts": []any{map[string]any{"text": system}}}
		msgs = append(msgs, map[string]any{"role": "user", "parts": []any{map[string]any{"text": first}}})
		for i := 1; i < n; i++ {
			msgs = append(msgs,
				map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "run", "args": map[string]any{"cmd": "make"}}}}},
				map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"name": "run", "response": map[string]any{"output": failure}}}}})
		}
		req["contents"] = msgs
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cacheUsage is an answer's usage, whatever the API: input holds every
// input token (Anthropic's three fields added up).
type cacheUsage struct {
	input, cached, creation int
}

func usageOf(api string, u gjson.Result) cacheUsage {
	switch api {
	case "chat":
		return cacheUsage{input: int(u.Get("prompt_tokens").Int()), cached: int(u.Get("prompt_tokens_details.cached_tokens").Int())}
	case "responses":
		return cacheUsage{input: int(u.Get("input_tokens").Int()), cached: int(u.Get("input_tokens_details.cached_tokens").Int())}
	case "gemini":
		return cacheUsage{input: int(u.Get("promptTokenCount").Int()), cached: int(u.Get("cachedContentTokenCount").Int())}
	}
	read, creation := int(u.Get("cache_read_input_tokens").Int()), int(u.Get("cache_creation_input_tokens").Int())
	return cacheUsage{input: int(u.Get("input_tokens").Int()) + read + creation, cached: read, creation: creation}
}

// sendUsage sends body to m and returns the usage of its answer; in a
// stream, the usage of each event that reports one must agree.
func sendUsage(t *testing.T, m *Transport, api, body string) cacheUsage {
	t.Helper()
	res, out := do(t, m, http.MethodPost, pathOf(api, body), body)
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, out)
	}
	if !gjson.Get(body, "stream").Bool() {
		if api == "gemini" {
			return usageOf(api, gjson.Get(out, "usageMetadata"))
		}
		return usageOf(api, gjson.Get(out, "usage"))
	}
	var all []cacheUsage
	for _, ev := range parseSSE(t, out) {
		j := gjson.ParseBytes(ev.data)
		switch {
		case api == "chat" && j.Get("usage").Exists(),
			api == "messages" && ev.name == "message_delta":
			all = append(all, usageOf(api, j.Get("usage")))
		case api == "responses" && ev.name == "response.completed":
			all = append(all, usageOf(api, j.Get("response.usage")))
		case api == "messages" && ev.name == "message_start":
			all = append(all, usageOf(api, j.Get("message.usage")))
		case api == "gemini" && j.Get("candidates.0.finishReason").Exists():
			all = append(all, usageOf(api, j.Get("usageMetadata")))
		}
	}
	if len(all) == 0 {
		t.Fatalf("no usage in the stream:\n%s", out)
	}
	for _, u := range all[1:] {
		if u != all[0] {
			t.Fatalf("the stream's events disagree on usage: %+v", all)
		}
	}
	return all[0]
}

// TestMockCacheFollowsThePrefix: in one conversation each turn that
// extends the one before reads more from the cache; a turn whose early
// bytes change reads only the prefix it shares with the turn before.
func TestMockCacheFollowsThePrefix(t *testing.T) {
	for _, api := range apis {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", api, stream), func(t *testing.T) {
				m := fixedMock()
				var u [4]cacheUsage
				for n := 1; n <= 3; n++ {
					u[n] = sendUsage(t, m, api, cacheTurn(t, api, longSystem, "fix the build", n, stream))
				}
				if u[1].cached != 0 || u[2].cached <= 0 || u[3].cached <= u[2].cached {
					t.Fatalf("cached tokens do not grow: %+v", u[1:])
				}
				for n := 2; n <= 3; n++ {
					if u[n].cached > u[n-1].input || u[n].cached < u[n-1].input-200 {
						t.Errorf("turn %d reads %d tokens of the %d before", n, u[n].cached, u[n-1].input)
					}
				}
				if api == "messages" && (u[1].creation < tokens(len(longSystem)) || u[2].creation != 0) {
					t.Errorf("cache writes %+v: the marked system text is written once", u[1:])
				}

				// The same conversation, the system text changed half-way.
				changed := longSystem[:len(longSystem)/2] + "X" + longSystem[len(longSystem)/2+1:]
				u4 := sendUsage(t, m, api, cacheTurn(t, api, changed, "fix the build", 3, stream))
				half := tokens(len(longSystem) / 2)
				want := half
				switch api {
				case "chat", "responses":
					want = openAICached(half)
				case "gemini":
					want = geminiCached(half)
				}
				if u4.cached >= u[3].cached || u4.cached < want || u4.cached > want+128 {
					t.Fatalf("after a change half-way: %d cached tokens, want about %d (turn 3 had %d)", u4.cached, want, u[3].cached)
				}
				if api == "messages" && u4.creation <= 0 {
					t.Errorf("a changed marked system text is written again: %+v", u4)
				}
			})
		}
	}
}

// TestMockCachePerConversation: two conversations do not share a cache,
// even with the same system text, and the model is part of the key.
func TestMockCachePerConversation(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			m := fixedMock()
			sendUsage(t, m, api, cacheTurn(t, api, longSystem, "fix the build", 1, false))
			if u := sendUsage(t, m, api, cacheTurn(t, api, longSystem, "write the docs", 2, false)); u.cached != 0 {
				t.Fatalf("another conversation reads %d cached tokens", u.cached)
			}
			if u := sendUsage(t, m, api, cacheTurn(t, api, longSystem, "fix the build", 2, false)); u.cached == 0 {
				t.Fatal("the first conversation lost its cache to the second")
			}
			other := strings.Replace(cacheTurn(t, api, longSystem, "fix the build", 3, false), `"model":"m"`, `"model":"m2"`, 1)
			if u := sendUsage(t, m, api, other); u.cached != 0 {
				t.Fatalf("another model reads %d cached tokens", u.cached)
			}
		})
	}
}

// TestMockCacheIgnoresPlacedBlocks: a block the proxy placed in the first
// user turn on one request and not on the next leaves the conversation
// the same.
func TestMockCacheIgnoresPlacedBlocks(t *testing.T) {
	for _, api := range apis {
		t.Run(api, func(t *testing.T) {
			m := fixedMock()
			sendUsage(t, m, api, cacheTurn(t, api, longSystem, "fix the build\n\n"+framed(guardText), 1, false))
			if u := sendUsage(t, m, api, cacheTurn(t, api, longSystem, "fix the build", 2, false)); u.cached == 0 {
				t.Fatal("the guard in the first turn made it another conversation")
			}
		})
	}
}

// TestMockCacheConcurrent runs conversations side by side on one mock
// (run with -race): answers stay whole and their usage consistent.
func TestMockCacheConcurrent(t *testing.T) {
	m := New()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := apis[g%len(apis)]
			first := fmt.Sprint("task ", g%4) // two goroutines per conversation and API pair, some
			for i := range 12 {
				u := sendUsage(t, m, api, cacheTurn(t, api, longSystem, first, 1+i%3, i%2 == 0))
				if u.cached < 0 || u.cached > u.input || u.creation < 0 {
					t.Errorf("%s: usage %+v", api, u)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestPrefixMemoryBounds(t *testing.T) {
	k := func(i int) [32]byte { return conversationKey("m", fmt.Sprint(i)) }
	t.Run("conversations: the least recently used goes", func(t *testing.T) {
		p := &prefixMemory{maxConversations: 3}
		for i := range 3 {
			p.share(k(i), []byte("abc"))
		}
		p.share(k(0), []byte("abc")) // 0 used last: 1 is the oldest now
		p.share(k(3), []byte("abc"))
		if n := p.share(k(1), []byte("abc")); n != 0 {
			t.Errorf("conversation 1 kept: %d", n)
		}
		if n := p.share(k(0), []byte("abd")); n != 2 {
			t.Errorf("conversation 0 shares %d bytes, want 2", n)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		p := &prefixMemory{maxBytes: 10}
		p.share(k(0), []byte("012345"))
		p.share(k(1), []byte("012345"))
		if n := p.share(k(0), []byte("012345")); n != 0 {
			t.Errorf("over the byte bound, conversation 0 kept: %d", n)
		}
		p.share(k(2), []byte("0123456789a")) // too large to keep
		if n := p.share(k(2), []byte("0123456789a")); n != 0 {
			t.Errorf("a prompt over the bound kept: %d", n)
		}
		if p.bytes > 10 || len(p.convs) != p.order.Len() {
			t.Errorf("bytes %d, %d conversations, %d in order", p.bytes, len(p.convs), p.order.Len())
		}
	})
}

func TestOpenAICached(t *testing.T) {
	for _, tc := range []struct{ prefix, want int }{
		{0, 0}, {1023, 0}, {1024, 1024}, {1151, 1024}, {1152, 1152}, {5000, 4992},
	} {
		if got := openAICached(tc.prefix); got != tc.want {
			t.Errorf("openAICached(%d) = %d, want %d", tc.prefix, got, tc.want)
		}
	}
}

func TestAnthropicSplit(t *testing.T) {
	body := []byte(`{"model":"m","system":[{"type":"text","text":"` + strings.Repeat("s", 400) + `","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"` + strings.Repeat("u", 400) + `"}]}`)
	prompt := promptOf(body, "tools", "system", "messages")
	mark := lastCacheMark(prompt)
	unmarked := bytes.Replace(body, []byte(`,"cache_control":{"type":"ephemeral"}`), nil, 1)
	tests := []struct {
		name                  string
		body                  []byte
		prefix                int
		input, read, creation int
	}{
		{"first request: the marked system is written", body, 0, tokens(len(body)) - tokens(mark), 0, tokens(mark)},
		{"a read short of the mark: the rest is written", body, 40, tokens(len(body)) - tokens(mark), tokens(40), tokens(mark) - tokens(40)},
		{"a read past the mark", body, len(prompt), tokens(len(body)) - tokens(len(prompt)), tokens(len(prompt)), 0},
		{"no mark: nothing written", unmarked, 40, tokens(len(unmarked)) - tokens(40), tokens(40), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := promptOf(tc.body, "tools", "system", "messages")
			input, read, creation := anthropicSplit(tc.body, p, tc.prefix)
			if input != tc.input || read != tc.read || creation != tc.creation {
				t.Fatalf("split %d %d %d, want %d %d %d", input, read, creation, tc.input, tc.read, tc.creation)
			}
		})
	}
	t.Run("top-level cache_control: the whole prompt", func(t *testing.T) {
		b := []byte(`{"cache_control":{"type":"ephemeral"},"messages":[{"role":"user","content":"hello"}]}`)
		p := promptOf(b, "tools", "system", "messages")
		if _, _, creation := anthropicSplit(b, p, 0); creation != tokens(len(p)) {
			t.Fatalf("creation %d, want %d", creation, tokens(len(p)))
		}
	})
}

func TestLastCacheMark(t *testing.T) {
	tests := []struct {
		name, prompt string
		want         int
	}{
		{"none", `[{"type":"text","text":"hi"}]`, 0},
		{"a marked block", `[{"text":"a","cache_control":{"type":"ephemeral"}},{"text":"b"}]`, len(`[{"text":"a","cache_control":{"type":"ephemeral"}}`)},
		{"the last marked block", `[{"cache_control":{}},{"x":[{"cache_control":{},"text":"c"}]}]`, len(`[{"cache_control":{}},{"x":[{"cache_control":{},"text":"c"}`)},
		{"a value is not a mark", `[{"text":"cache_control"},{"k":"cache_control" }]`, 0},
		{"inside a string", `[{"text":"say \"cache_control\": now"}]`, 0},
		{"several values", "[]\n" + `{"cache_control" : {}}` + "\n[]", len("[]\n" + `{"cache_control" : {}}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := lastCacheMark([]byte(tc.prompt)); got != tc.want {
				t.Fatalf("lastCacheMark = %d, want %d", got, tc.want)
			}
		})
	}
}

// FuzzLastCacheMark checks the scanner against encoding/json's decoder on
// valid JSON without \u escapes (which the scanner does not decode).
func FuzzLastCacheMark(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, `{"cache_control":{"type":"ephemeral"}}`, "[{\"text\":\"x\",\"cache_control\":{}}]\n{\"b\":\"cache_control\"}",
		`{"t":"\"cache_control\":"}`, `{"cache_control" : 1, "x": {"cache_control":2}}`, `[["cache_control"],{"cache_control":[{}]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, prompt []byte) {
		got := lastCacheMark(prompt)
		if got < 0 || got > len(prompt) || (got > 0 && prompt[got-1] != '}') {
			t.Fatalf("lastCacheMark(%q) = %d", prompt, got)
		}
		if bytes.Contains(prompt, []byte(`\u`)) {
			return
		}
		if want, ok := decodedCacheMark(prompt); ok && got != want {
			t.Fatalf("lastCacheMark(%q) = %d, the decoder says %d", prompt, got, want)
		}
	})
}

// decodedCacheMark is lastCacheMark by encoding/json's tokens; false when
// prompt is not a sequence of JSON values.
func decodedCacheMark(prompt []byte) (int, bool) {
	type frame struct{ object, wantKey, marked bool }
	var stack []frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(prompt))
	mark := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return mark, len(stack) == 0
		}
		if err != nil {
			return 0, false
		}
		n := len(stack)
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, frame{object: true, wantKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				if stack[n-1].marked {
					mark = int(dec.InputOffset())
				}
				stack = stack[:n-1]
				valueDone()
			}
		default:
			if n > 0 && stack[n-1].object && stack[n-1].wantKey {
				stack[n-1].wantKey = false
				stack[n-1].marked = stack[n-1].marked || v == "cache_control"
				continue
			}
			valueDone()
		}
	}
}
