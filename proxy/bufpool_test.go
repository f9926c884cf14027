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
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/tidwall/gjson"
)

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
		// The user's text, without the blocks placed after it.
		got[tag] = wire.StripFramed(gjson.GetBytes(b, "messages.#(role==\"user\").content").String())
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
