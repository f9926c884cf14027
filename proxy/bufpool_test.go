package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/tidwall/gjson"
)

func TestGetBufSizes(t *testing.T) {
	for _, n := range []int{0, 1, 16 << 10, 16<<10 + 1, 100 << 10, 1 << 20, 1<<20 + 1, 5 << 20} {
		b := getBuf(n)
		if len(*b) != 0 || cap(*b) < n {
			t.Errorf("getBuf(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		pooled := cap(*b)&(cap(*b)-1) == 0 && cap(*b) <= 1<<maxPoolShift
		if n <= 1<<maxPoolShift && !pooled {
			t.Errorf("getBuf(%d) = cap %d, not a pooled size", n, cap(*b))
		}
		putBuf(b)
	}
	odd := make([]byte, 0, 20000)
	putBuf(&odd) // not a class size: dropped, not pooled
	if b := getBuf(16 << 10); cap(*b) == 20000 {
		t.Error("a buffer of a size that is not a class came back from the pool")
	}
}

// The lease returns its buffers only when the handler and every reader the
// transport was given are done, and a closed reader reads nothing more.
func TestBodyLease(t *testing.T) {
	l := newBodyLease()
	b := l.buf(100)
	*b = append(*b, "payload"...)
	r1 := newDrainReader(*b, l)
	r2 := newDrainReader(*b, l) // a replay (GetBody)
	l.drop()                    // the handler returns first
	if got := l.refs.Load(); got != 2 {
		t.Fatalf("refs %d after the handler let go, want 2 (two open readers)", got)
	}
	if p, _ := io.ReadAll(r1); string(p) != "payload" {
		t.Fatalf("read %q", p)
	}
	r1.Close()
	r1.Close() // twice is once
	if got := l.refs.Load(); got != 1 {
		t.Fatalf("refs %d, want 1", got)
	}
	r2.Close()
	if l.refs.Load() != 0 || l.bufs != nil {
		t.Fatalf("refs %d, %d buffers kept after the last reader closed", l.refs.Load(), len(l.bufs))
	}
	if n, err := r2.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("Read after Close = %d, %v", n, err)
	}
	if n, _ := r2.WriteTo(io.Discard); n != 0 {
		t.Fatalf("WriteTo after Close wrote %d bytes", n)
	}
}

// TestPooledBodiesAreNeverMixedUp sends many different requests at once
// through the proxy, rewritten (memory on) and not, and checks that the
// provider received each one's own bytes: a buffer reused too early would
// send one request's bytes in another's body.
func TestPooledBodiesAreNeverMixedUp(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{} // request tag -> the user message the provider saw
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !gjson.ValidBytes(b) {
			http.Error(w, "invalid JSON", http.StatusBadRequest)
			return
		}
		tag := r.Header.Get("X-Test-Tag")
		mu.Lock()
		got[tag] = gjson.GetBytes(b, "messages.#(role==\"user\").content").String()
		mu.Unlock()
		okCompletion(w, r)
	})
	h := newHarness(t, up.srv.URL)
	// Two failed tool results make a guard block, so later requests of the
	// session are rewritten.
	session := map[string]string{tenant.HeaderSession: "pool"}
	for _, id := range []string{"a", "b"} {
		h.chat(`{"model":"m","messages":[{"role":"user","content":"warm up"},{"role":"tool","tool_call_id":"`+id+`","content":"Traceback (most recent call last):\nKeyError: 'x'"}]}`, session)
	}
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				tag := fmt.Sprintf("w%d-r%d", w, i)
				// Sizes vary around the pool's classes (16 and 32 KiB).
				pad := strings.Repeat(string(rune('a'+w)), (w*4099+i*1021)%40000)
				body := `{"model":"m","messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"` + tag + pad + `"}]}`
				res := h.do(http.MethodPost, "/v1/chat/completions", []byte(body), map[string]string{"X-Test-Tag": tag, tenant.HeaderSession: "pool"})
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("%s: status %d", tag, res.StatusCode)
					continue
				}
				mu.Lock()
				seen := got[tag]
				mu.Unlock()
				if seen != tag+pad {
					errs <- fmt.Errorf("%s: the provider saw %.40q... (%d bytes), want the request's own %d bytes", tag, seen, len(seen), len(tag+pad))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !bytes.Contains(up.last(t).Body, []byte("REPEAT FAILURE GUARD")) {
		t.Error("requests were not rewritten: the test did not exercise the rewrite buffers")
	}
}
