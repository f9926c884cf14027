package store

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	waitFor(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.m["k"].next != nil })
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
