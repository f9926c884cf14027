package postgres

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store/storetest"
)

// TestFlightsShareReadsThatBeganAfterTheCall: callers arriving while a
// read is in flight share the next read, which begins after the current
// one ends; each caller gets a value at least as new as the one current
// when it called; a waiter whose ctx ends leaves; an idle key is
// forgotten.
func TestFlightsShareReadsThatBeganAfterTheCall(t *testing.T) {
	f := flights{timeout: time.Minute}
	var value atomic.Int64 // what a read sees: moves when the test says
	var reads atomic.Int32
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	read := func(ctx context.Context) (int64, error) {
		reads.Add(1)
		v := value.Load()
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return v, nil
	}
	ctx := context.Background()

	// The first caller reads at once.
	first := make(chan int64, 1)
	go func() { v, _ := f.do(ctx, "k", read); first <- v }()
	<-started
	// Three callers arrive during its read, after the value moved: they
	// must not get the first read's value.
	value.Store(1)
	var wg sync.WaitGroup
	got := make([]int64, 3)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = f.do(ctx, "k", read) }()
	}
	waitFor(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.m["k"].next != nil && f.m["k"].next.callers == len(got)
	})
	// A caller that gives up while waiting.
	gone, cancel := context.WithCancel(ctx)
	goneErr := make(chan error, 1)
	go func() { _, err := f.do(gone, "k", read); goneErr <- err }()
	cancel()
	if err := <-goneErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up got %v", err)
	}
	release <- struct{}{} // the first read ends
	if v := <-first; v != 0 {
		t.Fatalf("first read: %d", v)
	}
	<-started // the waiters' read, one for all of them
	value.Store(2)
	release <- struct{}{}
	wg.Wait()
	for i, v := range got {
		if v != 1 {
			t.Fatalf("waiter %d got %d, want 1 (a read begun after it called)", i, v)
		}
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2", n)
	}
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.m) == 0 })
	// Idle: the next caller reads at once again.
	go func() { <-started; release <- struct{}{} }()
	if v, err := f.do(ctx, "k", read); v != 2 || err != nil {
		t.Fatalf("idle key: %d, %v", v, err)
	}
}

// waitFor yields until cond holds: the goroutines it waits for signal
// nothing the test could wait on instead.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		runtime.Gosched()
	}
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *manualClock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestFlightsAnswerFromAYoungRead: with maxAge, a caller gets the newest
// result at once while its read began at most maxAge before the call,
// starts a read in the background once it is older than maxAge/2, and
// waits for a read of its own when none is young enough. What a write
// through the store says (saw) is answered at once and never taken back
// by an older read; after forget, the next caller reads, and a read begun
// before forget does not count.
func TestFlightsAnswerFromAYoungRead(t *testing.T) {
	clock := &manualClock{t: storetest.ClockEpoch}
	f := flights{timeout: time.Minute, maxAge: 10 * time.Millisecond, now: clock.now}
	var value atomic.Int64 // what a read sees: moves when the test says
	var reads atomic.Int32
	var gate chan struct{} // when set, a read waits for it
	var gateMu sync.Mutex
	read := func(ctx context.Context) (int64, error) {
		reads.Add(1)
		v := value.Load()
		gateMu.Lock()
		g := gate
		gateMu.Unlock()
		if g != nil {
			<-g
		}
		return v, nil
	}
	setGate := func(g chan struct{}) { gateMu.Lock(); gate = g; gateMu.Unlock() }
	idle := func() bool { f.mu.Lock(); defer f.mu.Unlock(); return !f.m["k"].running }
	ctx := context.Background()
	step := func(what string, want int64, wantReads int32) {
		t.Helper()
		v, err := f.do(ctx, "k", read)
		if err != nil || v != want {
			t.Fatalf("%s: got %d, %v; want %d", what, v, err, want)
		}
		waitFor(t, idle)
		if n := reads.Load(); n != wantReads {
			t.Fatalf("%s: %d reads, want %d", what, n, wantReads)
		}
	}

	value.Store(1)
	step("nothing known: a read", 1, 1)
	value.Store(2) // committed through another store
	clock.advance(5 * time.Millisecond)
	step("a result 5 ms old: no read", 1, 1)
	clock.advance(time.Millisecond)
	step("6 ms old: answered at once, read in the background", 1, 2)
	step("the background read's result", 2, 2)
	value.Store(3)
	clock.advance(17 * time.Millisecond)
	step("11 ms old: a read of its own", 3, 3)

	f.saw("k", 7, clock.now())
	step("a write's value", 7, 3)
	clock.advance(6 * time.Millisecond)
	step("the background read (3) does not take it back", 7, 4)

	// A read in flight when the store forgets: its result does not count.
	clock.advance(6 * time.Millisecond)
	g := make(chan struct{})
	setGate(g)
	if v, _ := f.do(ctx, "k", read); v != 7 {
		t.Fatalf("6 ms old: got %d", v)
	}
	waitFor(t, func() bool { return reads.Load() == 5 }) // the background read began
	f.forget("k")
	setGate(nil)
	close(g)
	waitFor(t, idle)
	value.Store(8)
	step("after forget: a read", 8, 6)

	// Idle keys with nothing young go once the map has grown.
	for i := range minSweep - 1 {
		if _, err := f.do(ctx, strconv.Itoa(i), read); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.m) == minSweep })
	clock.advance(11 * time.Millisecond)
	step("a known key past maxAge", 8, int32(6+minSweep))
	if _, err := f.do(ctx, "new", read); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	n := len(f.m)
	f.mu.Unlock()
	if n != 2 { // "k", read just now, and "new"
		t.Fatalf("%d keys after the sweep, want 2", n)
	}
}
