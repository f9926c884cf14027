package providers

import (
	"context"
	"io"
	"net"
	"sync"
)

// copyConn is a plain connection to a provider whose ReadFrom copies
// through pooled buffers.
//
// The transport writes a request body of known length through
// io.LimitReader, which hides the body's own WriteTo, and then through the
// connection's ReadFrom; net.TCPConn's, finding nothing to splice, makes a
// new buffer of up to 32 KB for every request (a third of the bytes the
// proxy allocated per request before this type). A TLS connection is the
// transport's own tls.Conn, which does not reach here; HTTP/2 writes bodies
// through buffers of its own.
type copyConn struct{ net.Conn }

// copyBufSize is the size of the pooled buffers: net's own (io.Copy's)
// size, so that a body is written in the same writes as before.
const copyBufSize = 32 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// heldBody is a request body held in memory whole (the proxy's, and
// bytes.Reader): it says how much is left and writes it in one write.
type heldBody interface {
	Len() int
	io.WriterTo
}

// ReadFrom copies r to the connection. A body held in memory whole, behind
// the transport's io.LimitReader, is written from where it is, in one
// write: copying it through a buffer cost a copy of every byte and a
// system call per 32 KB (a 1 MB conversation, 32 of them).
func (c *copyConn) ReadFrom(r io.Reader) (int64, error) {
	if lr, ok := r.(*io.LimitedReader); ok {
		if h, ok := lr.R.(heldBody); ok && int64(h.Len()) <= lr.N {
			n, err := h.WriteTo((*connWriter)(c))
			lr.N -= n
			return n, err
		}
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	// The connection is passed as a plain writer: io.CopyBuffer would
	// otherwise call this ReadFrom again.
	return io.CopyBuffer((*connWriter)(c), r, *bp)
}

// connWriter is a copyConn without its ReadFrom.
type connWriter copyConn

func (w *connWriter) Write(p []byte) (int, error) { return w.Conn.Write(p) }

// dialCopyConns wraps what dial returns in a copyConn.
func dialCopyConns(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &copyConn{conn}, nil
	}
}
