package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

var errBodyTooLarge = &apiError{Status: http.StatusRequestEntityTooLarge, Message: "Request body too large.", Type: "invalid_request_error", Code: "request_too_large"}

// The buffer a body's first bytes are read into holds at most
// firstBodyBuf bytes (unknownBodyBuf for a body of unknown length); it
// then doubles as bytes arrive.
const (
	firstBodyBuf   = 64 << 10
	unknownBodyBuf = 16 << 10
)

// errOverBudget stops readGrowing when the budget refuses a buffer.
var errOverBudget = errors.New("proxy: request bodies in flight past the bound")

// readBody reads the request body, bounded by MaxBodyBytes. With a lease,
// it reads into pooled buffers and the one holding the body goes back with
// the lease. Its buffers grow with the bytes that arrive, never on the
// strength of the Content-Length alone, and take their size from the
// server's budget of body bytes in flight (given back with the lease, or
// at the end of the request): past it the answer is 503 with Retry-After.
func (s *Server) readBody(c echo.Context, lease *bodyLease) ([]byte, *apiError) {
	r := c.Request()
	if r.ContentLength > s.opts.MaxBodyBytes {
		return nil, errBodyTooLarge
	}
	limit := s.maxBodiesInFlight()
	var hold *bodyHold
	var grow func(n int) []byte
	var free func(b []byte)
	var last *[]byte // the pooled buffer grow gave last
	if lease != nil {
		hold = &lease.held
		grow = func(n int) []byte {
			p := getBuf(n)
			if !hold.take(&s.bodies, int64(cap(*p)), limit) {
				putBuf(p)
				return nil
			}
			last = p
			return *p
		}
		free = func(b []byte) {
			hold.give(int64(cap(b)))
			putBuf(&b)
		}
	} else {
		hold = &bodyHold{}
		context.AfterFunc(r.Context(), hold.release)
		grow = func(n int) []byte {
			if !hold.take(&s.bodies, int64(n), limit) {
				return nil
			}
			return make([]byte, 0, n)
		}
		free = func(b []byte) { hold.give(int64(cap(b))) }
	}
	body, err := readGrowing(http.MaxBytesReader(c.Response(), r.Body, s.opts.MaxBodyBytes), r.ContentLength, grow, free)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, errBodyTooLarge
		case errors.Is(err, errOverBudget):
			s.log.Debug("request bodies in flight past the bound; refused", "max", limit)
			c.Response().Header().Set("Retry-After", bodyRetryAfter)
			return nil, errBodiesInFlight
		}
		return nil, errBadRequest("could not read request body")
	}
	if lease != nil {
		*last = body // the buffer holding the body goes back with the lease
		lease.keep(last)
	}
	return body, nil
}

// readGrowing reads r to its end. Its buffer starts with room for
// firstBodyBuf bytes at most, fewer when length (-1: unknown) says so, and
// doubles when full, never much past length when it is known: what it
// holds follows the bytes that arrived. grow returns an empty buffer with
// room for at least n bytes, or nil to stop with errOverBudget; free takes
// back a buffer readGrowing no longer uses (on an error, the last one too).
func readGrowing(r io.Reader, length int64, grow func(n int) []byte, free func([]byte)) ([]byte, error) {
	n := unknownBodyBuf
	if length >= 0 {
		// Room past length to see the end without growing.
		n = int(min(length+bytes.MinRead, firstBodyBuf))
	}
	buf := grow(n)
	if buf == nil {
		return nil, errOverBudget
	}
	for {
		if len(buf) == cap(buf) {
			next := 2 * cap(buf)
			if length >= 0 && length+bytes.MinRead < int64(next) {
				next = int(max(length, int64(len(buf)))) + bytes.MinRead
			}
			nb := grow(next)
			if nb == nil {
				free(buf)
				return nil, errOverBudget
			}
			nb = append(nb, buf...)
			free(buf)
			buf = nb
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			free(buf)
			return nil, err
		}
	}
}

// limitedBody forwards a streamed request body and fails once it passes
// the body limit, remembering that it did (the answer is then 413).
type limitedBody struct {
	r       io.Reader
	left    int64
	tripped bool
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// Probe for one more byte: a body of exactly the limit is fine.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			l.tripped = true
			return 0, errors.New("request body too large")
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}
