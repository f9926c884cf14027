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
	for i, size := range []int{0, 1, 20 << 10, copyBufSize, 3*copyBufSize + 17} {
		body := make([]byte, size)
		for j := range body {
			body[j] = byte(j*7 + size)
		}
		var conn net.Conn
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { conn, reused = info.Conn, info.Reused },
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://ignored/chat/completions", &onlyReader{bytes.NewReader(body)})
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
			t.Fatalf("body of %d bytes: provider read %s bytes, sum %x", size, res.Header.Get("X-Length"), got)
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
	n int
}

func (d *discardConn) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

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
