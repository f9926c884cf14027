package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/proxy/chat"
	"github.com/scarproxy/scarproxy/proxy/logline"
)

// logLines is a JSON log a test reads back, line by line.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// withLog makes the harness log JSON at debug into l.
func withLog(l *logLines) harnessOpt {
	return withHandler(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// withHandler makes the harness log through h.
func withHandler(h slog.Handler) harnessOpt {
	return withOptions(func(o *Options) { o.Logger = slog.New(h) })
}

// countedLines is a logline handler that counts the lines it wrote
// itself.
type countedLines struct {
	*logline.Handler
	n atomic.Int64
}

func (c *countedLines) WriteLine(t time.Time, level slog.Level, msg string, attrs []slog.Attr) bool {
	ok := c.Handler.WriteLine(t, level, msg, attrs)
	if ok {
		c.n.Add(1)
	}
	return ok
}

// lines returns the lines logged with message msg.
func (l *logLines) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Bytes())
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestAccessLine: one line per proxied request at info, with its tenant,
// API, provider, model, status, duration, bytes and what the memory did,
// and its request id: the client's when valid (echoed, and sent to the
// provider), else one the proxy made. Never the prompt nor a key.
//
// The line is the same through slog's JSON handler and through
// logline's, which writes it itself.
func TestAccessLine(t *testing.T) {
	t.Run("slog", func(t *testing.T) {
		var logs logLines
		testAccessLine(t, &logs, withLog(&logs))
	})
	t.Run("logline", func(t *testing.T) {
		var logs logLines
		h := &countedLines{Handler: logline.New(&logs, true, &slog.HandlerOptions{Level: slog.LevelDebug})}
		testAccessLine(t, &logs, withHandler(h))
		if n := h.n.Load(); n != 3 {
			t.Errorf("logline wrote %d access lines itself, want all 3", n)
		}
	})
}

func testAccessLine(t *testing.T, logs *logLines, opt harnessOpt) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_provider_1")
		okCompletion(w, r)
	})
	h := newHarness(t, up.srv.URL, opt)
	const secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	body := `{"model":"m","messages":[{"role":"user","content":"PROMPT-MARKER use ` + secret + `"}]}`

	res, _ := h.chat(body, map[string]string{"X-Request-Id": "client-id:42", "X-Scar-Project": "api", "Authorization": "Bearer " + secret})
	if got := res.Header.Get("X-Request-Id"); got != "client-id:42" {
		t.Fatalf("answer's X-Request-Id %q, want the client's", got)
	}
	if got := up.last(t).Header.Get("X-Request-Id"); got != "client-id:42" {
		t.Fatalf("the provider got X-Request-Id %q", got)
	}
	lines := logs.lines(t, "request")
	if len(lines) != 1 {
		t.Fatalf("%d access lines:\n%s", len(lines), logs.String())
	}
	l := lines[0]
	for k, want := range map[string]any{
		"level": "INFO", "request_id": "client-id:42", "workspace": "default", "project": "api", "api": "chat",
		"provider": "up", "model": "m", "status": float64(200), "bytes_in": float64(len(body)),
		"guard": float64(0), "recall": float64(0), "provider_request_id": "req_provider_1",
	} {
		if l[k] != want {
			t.Errorf("access line %s = %v, want %v", k, l[k], want)
		}
	}
	if n, _ := l["bytes_out"].(float64); n <= 0 {
		t.Errorf("bytes_out %v", l["bytes_out"])
	}
	if _, ok := l["duration_ms"].(float64); !ok {
		t.Errorf("duration_ms %v", l["duration_ms"])
	}
	if s := logs.String(); strings.Contains(s, "PROMPT-MARKER") || strings.Contains(s, secret) {
		t.Fatalf("the log holds the prompt or a key:\n%s", s)
	}

	// An id a log line would have to quote is replaced.
	res, _ = h.chat(body, map[string]string{"X-Request-Id": "two words"})
	id := res.Header.Get("X-Request-Id")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
		t.Fatalf("generated request id %q", id)
	}
	if lines := logs.lines(t, "request"); len(lines) != 2 || lines[1]["request_id"] != id {
		t.Fatalf("second access line: %v", lines)
	}
	// A pass-through request has one too.
	res = h.do(http.MethodGet, "/v1/files", nil, map[string]string{"X-Request-Id": "pass-1"})
	res.Body.Close()
	h.inflight.Wait()
	if lines := logs.lines(t, "request"); len(lines) != 3 || lines[2]["request_id"] != "pass-1" || lines[2]["api"] != "passthrough" {
		t.Fatalf("pass-through access line: %v", lines[len(lines)-1])
	}
}

// TestDebugLinesCarryTheRequestID: at debug, a line per incident
// recorded, per injection of blocks and per fix learned, each with the
// id of the request that caused it.
func TestDebugLinesCarryTheRequestID(t *testing.T) {
	up := newRecorder(t, okCompletion)
	var logs logLines
	h := newHarness(t, up.srv.URL, withLog(&logs))
	msgs := []map[string]any{msg("user", "build the app")}
	turn := func(id string, calls ...map[string]any) {
		t.Helper()
		msgs = append(msgs, calls...)
		if res, b := h.chat(chatBody(t, nil, msgs...), map[string]string{"X-Request-Id": id, "X-Scar-Session": "s1"}); res.StatusCode != 200 {
			t.Fatalf("%s: %d %s", id, res.StatusCode, b)
		}
	}
	fail := "Error: Cannot find module 'left-pad' (required from /app/src/index.js)"
	turn("r1", toolCall("c1", "build"), toolResultMsg("c1", fail))
	turn("r2", toolCall("c2", "build"), toolResultMsg("c2", fail))
	turn("r3", toolCall("c3", "build"), toolResultMsg("c3", "compiled 12 files"))

	byID := func(msg string) map[any]int {
		n := map[any]int{}
		for _, l := range logs.lines(t, msg) {
			if l["level"] != "DEBUG" && msg != "fix learned" {
				t.Errorf("%s logged at %v", msg, l["level"])
			}
			n[l["request_id"]]++
		}
		return n
	}
	if got := byID("incident recorded"); got["r1"] != 1 || got["r2"] != 1 || len(got) != 2 {
		t.Fatalf("incident lines by request: %v\n%s", got, logs.String())
	}
	if got := byID("blocks injected"); got["r2"] != 1 || got["r1"] != 0 {
		t.Fatalf("block lines by request: %v\n%s", got, logs.String())
	}
	if got := byID("fix learned"); got["r3"] != 1 {
		t.Fatalf("fix lines by request: %v\n%s", got, logs.String())
	}
	if s := logs.String(); strings.Contains(s, "left-pad") {
		t.Fatalf("the log holds a tool's output:\n%s", s)
	}
}

// TestAccessLineAllocatesNothing: through logline's handler, the access
// line of a request costs no allocation (its attributes are pooled).
func TestAccessLineAllocatesNothing(t *testing.T) {
	s := &Server{log: withRequestIDs(slog.New(logline.New(io.Discard, false, nil)))}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	req = req.WithContext(context.WithValue(req.Context(), requestIDKey{}, "01JD5Q7X2M0000000000000000"))
	ex := &exchange{c: echo.New().NewContext(req, httptest.NewRecorder()), format: chat.New(), start: time.Now(),
		provider: "openai", providerRequestID: "req_1", bytesIn: 21261}
	ex.tenant.Workspace, ex.tenant.Project, ex.tenant.Session = "default", "api", "c:3f9a0c1d2e4b5a69"
	if n := testing.AllocsPerRun(50, func() { s.logAccess(ex) }); n != 0 && !raceOn {
		t.Errorf("%v allocations per access line, want 0", n)
	}
}
