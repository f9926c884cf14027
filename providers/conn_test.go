package providers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"testing"
)

// onlyReader hides a reader's WriteTo, as the proxy's request bodies
// reach the connection (through io.LimitReader).
type onlyReader struct{ r io.Reader }

func (o *onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestProviderConnectionsCopyThroughPooledBuffers: a provider's plain
// connections are copyConns, kept alive, and bodies of every size (none,
// smaller than a pooled buffer, larger than several) arrive whole.
func TestProviderConnectionsCopyThroughPooledBuffers(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		w.Header().Set("X-Length", strconv.FormatInt(n, 10))
		w.Write(h.Sum(nil))
	}))
	defer up.Close()
	p, err := New(Config{Name: "a", Type: TypeOpenAI, BaseURL: up.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int{0, 1, 20 << 10, copyBufSize, 3*copyBufSize + 17}
	for i := range 2 * len(sizes) {
		size, held := sizes[i%len(sizes)], i >= len(sizes)
		body := make([]byte, size)
		for j := range body {
			body[j] = byte(j*7 + size)
		}
		var conn net.Conn
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { conn, reused = info.Conn, info.Reused },
		})
		// A body read through Read only, and one held in memory whole
		// (written from where it is).
		var rd io.Reader = &onlyReader{bytes.NewReader(body)}
		if held {
			rd = bytes.NewReader(body)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://ignored/chat/completions", rd)
		req.ContentLength = int64(size)
		if size == 0 {
			req.Body = http.NoBody
		}
		res, err := p.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		want := sha256.Sum256(body)
		if res.Header.Get("X-Length") != strconv.Itoa(size) || !bytes.Equal(got, want[:]) {
			t.Fatalf("body of %d bytes (held %v): provider read %s bytes, sum %x", size, held, res.Header.Get("X-Length"), got)
		}
		if _, ok := conn.(*copyConn); !ok {
			t.Fatalf("body of %d bytes: connection is a %T", size, conn)
		}
		if i > 0 && !reused {
			t.Errorf("body of %d bytes: a new connection", size)
		}
	}
}

// discardConn is a connection that takes every write.
type discardConn struct {
	net.Conn
	n, writes int
}

func (d *discardConn) Write(p []byte) (int, error) { d.n += len(p); d.writes++; return len(p), nil }

// TestCopyConnWritesAHeldBodyOnce: a body held in memory whole goes out in
// one write from where it is; one longer than the transport's limit goes
// through the buffers, and no further than the limit.
func TestCopyConnWritesAHeldBodyOnce(t *testing.T) {
	body := bytes.Repeat([]byte("y"), 5*copyBufSize+3)
	d := &discardConn{}
	c := &copyConn{d}
	lr := &io.LimitedReader{R: bytes.NewReader(body), N: int64(len(body))}
	if n, err := c.ReadFrom(lr); err != nil || n != int64(len(body)) || lr.N != 0 {
		t.Fatalf("ReadFrom = %d, %v; %d left of the limit", n, err, lr.N)
	}
	if d.writes != 1 || d.n != len(body) {
		t.Fatalf("a held body went out in %d writes of %d bytes, want one of %d", d.writes, d.n, len(body))
	}
	*d = discardConn{}
	limit := int64(2*copyBufSize + 1)
	lr = &io.LimitedReader{R: bytes.NewReader(body), N: limit}
	if n, err := c.ReadFrom(lr); err != nil || n != limit {
		t.Fatalf("ReadFrom past the limit = %d, %v; want %d", n, err, limit)
	}
	if d.n != int(limit) || d.writes != 3 {
		t.Fatalf("a body longer than its limit: %d bytes in %d writes, want %d in 3", d.n, d.writes, limit)
	}
}

// TestCopyConnReadFromAllocatesNothing: a body of known length (behind
// io.LimitReader, as the transport sends it) is written without a buffer
// of its own; net's ReadFrom allocates one per body.
func TestCopyConnReadFromAllocatesNothing(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 20<<10)
	d := &discardConn{}
	c := &copyConn{d}
	rd := bytes.NewReader(body)
	or := &onlyReader{rd}
	lr := &io.LimitedReader{}
	allocs := testing.AllocsPerRun(100, func() {
		rd.Reset(body)
		*lr = io.LimitedReader{R: or, N: int64(len(body))}
		n, err := c.ReadFrom(lr)
		if err != nil || n != int64(len(body)) {
			t.Fatalf("ReadFrom: %d, %v", n, err)
		}
	})
	if allocs != 0 {
		t.Errorf("ReadFrom allocated %v times per body", allocs)
	}
	if d.n != 101*len(body) {
		t.Errorf("wrote %d bytes, want %d", d.n, 101*len(body))
	}
}
