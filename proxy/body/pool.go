package body

import (
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
)

// The body of a chat completion is read into a buffer and, when rewritten,
// copied into a second one: two allocations of the body's size on every
// request, which make most of the proxy's garbage. Both come from size-
// classed free lists instead, and go back when nothing can read them any
// more:
// the handler has returned and the transport has closed every reader of
// the body it was given (net/http may close a request body after
// RoundTrip returns, so the handler alone cannot tell).

// Pooled sizes: powers of two from 16 KiB to 4 MiB (a long agent
// conversation passes 1 MiB: allocated afresh, its two buffers made most
// of the garbage of its requests). Larger bodies are allocated and left
// to the garbage collector. Each size keeps at most freePerClass buffers,
// and at most freeClassBytes of them: enough for the requests a busy
// proxy has in flight, and a bound on what a burst (a thousand streams
// opening at once) leaves behind; a sync.Pool would keep every buffer of
// the burst until the next two collections.
const (
	minPoolShift   = 14
	maxPoolShift   = 22
	freePerClass   = 64
	freeClassBytes = 32 << 20
)

var bodyFree = func() (f [maxPoolShift - minPoolShift + 1]chan *[]byte) {
	for i := range f {
		f[i] = make(chan *[]byte, min(freePerClass, freeClassBytes>>(minPoolShift+i)))
	}
	return f
}()

// getBuf returns an empty buffer with room for at least n bytes.
func getBuf(n int) *[]byte {
	shift := minPoolShift
	if n > 1<<minPoolShift {
		shift = bits.Len(uint(n - 1))
	}
	if shift > maxPoolShift {
		b := make([]byte, 0, n)
		return &b
	}
	select {
	case p := <-bodyFree[shift-minPoolShift]:
		*p = (*p)[:0]
		return p
	default:
		b := make([]byte, 0, 1<<shift)
		return &b
	}
}

// putBuf keeps b for reuse if it is of a pooled size and its size has room.
func putBuf(b *[]byte) {
	c := cap(*b)
	if c < 1<<minPoolShift || c > 1<<maxPoolShift || c&(c-1) != 0 {
		return
	}
	select {
	case bodyFree[bits.Len(uint(c))-1-minPoolShift] <- b:
	default:
	}
}

// Lease counts who may still read a request's pooled buffers: the
// handler, and each body reader handed to the transport. The last to let
// go returns the buffers to their pools. A reader the transport never
// closes only means the buffers are left to the garbage collector.
type Lease struct {
	refs atomic.Int32
	mu   sync.Mutex
	bufs []*[]byte
	held budgetHold // what readBody took from the body budget: given back on the last drop
}

// NewLease returns a lease held once, by the handler.
func NewLease() *Lease {
	l := &Lease{}
	l.refs.Store(1)
	return l
}

// buf returns a pooled buffer with room for n bytes, returned with the lease.
func (l *Lease) Buf(n int) *[]byte {
	b := getBuf(n)
	l.mu.Lock()
	l.bufs = append(l.bufs, b)
	l.mu.Unlock()
	return b
}

// keep adds a buffer of the pools, got elsewhere, to those returned with the lease.
func (l *Lease) Keep(b *[]byte) {
	l.mu.Lock()
	l.bufs = append(l.bufs, b)
	l.mu.Unlock()
}

func (l *Lease) Hold() { l.refs.Add(1) }

func (l *Lease) Drop() {
	if l.refs.Add(-1) != 0 {
		return
	}
	l.mu.Lock()
	bufs := l.bufs
	l.bufs = nil
	l.mu.Unlock()
	for _, b := range bufs {
		putBuf(b)
	}
	l.held.release()
}

// The request sent to a provider stays referenced by its response until the
// answer ends; a stream can last minutes. DrainReader and heldBody let go of
// the request body's bytes once they are sent and the provider answered, so
// an open stream does not keep its (rewritten) request body in memory.

// DrainReader reads b once, dropping it at the end. Close lets go of b and
// of the reader's hold on lease (nil for a body that is not pooled); a
// read after Close finds nothing, so pooled bytes are never read once they
// may have gone back to their pool.
type DrainReader struct {
	mu     sync.Mutex
	b      []byte
	lease  *Lease
	closed bool
}

func NewDrainReader(b []byte, lease *Lease) *DrainReader {
	if lease != nil {
		lease.Hold()
	}
	return &DrainReader{b: b, lease: lease}
}

func (r *DrainReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.b) == 0 {
		r.b = nil
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	if len(r.b) == 0 {
		r.b = nil
	}
	return n, nil
}

// Len returns how many bytes are left to read.
func (r *DrainReader) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.b)
}

// WriteTo writes the rest of b in one write, as bytes.Reader does.
func (r *DrainReader) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.b
	r.b = nil
	n, err := w.Write(b)
	return int64(n), err
}

func (r *DrainReader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.b = nil
		if r.lease != nil {
			r.lease.Drop()
		}
	}
	return nil
}
