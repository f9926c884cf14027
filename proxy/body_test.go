package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/labstack/echo/v4"
)

// readBodyOf runs readBody on a request with the given body and announced
// length, with a lease or without.
func readBodyOf(t *testing.T, s *Server, body io.Reader, length int64, pooled bool) ([]byte, *apiError, *bodyLease) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", body)
	req.ContentLength = length
	c := echo.New().NewContext(req, httptest.NewRecorder())
	var lease *bodyLease
	if pooled {
		lease = newBodyLease()
	}
	b, aerr := s.readBody(c, lease)
	return b, aerr, lease
}

// TestReadBodyDoesNotTrustContentLength: a request announcing 32 MiB and
// sending 10 bytes gets a buffer for what arrived, not for what it said.
func TestReadBodyDoesNotTrustContentLength(t *testing.T) {
	h := newHarness(t, "http://127.0.0.1:1")
	for _, pooled := range []bool{false, true} {
		t.Run(fmt.Sprint("pooled=", pooled), func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			body := io.MultiReader(strings.NewReader("0123456789"), iotest.ErrReader(io.ErrUnexpectedEOF))
			_, aerr, lease := readBodyOf(t, h.srv, body, 32<<20, pooled)
			runtime.ReadMemStats(&after)
			if aerr == nil || aerr.Status != http.StatusBadRequest {
				t.Fatalf("a body cut short: %v", aerr)
			}
			if lease != nil {
				lease.drop()
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Fatalf("reading 10 bytes of an announced 32 MiB allocated %d bytes", got)
			}
		})
	}
}

// TestReadBodyReadsEveryByte: whatever the body's size and whether its
// length is known, readBody returns it whole, holding at most about twice
// its size.
func TestReadBodyReadsEveryByte(t *testing.T) {
	h := newHarness(t, "http://127.0.0.1:1")
	for _, size := range []int{0, 1, 511, 512, 513, firstBodyBuf - 1, firstBodyBuf, firstBodyBuf + 512, firstBodyBuf + 513, 200 << 10, 1<<20 + 3, 3 << 20} {
		for _, known := range []bool{true, false} {
			for _, pooled := range []bool{false, true} {
				name := fmt.Sprintf("%d/known=%v/pooled=%v", size, known, pooled)
				want := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
				length := int64(size)
				if !known {
					length = -1
				}
				// One byte per read at the start, as a slow client sends.
				body := io.MultiReader(iotest.OneByteReader(bytes.NewReader(want[:min(size, 3)])), bytes.NewReader(want[min(size, 3):]))
				before := h.srv.bodies.held.Load()
				got, aerr, lease := readBodyOf(t, h.srv, body, length, pooled)
				if aerr != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s: read %d bytes (%v), want %d", name, len(got), aerr, size)
				}
				if limit := 2*size + unknownBodyBuf + 2*bytes.MinRead; cap(got) > limit && cap(got) > 1<<minPoolShift {
					t.Errorf("%s: a buffer of %d bytes for %d", name, cap(got), size)
				}
				if lease != nil {
					lease.drop()
					if held := h.srv.bodies.held.Load(); held != before {
						t.Fatalf("%s: %d bytes still held from the budget once the lease is dropped", name, held-before)
					}
				}
			}
		}
	}
}

// TestBodiesInFlightAreBounded: while one request's body is held (its
// provider has not answered), another that would take the bodies held
// past MaxBodyBytesInFlight gets 503 with Retry-After, in the error shape;
// once the first is done, the same request goes through.
func TestBodiesInFlightAreBounded(t *testing.T) {
	arrived, answer := make(chan struct{}, 1), make(chan struct{})
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "chat") && r.Header.Get("X-Hold") != "" {
			arrived <- struct{}{}
			<-answer
		}
		okCompletion(w, r)
	})
	// Room for one body of 200 KiB while it is read (its buffer doubles as
	// it arrives: at most about twice its size at once), not for two.
	h := newHarness(t, up.srv.URL, withOptions(func(o *Options) { o.MaxBodyBytesInFlight = 400 << 10 }))
	release := sync.OnceFunc(func() { close(answer) })
	t.Cleanup(release) // before the harness's: a failed test does not leave the request waiting
	big := func(kind string) []byte {
		pad := strings.Repeat("x", 200<<10)
		return []byte(`{"model":"m","input":"` + kind + `","messages":[{"role":"user","content":"` + pad + `"}]}`)
	}
	held := make(chan *http.Response, 1)
	go func() {
		held <- h.do(http.MethodPost, "/v1/chat/completions", big("held"), map[string]string{"X-Hold": "1"})
	}()
	<-arrived // the proxy has read the first body and holds it
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		res := h.do(http.MethodPost, path, big("refused"), nil)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assertOpenAIError(t, res, b, http.StatusServiceUnavailable)
		if res.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: 503 without Retry-After", path)
		}
	}
	release()
	res := <-held
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the held request: %d", res.StatusCode)
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		h.bodiesReleased()
		res := h.do(http.MethodPost, path, big("again"), nil)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s once the first body is let go: %d", path, res.StatusCode)
		}
	}
	h.bodiesReleased()
}

// bodiesReleased waits until every request has ended and given its body
// bytes back to the budget: the transport lets go of a body, and the end
// of a request is seen, a moment after the answer. It bounds the wait and
// asserts no duration.
func (h *harness) bodiesReleased() {
	h.t.Helper()
	h.inflight.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for h.srv.bodies.held.Load() != 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d bytes still held from the budget after every request ended", h.srv.bodies.held.Load())
		}
		runtime.Gosched()
	}
}
