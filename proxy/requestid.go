package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"

	"github.com/labstack/echo/v4"
)

// HeaderRequestID names a request: the client's, when it sends a valid
// one (see validRequestID), else one the proxy makes. The answer carries
// it, the provider receives it, and every log line of the request says it
// (request_id). A provider's own X-Request-Id does not reach the client:
// the access line logs it as provider_request_id.
const HeaderRequestID = "X-Request-Id"

// requestIDKey holds a request's id in its context.
type requestIDKey struct{}

// requestIDOf returns the request id ctx carries, or "".
func requestIDOf(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// maxRequestID bounds the length of a client's request id.
const maxRequestID = 128

// validRequestID reports whether a client's request id is kept: 1 to 128
// characters of letters, digits and -_.:@/+= (UUIDs, hex, base64 and the
// ids of other proxies), nothing a log line would have to quote.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestID {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '@' || c == '/' || c == '+' || c == '=':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns a random request id: 32 hex digits.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// requestID gives every request its id (HeaderRequestID): in the answer's
// headers, in the request's headers the providers receive, and in its
// context for the log lines.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		id := r.Header.Get(HeaderRequestID)
		if !validRequestID(id) {
			id = newRequestID()
		}
		r.Header.Set(HeaderRequestID, id)
		c.Response().Header().Set(HeaderRequestID, id)
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id)))
		return next(c)
	}
}

// requestIDHandler adds the request id of the context a line is logged
// with (the ...Context methods of slog.Logger) to the line, as
// request_id.
type requestIDHandler struct{ slog.Handler }

// withRequestIDs returns l logging request ids (see requestIDHandler).
func withRequestIDs(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(requestIDHandler); ok {
		return l
	}
	return slog.New(requestIDHandler{l.Handler()})
}

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := requestIDOf(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
