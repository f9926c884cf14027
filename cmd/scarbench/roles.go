package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers the load driver sends to the fake upstream through the proxies
// (both proxies forward unknown headers untouched).
const (
	// headerFinal asks for a final answer (finish_reason "stop") instead of
	// a tool call, which makes scarproxy auto-capture a solution. Its
	// value, the request's number in its conversation, goes into the
	// answer's text: every final answer of a conversation says something
	// new, as a chat agent's do, so each one is a capture to store.
	headerFinal = "X-Bench-Final"
	// headerHold makes a streamed answer send its first event, then wait
	// for POST /bench/release before finishing (the soak's open streams).
	headerHold = "X-Bench-Hold"
	// headerStatus asks for an error answer of this status (the storm's
	// 429s), in the shape of OpenAI's rate-limit error.
	headerStatus = "X-Bench-Status"
)

// rateLimited is the body of the fake upstream's error answers.
var rateLimited = []byte(`{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-bench on requests per min (RPM): Limit 500, Used 500, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)

// The fake upstream's chat answers: small fixed bodies, rendered once
// (the other APIs' are in api.go).
var (
	completionToolCall = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_next","type":"function","function":{"name":"run_tests","arguments":"{\"path\":\"./...\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5120,"completion_tokens":18,"total_tokens":5138}}`)
	completionFinal    = []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Fixed: Load now falls back to Default() when the file is missing, and APP_PORT is only applied when it parses. Tests pass."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5120,"completion_tokens":31,"total_tokens":5151}}`)
)

// sseEvents renders a streamed answer as separate events (each flushed on
// its own): a role event, eight content deltas, the finish event, [DONE].
func sseEvents(final bool) [][]byte {
	chunk := func(delta, finish string) []byte {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return []byte(`data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}` + "\n\n")
	}
	ev := [][]byte{chunk(`{"role":"assistant","content":""}`, "")}
	for _, w := range streamWords {
		ev = append(ev, chunk(`{"content":"`+w+`"}`, ""))
	}
	if final {
		ev = append(ev, chunk(`{}`, "stop"))
	} else {
		ev = append(ev, chunk(`{"tool_calls":[{"index":0,"id":"call_next","type":"function","function":{"name":"run_tests","arguments":"{\"path\":\"./...\"}"}}]}`, ""))
		ev = append(ev, chunk(`{}`, "tool_calls"))
	}
	return append(ev, []byte("data: [DONE]\n\n"))
}

// fakeUpstream is the fast upstream: it answers the chat, Responses,
// Messages and Gemini APIs, each in its own shape (the Gemini API's paths
// are below the root, the others' below /v1).
type fakeUpstream struct {
	mu   sync.Mutex
	gate chan struct{} // closed by release
}

func newFakeUpstream() *fakeUpstream { return &fakeUpstream{gate: make(chan struct{})} }

var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (u *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		u.answer(w, r, &chatAnswers, askInBody)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		u.answer(w, r, &responsesAnswers, askInBody)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		u.answer(w, r, &messagesAnswers, askInBody)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1beta/models/") && strings.HasSuffix(r.URL.Path, ":generateContent"):
		u.answer(w, r, &geminiAnswers, askJSON)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1beta/models/") && strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		if r.URL.Query().Get("alt") != "sse" {
			// Without alt=sse the API streams a JSON array, which the
			// load does not read.
			http.Error(w, "scarbench's fake streams only with alt=sse", http.StatusBadRequest)
			return
		}
		u.answer(w, r, &geminiAnswers, askSSE)
	case r.Method == http.MethodPost && r.URL.Path == "/bench/release":
		u.release()
	case r.URL.Path == "/healthz":
	default:
		http.NotFound(w, r)
	}
}

// streamAsk is how a request asks for a stream.
type streamAsk int

const (
	askInBody streamAsk = iota // "stream":true in the body (chat, Responses, Messages)
	askJSON                    // by its path, for none (the Gemini API's generateContent)
	askSSE                     // by its path, for one (streamGenerateContent?alt=sse)
)

// answer reads the request and sends one of a's answers: a stream when
// the request asks for one, final when the load driver asks for it.
func (u *fakeUpstream) answer(w http.ResponseWriter, r *http.Request, a *answers, ask streamAsk) {
	// Read the whole body, as a provider does, and look for "stream":true
	// in it without decoding it.
	buf := bodyBufs.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(r.Body)
	stream := ask == askSSE || ask == askInBody && bytes.Contains(buf.Bytes(), []byte(`"stream":true`))
	bodyBufs.Put(buf)
	if err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	if st := r.Header.Get(headerStatus); st != "" {
		code, err := strconv.Atoi(st)
		if err != nil || code < 400 || code > 599 {
			http.Error(w, "bad "+headerStatus, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(rateLimited)))
		w.WriteHeader(code)
		w.Write(rateLimited)
		return
	}
	turn := r.Header.Get(headerFinal)
	final := turn != ""
	if !stream {
		body := a.json
		if final {
			body = numbered(a.jsonFinal, finalMark, turn)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	var gate <-chan struct{}
	if r.Header.Get(headerHold) != "" {
		// Take the gate before the first event goes out: a release that
		// follows the first event must find this stream waiting on it.
		gate = u.wait()
		h.Set("Connection", "close") // the soak counts goroutines: leave no idle connection behind
	}
	events := a.events
	if final {
		events = make([][]byte, len(a.eventsFinal))
		for i, ev := range a.eventsFinal {
			events[i] = numbered(ev, streamMark, turn)
		}
	}
	f := w.(http.Flusher)
	for i, ev := range events {
		if _, err := w.Write(ev); err != nil {
			return
		}
		f.Flush()
		if i == 0 && gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
	}
}

// The words of a final answer that take the turn's number.
var (
	finalMark  = []byte("Tests pass.")
	streamMark = []byte("the fix.")
)

// numbered returns b with mark ending in " (turn N)." when turn is a
// number, else b.
func numbered(b, mark []byte, turn string) []byte {
	if _, err := strconv.Atoi(turn); err != nil || !bytes.Contains(b, mark) {
		return b
	}
	with := append(append(append(bytes.Clone(mark[:len(mark)-1]), " (turn "...), turn...), ")."...)
	return bytes.Replace(b, mark, with, 1)
}

func (u *fakeUpstream) wait() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.gate
}

func (u *fakeUpstream) release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	close(u.gate)
	u.gate = make(chan struct{})
}

// newBareProxy is the floor any proxy pays: an httputil.ReverseProxy in
// front of target, with the same upstream connection pool settings as
// scarproxy's OpenAI provider (the default transport keeps only two idle
// connections per host, which would make the floor unfairly low), and the
// request body wrapped in a lengthBody (see there).
func newBareProxy(target *url.URL) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			if pr.Out.Body != nil && pr.Out.ContentLength > 0 {
				pr.Out.Body = &lengthBody{rc: pr.Out.Body, left: pr.Out.ContentLength}
			}
		},
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1024,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		ErrorLog: log.New(os.Stderr, "bareproxy: ", log.LstdFlags),
	}
}

// lengthBody ends a request body of known length at that length, without
// reading the underlying body past it.
//
// Without it, a bare ReverseProxy loses about 1% of SSE answers under load
// (read error during body copy: use of closed network connection): the
// transport, having sent ContentLength bytes, reads the inbound body once
// more to check for extra data, while the server, flushing the answer's
// headers, may already have read the body's EOF and closed it; the extra
// read then fails with ErrBodyReadAfterClose, which the transport takes for
// a write error, and it closes the upstream connection under the stream.
// scarproxy reads request bodies whole before forwarding and is not exposed.
type lengthBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *lengthBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if err == nil && b.left == 0 {
		err = io.EOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return b.rc.Close() }

// serveRole runs a child process role until ctx ends: it listens on a
// loopback port and prints "listening ADDR" on stdout.
func serveRole(ctx context.Context, role string, getenv func(string) string, stdout io.Writer) error {
	var h http.Handler
	switch role {
	case "upstream":
		h = newFakeUpstream()
	case "bareproxy":
		target, err := url.Parse(getenv(envTarget))
		if err != nil || target.Host == "" {
			return fmt.Errorf("bareproxy: %s=%q is not a URL", envTarget, getenv(envTarget))
		}
		h = newBareProxy(target)
	default:
		return fmt.Errorf("unknown role %q", role)
	}
	addr := getenv(envListen)
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: listen: %w", role, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: log.New(os.Stderr, role+": ", 0)}
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
