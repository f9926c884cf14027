package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

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
	// Room for one body of 200 KiB with the copies the proxy makes of it
	// (three times its size in all), not for two.
	h := newHarness(t, up.srv.URL, withOptions(func(o *Options) { o.MaxBodyBytesInFlight = 800 << 10 }))
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
	for h.srv.bodies.Held() != 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d bytes still held from the budget after every request ended", h.srv.bodies.Held())
		}
		runtime.Gosched()
	}
}

// TestARefusedBodyIsReadToItsEnd: a client still sending a body the
// budget has no room for reads the 503, in the error shape, once it has
// sent the whole body; the proxy does not close the connection under it
// (which resets it, and the client sees no answer). Sent on a raw
// connection, as curl or Python's http.client send: the whole body, then
// the read.
func TestARefusedBodyIsReadToItsEnd(t *testing.T) {
	arrived, answer := make(chan struct{}, 1), make(chan struct{})
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			arrived <- struct{}{}
			<-answer
		}
		okCompletion(w, r)
	})
	// Room for the held body of 300 KiB (its pooled buffer of 512 KiB and
	// two copies), not for the 8 MiB one.
	h := newHarness(t, up.srv.URL, withOptions(func(o *Options) { o.MaxBodyBytesInFlight = 2 << 20 }))
	release := sync.OnceFunc(func() { close(answer) })
	t.Cleanup(release)
	body := func(size int) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", size) + `"}]}`)
	}
	held := make(chan *http.Response, 1)
	go func() {
		held <- h.do(http.MethodPost, "/v1/chat/completions", body(300<<10), map[string]string{"X-Hold": "1"})
	}()
	select {
	case <-arrived:
	case res := <-held:
		t.Fatalf("the request to hold was answered %d", res.StatusCode)
	}

	conn, err := net.Dial("tcp", h.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	big := body(8 << 20)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(big))
	for len(big) > 0 {
		n := min(len(big), 64<<10)
		if _, err := conn.Write(big[:n]); err != nil {
			t.Fatalf("sending the body, %d bytes left: %v", len(big), err)
		}
		big = big[n:]
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assertOpenAIError(t, res, b, http.StatusServiceUnavailable)
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	release()
	res = <-held
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the held request: %d", res.StatusCode)
	}
	h.bodiesReleased()
}
