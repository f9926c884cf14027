package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

var errBodyTooLarge = &apiError{Status: http.StatusRequestEntityTooLarge, Message: "Request body too large.", Type: "invalid_request_error", Code: "request_too_large"}

// readBody reads the request body, bounded by MaxBodyBytes. With a lease,
// it reads into a pooled buffer that goes back with the lease.
func (s *Server) readBody(c echo.Context, lease *bodyLease) ([]byte, *apiError) {
	r := c.Request()
	if r.ContentLength > s.opts.MaxBodyBytes {
		return nil, errBodyTooLarge
	}
	var buf *bytes.Buffer
	switch n := int(r.ContentLength) + bytes.MinRead; {
	case lease != nil:
		buf = bytes.NewBuffer(*lease.buf(n))
	case n > bytes.MinRead:
		buf = bytes.NewBuffer(make([]byte, 0, n))
	default:
		buf = new(bytes.Buffer)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(c.Response(), r.Body, s.opts.MaxBodyBytes))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errBodyTooLarge
		}
		return nil, errBadRequest("could not read request body")
	}
	return body, nil
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
