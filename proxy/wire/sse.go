package wire

import (
	"bytes"
	"mime"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// MaxSSELine bounds the one SSE line an observer keeps to inspect. Longer
// lines still pass through to the client untouched; the observer only
// stops looking inside them.
const MaxSSELine = 8 << 20

// MaxExcerpt bounds the answer text an observer keeps for auto-capture.
const MaxExcerpt = 4 << 10

// IsSSE reports whether a response's headers announce an event stream.
func IsSSE(h http.Header) bool {
	var ct string
	if v := h["Content-Type"]; len(v) > 0 { // the canonical name: Get would canonicalize it again
		ct = v[0]
	}
	if base, _, _ := strings.Cut(ct, ";"); !strings.EqualFold(strings.TrimSpace(base), "text/event-stream") {
		return false // any other type, whatever its parameters (parsed for nothing on every answer)
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// SSE splits an event stream, given in chunks cut anywhere, into its data
// lines. For each "data:" line it calls Data with the event's name (its
// "event:" field, "" when it has none) and the data, without the field
// name and surrounding white space; Data must not keep data.
type SSE struct {
	Data func(event string, data []byte)

	line    []byte // partial line carried over between writes
	tooLong bool   // the current line passed MaxSSELine
	event   string // the "event:" field of the current event
}

// Write splits the next chunk of the stream.
func (s *SSE) Write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.keep(p)
			return
		}
		if len(s.line) == 0 && !s.tooLong {
			s.handle(p[:i])
		} else {
			s.keep(p[:i])
			if !s.tooLong {
				s.handle(s.line)
			}
			s.line = s.line[:0]
			s.tooLong = false
		}
		p = p[i+1:]
	}
}

func (s *SSE) keep(p []byte) {
	if s.tooLong {
		return
	}
	if len(s.line)+len(p) > MaxSSELine {
		s.tooLong = true
		s.line = s.line[:0]
		return
	}
	s.line = append(s.line, p...)
}

func (s *SSE) handle(line []byte) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	switch {
	case len(line) == 0:
		s.event = "" // end of one event
	case bytes.HasPrefix(line, []byte("data:")):
		s.Data(s.event, bytes.TrimSpace(line[5:]))
	case bytes.HasPrefix(line, []byte("event:")):
		if ev := bytes.TrimSpace(line[6:]); string(ev) != s.event {
			s.event = string(ev)
		}
	}
}

// Excerpt is a bounded text: appends past MaxExcerpt bytes are dropped.
type Excerpt []byte

// Add appends s, as much of it as fits.
func (e *Excerpt) Add(s string) {
	if room := MaxExcerpt - len(*e); room > 0 {
		if len(s) > room {
			s = s[:room]
		}
		*e = append(*e, s...)
	}
}

// Capture keeps the first Max bytes of an answer that is not a stream.
type Capture struct {
	Max int
	B   []byte
}

// Write keeps what fits of p.
func (c *Capture) Write(p []byte) {
	if room := c.Max - len(c.B); room > 0 {
		if len(p) > room {
			p = p[:room]
		}
		c.B = append(c.B, p...)
	}
}

// Whole returns the captured answer when it was captured whole and is
// JSON, else nil.
func (c *Capture) Whole() []byte {
	if len(c.B) == 0 || len(c.B) >= c.Max || !Valid(c.B) {
		return nil
	}
	return c.B
}

// WholeMembers is Whole for an answer read by its top-level members: one
// scan checks that the captured answer is JSON and notes where the first
// value of each of keys is (zero spans for those absent, and for all when
// the answer is not an object). An answer that echoes a request's long
// members (a Responses answer its instructions and tools) is then read
// once, not checked and walked again. It returns nil when Whole would.
func (c *Capture) WholeMembers(keys ...string) ([]byte, []Span) {
	if len(c.B) == 0 || len(c.B) >= c.Max {
		return nil, nil
	}
	spans, _, err := firstMembers(c.B, keys)
	if err != nil {
		return nil, nil
	}
	return c.B, spans
}

// ErrorMessage extracts a provider's error message from an error body or
// an error event: OpenAI's and Anthropic's error.message, a bare "error"
// string, a "message" or "detail", or the text itself.
func ErrorMessage(body []byte, status int) string {
	if Valid(body) {
		for _, path := range []string{"error.message", "error", "message", "detail"} {
			if v := gjson.GetBytes(body, path); v.Exists() && v.Type == gjson.String && v.String() != "" {
				return v.String()
			}
		}
	}
	msg := strings.TrimSpace(string(body))
	if msg == "" || strings.HasPrefix(msg, "<") {
		return http.StatusText(status)
	}
	return msg
}

// Tap is what an observer reads an answer with: the event splitter of a
// stream, or the first and the last bytes of any other body. Set
// Events.Data before the first Write.
type Tap struct {
	Stream  bool
	Events  SSE
	Capture Capture
	Tail    Tail
}

// NewTap returns a tap of a stream (sse) or of a body of which the first
// keep bytes are kept.
func NewTap(sse bool, keep int) Tap { return Tap{Stream: sse, Capture: Capture{Max: keep}} }

// Write reads the next chunk of the answer.
func (t *Tap) Write(p []byte) {
	if t.Stream {
		t.Events.Write(p)
		return
	}
	// The tail is read only when the answer is not kept whole: it starts
	// once the capture is full, from the capture's end.
	c := &t.Capture
	if len(c.B) >= c.Max {
		t.Tail.Write(p)
		return
	}
	room := c.Max - len(c.B)
	c.Write(p)
	if len(c.B) >= c.Max {
		t.Tail.Write(c.B)
		t.Tail.Write(p[min(room, len(p)):])
	}
}

// EventOf names an event: its "event:" field, else the "type" member of
// its data; and reports whether the data is JSON (depth-bounded: a
// provider can send anything). Unnamed events of data that is not JSON
// are "".
func EventOf(event string, data []byte) (name string, valid bool) {
	if !Valid(data) {
		return event, false
	}
	if event == "" {
		event = gjson.GetBytes(data, "type").String()
	}
	return event, true
}
