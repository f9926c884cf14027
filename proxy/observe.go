package proxy

import (
	"bytes"
	"mime"
	"net/http"

	"github.com/tidwall/gjson"
)

// maxSSELine bounds the one SSE line the observer keeps to inspect. Longer
// lines still pass through to the client untouched; the observer only
// stops looking inside them.
const maxSSELine = 8 << 20

// maxExcerpt bounds the answer text kept for auto-capture.
const maxExcerpt = 4 << 10

// observer reads a copy of a provider's answer while the bytes go through
// unchanged. For an SSE stream it follows events (error events, the finish
// reason, [DONE], a bounded excerpt of the answer); for any other body it
// keeps the first captureMax bytes.
type observer struct {
	sse bool

	line    []byte // partial SSE line carried over between writes
	tooLong bool   // the current line passed maxSSELine
	event   string // the last "event:" field of the current event
	done    bool   // saw "data: [DONE]"
	errMsg  string // message of an error event
	finish  string // last finish_reason seen
	excerpt []byte // answer text, at most maxExcerpt bytes

	capture    []byte
	captureMax int
}

func isSSE(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

func newObserver(sse bool, captureMax int) *observer {
	return &observer{sse: sse, captureMax: captureMax}
}

// write observes one chunk of the answer. It never keeps p.
func (o *observer) write(p []byte) {
	if !o.sse {
		if room := o.captureMax - len(o.capture); room > 0 {
			if len(p) > room {
				p = p[:room]
			}
			o.capture = append(o.capture, p...)
		}
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			o.keep(p)
			return
		}
		if len(o.line) == 0 && !o.tooLong {
			o.handleLine(p[:i])
		} else {
			o.keep(p[:i])
			if !o.tooLong {
				o.handleLine(o.line)
			}
			o.line = o.line[:0]
			o.tooLong = false
		}
		p = p[i+1:]
	}
}

func (o *observer) keep(p []byte) {
	if o.tooLong {
		return
	}
	if len(o.line)+len(p) > maxSSELine {
		o.tooLong = true
		o.line = o.line[:0]
		return
	}
	o.line = append(o.line, p...)
}

func (o *observer) handleLine(line []byte) {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	switch {
	case len(line) == 0:
		o.event = "" // end of one event
	case bytes.HasPrefix(line, []byte("data:")):
		o.handleData(bytes.TrimSpace(line[5:]))
	case bytes.HasPrefix(line, []byte("event:")):
		o.event = string(bytes.TrimSpace(line[6:]))
	}
}

func (o *observer) handleData(data []byte) {
	if bytes.Equal(data, []byte("[DONE]")) {
		o.done = true
		return
	}
	if !validJSON(data) { // depth-bounded: a provider can send anything
		if o.event == "error" && o.errMsg == "" {
			o.errMsg = string(data)
		}
		return
	}
	if e := gjson.GetBytes(data, "error"); (e.Exists() && e.Type != gjson.Null) || o.event == "error" {
		if o.errMsg == "" {
			o.errMsg = errorMessage(data, http.StatusInternalServerError)
		}
		return
	}
	res := gjson.GetManyBytes(data, "choices.0.finish_reason", "choices.0.delta.content")
	if f := res[0]; f.Type == gjson.String && f.Str != "" {
		o.finish = f.Str
	}
	if c := res[1]; c.Type == gjson.String && len(o.excerpt) < maxExcerpt {
		s := c.Str
		if room := maxExcerpt - len(o.excerpt); len(s) > room {
			s = s[:room]
		}
		o.excerpt = append(o.excerpt, s...)
	}
}

// completion reads the finish reason and answer of a captured
// non-streaming completion.
func (o *observer) completion() (finish, answer string) {
	if o.sse {
		return o.finish, string(o.excerpt)
	}
	if len(o.capture) >= o.captureMax || !validJSON(o.capture) {
		return "", ""
	}
	res := gjson.GetManyBytes(o.capture, "choices.0.finish_reason", "choices.0.message.content")
	return res[0].String(), res[1].String()
}
