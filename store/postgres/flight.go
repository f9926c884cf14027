package postgres

import (
	"context"
	"sync"
	"time"
)

// flights shares reads of one value per key between callers (PostgreSQL's
// incident version: every request asks for its tenant's, and a storm of
// requests would otherwise queue one round trip each on the pool).
//
// The value only grows. A read that began at a time t and returned v says
// that v is at least every value committed before t. With maxAge zero, a
// caller gets the result of a read that began after it called, so it
// sees every change committed before its call, as a read of its own
// would: the first caller reads at once; callers that arrive while a
// read is in flight wait for the next one, which starts when the current
// one ends and serves all of them. So at most one read per key is in
// flight, and a caller waits at most two reads (or until its ctx ends).
//
// With maxAge set, a caller may instead get the newest result at once, if
// its read began at most maxAge before the call: it sees every change
// committed maxAge before its call. When that result is older than half
// of maxAge, the caller also starts a read in the background, so that
// while callers keep coming they find a result young enough and wait for
// none; only a caller that finds none (after a quiet spell, or while
// reads take longer than maxAge/2) waits as above. Changes made through
// the same store move the key at once (saw, forget), whatever maxAge.
type flights struct {
	// timeout bounds a read made for waiting callers or in the background:
	// they may give up (their ctx), the read goes on alone.
	timeout time.Duration
	maxAge  time.Duration
	now     func() time.Time

	mu      sync.Mutex
	m       map[string]*flight
	sweepAt int // len(m) at which idle keys are dropped
}

// flight is one key: its read in flight, the read its waiters wait for,
// and the newest result.
type flight struct {
	running bool        // a read is in flight
	next    *flightCall // nil: nobody waits
	// The newest result: v is at least every value committed before
	// began. gen counts forget calls; a read that began before one does
	// not count.
	v     int64
	began time.Time
	known bool
	gen   uint64
}

// flightCall is a read and, once done is closed, its result.
type flightCall struct {
	done    chan struct{}
	v       int64
	err     error
	callers int // how many callers joined it (under flights.mu)
}

func (f *flights) clock() time.Time {
	if f.now == nil {
		return time.Now()
	}
	return f.now()
}

// minSweep is the number of keys from which flights drops idle ones.
const minSweep = 1024

// do returns a value at least as new as every change committed before it
// was called (maxAge before, with maxAge set and a young enough result),
// from read (called with a ctx that ends within the caller's or, for a
// read made for waiting callers or in the background, within f.timeout).
func (f *flights) do(ctx context.Context, key string, read func(context.Context) (int64, error)) (int64, error) {
	now := f.clock()
	f.mu.Lock()
	fl := f.get(key, now)
	if f.maxAge > 0 && fl.known && now.Sub(fl.began) <= f.maxAge {
		v := fl.v
		if !fl.running && now.Sub(fl.began) > f.maxAge/2 {
			fl.running = true
			f.start(key, fl, nil, read)
		}
		f.mu.Unlock()
		return v, nil
	}
	if !fl.running {
		fl.running = true
		gen := fl.gen
		f.mu.Unlock()
		v, err := read(ctx)
		f.ended(key, fl, gen, now, v, err, read)
		return v, err
	}
	c := fl.next
	if c == nil {
		c = &flightCall{done: make(chan struct{})}
		fl.next = c
	}
	c.callers++
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.v, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// get returns key's flight, made if missing; f.mu is held. When the map
// has grown to sweepAt, keys with nothing in flight, nobody waiting and no
// result young enough to use are dropped first.
func (f *flights) get(key string, now time.Time) *flight {
	if fl := f.m[key]; fl != nil {
		return fl
	}
	if f.m == nil {
		f.m = make(map[string]*flight)
	}
	if len(f.m) >= max(f.sweepAt, minSweep) {
		for k, fl := range f.m {
			if !fl.running && fl.next == nil && (!fl.known || now.Sub(fl.began) > f.maxAge) {
				delete(f.m, k)
			}
		}
		f.sweepAt = 2 * len(f.m)
	}
	fl := &flight{}
	f.m[key] = fl
	return fl
}

// start reads key in the background for c's waiters (nil: none, a
// refresh); fl.running is set and f.mu is held.
func (f *flights) start(key string, fl *flight, c *flightCall, read func(context.Context) (int64, error)) {
	gen := fl.gen
	go func() {
		began := f.clock()
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		v, err := read(ctx)
		cancel()
		if c != nil {
			c.v, c.err = v, err
			close(c.done)
		}
		f.ended(key, fl, gen, began, v, err, read)
	}()
}

// ended notes a read of key that began at began (when key's generation
// was gen) and returned v, err, then starts the read the callers waiting
// on fl wait for, if any.
func (f *flights) ended(key string, fl *flight, gen uint64, began time.Time, v int64, err error, read func(context.Context) (int64, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && gen == fl.gen {
		fl.note(v, began)
	}
	c := fl.next
	fl.next = nil
	if c == nil {
		fl.running = false
		if f.maxAge == 0 {
			delete(f.m, key) // nothing to keep: every call reads
		}
		return
	}
	f.start(key, fl, c, read)
}

// note merges a result into fl's newest: the value at least every value
// committed before began. Values only grow, so the larger value and the
// later time hold together.
func (fl *flight) note(v int64, began time.Time) {
	if !fl.known {
		fl.v, fl.began, fl.known = v, began, true
		return
	}
	fl.v = max(fl.v, v)
	if began.After(fl.began) {
		fl.began = began
	}
}

// saw notes a value of key learned without a read: a write through this
// store made the value v, and it holds for every change committed before
// began.
func (f *flights) saw(key string, v int64, began time.Time) {
	if f.maxAge == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.get(key, began).note(v, began)
}

// forget drops what is known of key: a change made through this store
// moved it by an amount not known, so the next caller reads, and reads
// begun before now do not count.
func (f *flights) forget(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl := f.m[key]; fl != nil {
		fl.forget()
	}
}

// forgetAll is forget for every key.
func (f *flights) forgetAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fl := range f.m {
		fl.forget()
	}
}

func (fl *flight) forget() {
	fl.known = false
	fl.gen++
}
