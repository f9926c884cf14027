package body

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/scarproxy/scarproxy/proxy/wire"
)

// bodyRetryAfter is the Retry-After, in seconds, of a request refused for
// want of room for its body: bodies in flight are read and sent on within
// moments.
const bodyRetryAfter = "1"

// ErrInFlight answers a request whose body would take the bytes of
// request bodies the server holds past MaxBodyBytesInFlight.
var ErrInFlight = &wire.Error{
	Status:  http.StatusServiceUnavailable,
	Message: "The proxy is holding too many request bodies at once. Retry in a moment.",
	Type:    "server_error",
	Code:    "overloaded",
}

// Budget counts the bytes of buffers that hold request bodies, across
// every request of the server, so that many large bodies arriving at once
// (or many that announce a large size) cannot exhaust memory: a request
// that would go past the bound is refused (503, Retry-After) instead. A
// body takes from the budget as its buffers grow, that is as its bytes
// arrive, never on the strength of its Content-Length alone.
type Budget struct{ held atomic.Int64 }

// take reserves n bytes unless that would pass max.
func (b *Budget) take(n, max int64) bool {
	for {
		held := b.held.Load()
		if held+n > max {
			return false
		}
		if b.held.CompareAndSwap(held, held+n) {
			return true
		}
	}
}

// budgetHold is what one request's body took from the budget. It is given
// back once, by release, when the buffers are let go: with the body's lease
// for a pooled body, at the end of the request otherwise. After release a
// budgetHold takes nothing more. Its zero value holds nothing.
type budgetHold struct {
	mu       sync.Mutex
	budget   *Budget
	n        int64
	released bool
}

// take reserves n more bytes from budget, unless that would pass max or
// the hold was released.
func (h *budgetHold) take(budget *Budget, n, max int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || !budget.take(n, max) {
		return false
	}
	h.budget = budget
	h.n += n
	return true
}

// give gives back n of the bytes held.
func (h *budgetHold) give(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n = min(n, h.n); n > 0 {
		h.n -= n
		h.budget.held.Add(-n)
	}
}

// release gives back everything held.
func (h *budgetHold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = true
	if h.n > 0 {
		h.budget.held.Add(-h.n)
		h.n = 0
	}
}
