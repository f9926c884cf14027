package store

import (
	"context"
	"sync"
	"time"
)

// flights shares reads of one value per key between concurrent callers
// (PostgreSQL's incident version: every request asks for its tenant's,
// and a storm of requests would otherwise queue one round trip each on
// the pool). A caller gets the result of a read that began after it
// called, so it sees every change committed before its call, as a read of
// its own would: the first caller reads at once; callers that arrive
// while a read is in flight wait for the next one, which starts when the
// current one ends and serves all of them. So at most one read per key is
// in flight, and a caller waits at most two reads (or until its ctx ends).
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
	// timeout bounds a read made for waiting callers: they may give up
	// (their ctx), the read goes on alone.
	timeout time.Duration
}

// flight is one key's read in flight, and the read its waiters wait for.
type flight struct {
	next *flightCall // nil: nobody waits
}

// flightCall is a read and, once done is closed, its result.
type flightCall struct {
	done chan struct{}
	v    int64
	err  error
}

// do returns the result of read (called with a ctx that ends within the
// caller's or, for a read made for waiting callers, within f.timeout) that
// began after do was called.
func (f *flights) do(ctx context.Context, key string, read func(context.Context) (int64, error)) (int64, error) {
	f.mu.Lock()
	fl, running := f.m[key]
	if !running {
		if f.m == nil {
			f.m = make(map[string]*flight)
		}
		fl = &flight{}
		f.m[key] = fl
		f.mu.Unlock()
		v, err := read(ctx)
		f.next(key, fl, read)
		return v, err
	}
	c := fl.next
	if c == nil {
		c = &flightCall{done: make(chan struct{})}
		fl.next = c
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.v, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// next starts the read the callers waiting on fl wait for, once a read of
// key ended; with nobody waiting, key has no read in flight any more.
func (f *flights) next(key string, fl *flight, read func(context.Context) (int64, error)) {
	f.mu.Lock()
	c := fl.next
	fl.next = nil
	if c == nil {
		delete(f.m, key)
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		c.v, c.err = read(ctx)
		cancel()
		close(c.done)
		f.next(key, fl, read)
	}()
}
