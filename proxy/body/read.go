// Package body reads and holds request bodies for the proxy: one body
// bounded in bytes (413 past it), every body held at once bounded too (503
// with Retry-After past it), buffers that grow with the bytes that arrive
// rather than with what Content-Length announces, size-classed free lists
// of buffers handed back through a [Lease] once nothing can read them, and
// readers that let go of a body as soon as it is sent.
//
// # Imports
//
// It imports proxy/wire (for the errors it answers with) and the standard
// library only.
package body

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/scarproxy/scarproxy/proxy/wire"
)

var ErrTooLarge = &wire.Error{Status: http.StatusRequestEntityTooLarge, Message: "Request body too large.", Type: "invalid_request_error", Code: "request_too_large"}

// The buffer a body's first bytes are read into holds at most
// firstBodyBuf bytes (unknownBodyBuf for a body of unknown length); it
// then doubles as bytes arrive.
const (
	firstBodyBuf   = 64 << 10
	unknownBodyBuf = 16 << 10
)

// errOverBudget stops readGrowing when the budget refuses a buffer.
var errOverBudget = errors.New("proxy: request bodies in flight past the bound")

// Reader reads request bodies within two bounds: the size of one body
// and the bytes of every body held at once. Build it with [NewReader].
type Reader struct {
	maxBytes    int64
	maxInFlight int64
	budget      Budget
}

// Defaults of [NewReader].
const (
	DefaultMaxBytes         = 32 << 20
	DefaultMaxBytesInFlight = 256 << 20
)

// NewReader returns a reader of bodies of at most maxBytes each, holding
// at most maxInFlight bytes of bodies at once; zero or less means the
// default.
func NewReader(maxBytes, maxInFlight int64) *Reader {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxBytesInFlight
	}
	return &Reader{maxBytes: maxBytes, maxInFlight: maxInFlight}
}

// MaxBytes is the bound on one body.
func (rd *Reader) MaxBytes() int64 { return rd.maxBytes }

// Held returns the bytes of body buffers held now, across requests.
func (rd *Reader) Held() int64 { return rd.budget.held.Load() }

// Read reads the request body, bounded by the reader's MaxBytes. With a
// lease, it reads into pooled buffers and the one holding the body goes
// back with the lease. Its buffers grow with the bytes that arrive, never
// on the strength of the Content-Length alone, and take their size from
// the budget of body bytes in flight (given back with the lease, or at
// the end of the request): past it the answer is [ErrInFlight], and w's
// headers say Retry-After. With a lease, a body takes workCopies more
// times its size from the budget, for the copies made of it before it is
// sent on. A body refused part way is read to its end (at most MaxBytes)
// and dropped, so that the client, still sending, reads the answer.
func (rd *Reader) Read(w http.ResponseWriter, r *http.Request, lease *Lease) ([]byte, *wire.Error) {
	if r.ContentLength > rd.maxBytes {
		return nil, ErrTooLarge
	}
	limit := rd.maxInFlight
	var hold *budgetHold
	var grow func(n int) []byte
	var free func(b []byte)
	var last *[]byte // the pooled buffer grow gave last
	if lease != nil {
		hold = &lease.held
		grow = func(n int) []byte {
			p := getBuf(n)
			if !hold.take(&rd.budget, int64(cap(*p)), limit) {
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
		hold = &budgetHold{}
		context.AfterFunc(r.Context(), hold.release)
		grow = func(n int) []byte {
			if !hold.take(&rd.budget, int64(n), limit) {
				return nil
			}
			return make([]byte, 0, n)
		}
		free = func(b []byte) { hold.give(int64(cap(b))) }
	}
	src := http.MaxBytesReader(w, r.Body, rd.maxBytes)
	body, err := readGrowing(src, r.ContentLength, grow, free)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, ErrTooLarge
		case errors.Is(err, errOverBudget):
			// Read the rest of the body, keeping none of it: a server
			// that answers while the client is still sending, then
			// closes, resets the connection, and the client never reads
			// the 503.
			discard(src)
			w.Header().Set("Retry-After", bodyRetryAfter)
			return nil, ErrInFlight
		}
		return nil, wire.BadRequest("could not read request body")
	}
	if lease != nil {
		*last = body // the buffer holding the body goes back with the lease
		lease.Keep(last)
		// A body the proxy rewrites holds more memory than its buffer:
		// the copy sent on, with the blocks, and the copies the reader of
		// its format makes of the messages it reads. Both are as large as
		// the body at most, and are held until the lease goes.
		if !hold.take(&rd.budget, workCopies*int64(len(body)), limit) {
			w.Header().Set("Retry-After", bodyRetryAfter)
			return nil, ErrInFlight
		}
	}
	return body, nil
}

// workCopies is how many copies of its size a body read with a lease
// takes from the budget besides its buffer (see Read).
const workCopies = 2

// discard reads r to its end into a small buffer and drops what it reads.
func discard(r io.Reader) {
	var buf [32 << 10]byte
	_, _ = io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf[:])
}

// readGrowing reads r to its end. Its buffer starts with room for
// firstBodyBuf bytes at most, fewer when length (-1: unknown) says so, and
// doubles when full, never much past length when it is known; once a
// quarter of a known length arrived, it takes room for all of it (a long
// body is copied from buffer to buffer once less): what it holds follows
// the bytes that arrived, four times them at most. grow returns an empty
// buffer with room for at least n bytes, or nil to stop with
// errOverBudget; free takes back a buffer readGrowing no longer uses (on
// an error, the last one too).
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
			if length >= 0 && (length+bytes.MinRead < int64(next) || 4*int64(len(buf)) >= length) {
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

// Limited forwards a streamed request body and fails once it passes
// the body limit, remembering that it did (the answer is then 413).
type Limited struct {
	r       io.Reader
	left    int64
	tripped bool
}

func (l *Limited) Read(p []byte) (int, error) {
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

// NewLimited returns a reader of r that fails once more than max bytes
// were read from it.
func NewLimited(r io.Reader, max int64) *Limited { return &Limited{r: r, left: max} }

// Tripped reports whether the body passed its bound.
func (l *Limited) Tripped() bool { return l.tripped }
