// Package logline is slog's text or JSON handler with a faster way to
// write a line every request logs: [Handler.WriteLine] writes a record
// of plain values byte for byte as the slog handler would, without its
// general machinery (a handle state per line, a quoting check per rune, a
// JSON encoding per float). A record it cannot write so, it leaves to the
// slog handler.
package logline

import (
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
)

// Handler is the slog handler New makes (text or JSON, on w, at a
// level), and writes the lines given to WriteLine itself. A Handler
// derived by WithAttrs or WithGroup is the slog handler's, without
// WriteLine.
type Handler struct {
	slog.Handler
	w     io.Writer // the slog handler's writer too: one lock for both
	json  bool
	level slog.Leveler
}

// lockedWriter serializes the writes of the slog handler and of
// WriteLine to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// New returns slog.NewJSONHandler(w, opts) (json) or
// slog.NewTextHandler(w, opts) with WriteLine. WriteLine writes what
// opts allow it to write as slog would: with a ReplaceAttr or AddSource
// in opts, it leaves every line to the slog handler.
func New(w io.Writer, json bool, opts *slog.HandlerOptions) *Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	lw := &lockedWriter{w: w}
	h := &Handler{w: lw, json: json, level: opts.Level}
	if h.level == nil {
		h.level = slog.LevelInfo
	}
	if json {
		h.Handler = slog.NewJSONHandler(lw, opts)
	} else {
		h.Handler = slog.NewTextHandler(lw, opts)
	}
	if opts.ReplaceAttr != nil || opts.AddSource {
		h.w = nil
	}
	return h
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// WriteLine writes the line the slog handler writes for a record of t,
// level, msg and attrs, and reports true, when every attr is a plain
// one: a key and a string of printable ASCII other than '=', '"' and
// '\' (or empty), an integer, a finite float or a bool. Otherwise it
// writes nothing and reports false: log the record through the slog
// handler. A level below the handler's is written nowhere, and reported
// true.
func (h *Handler) WriteLine(t time.Time, level slog.Level, msg string, attrs []slog.Attr) bool {
	if h.w == nil || !plain(msg) {
		return false
	}
	if level < h.level.Level() {
		return true
	}
	bp := bufs.Get().(*[]byte)
	b, ok := h.appendLine((*bp)[:0], t, level, msg, attrs)
	if ok {
		_, _ = h.w.Write(b) // as slog's handlers, which return the error to a logger that drops it
	}
	if cap(b) <= 16<<10 {
		*bp = b
		bufs.Put(bp)
	}
	return ok
}

// appendLine appends the line to b; it reports false when an attr is
// not a plain one.
func (h *Handler) appendLine(b []byte, t time.Time, level slog.Level, msg string, attrs []slog.Attr) ([]byte, bool) {
	t = t.Round(0)
	if y := t.Year(); t.IsZero() || y < 0 || y >= 10000 {
		return b, false // no time, or one not written in RFC 3339's four digits
	}
	if h.json {
		b = append(b, `{"time":"`...)
		b = t.AppendFormat(b, time.RFC3339Nano)
		b = append(b, `","level":"`...)
		b = append(b, level.String()...)
		b = append(b, `","msg":"`...)
		b = append(b, msg...)
		b = append(b, '"')
	} else {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, t)
		b = append(b, " level="...)
		b = append(b, level.String()...)
		b = append(b, " msg="...)
		b = appendText(b, msg)
	}
	for _, a := range attrs {
		if a.Key == "" || !plain(a.Key) {
			return b, false
		}
		if h.json {
			b = append(b, `,"`...)
			b = append(b, a.Key...)
			b = append(b, `":`...)
		} else {
			b = append(b, ' ')
			b = append(b, a.Key...)
			b = append(b, '=')
		}
		v := a.Value
		switch v.Kind() {
		case slog.KindString:
			s := v.String()
			if !plain(s) {
				return b, false
			}
			if h.json {
				b = append(b, '"')
				b = append(b, s...)
				b = append(b, '"')
			} else {
				b = appendText(b, s)
			}
		case slog.KindInt64:
			b = strconv.AppendInt(b, v.Int64(), 10)
		case slog.KindUint64:
			b = strconv.AppendUint(b, v.Uint64(), 10)
		case slog.KindBool:
			b = strconv.AppendBool(b, v.Bool())
		case slog.KindFloat64:
			f := v.Float64()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return b, false
			}
			if h.json {
				// encoding/json's form, which slog's JSON handler uses:
				// 'f' between 1e-6 and 1e21.
				if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
					return b, false
				}
				b = strconv.AppendFloat(b, f, 'f', -1, 64)
			} else {
				b = strconv.AppendFloat(b, f, 'g', -1, 64)
			}
		default:
			return b, false
		}
	}
	if h.json {
		b = append(b, '}')
	}
	return append(b, '\n'), true
}

// plain reports whether s is written as it is by both handlers: printable
// ASCII other than '=', '"' and '\' (or empty, which the text handler
// quotes as "").
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return false
		}
	}
	return true
}

// plainByte says which bytes a plain string holds.
var plainByte = func() (t [256]bool) {
	for c := '!'; c <= '~'; c++ {
		t[c] = c != '=' && c != '"' && c != '\\'
	}
	return t
}()

// appendText appends a plain string as the text handler writes it.
func appendText(b []byte, s string) []byte {
	if s == "" {
		return append(b, `""`...)
	}
	return append(b, s...)
}

// appendRFC3339Millis appends t as the text handler writes a time:
// RFC 3339 with exactly three digits of milliseconds.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	// RFC3339Nano trims trailing zeros: a tenth of a millisecond added
	// keeps four digits, and the fourth is dropped.
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...)
}
