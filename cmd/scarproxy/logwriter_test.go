package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestLogWriterKeepsEveryLineInOrder: lines written from several
// goroutines all reach the output whole, each goroutine's in its order,
// once Close returned; a line written after Close goes straight out.
func TestLogWriterKeepsEveryLineInOrder(t *testing.T) {
	out := &lockedBuffer{}
	lw := newLogWriter(out)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				fmt.Fprintf(lw, "writer=%d line=%d x%s\n", w, i, strings.Repeat("x", i%300))
			}
		}()
	}
	wg.Wait()
	lw.Close()
	fmt.Fprintf(lw, "after close\n")
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines+1 || got[len(got)-1] != "after close" {
		t.Fatalf("%d lines out, the last %q; want %d and the line written after Close", len(got), got[len(got)-1], writers*lines+1)
	}
	next := make([]int, writers)
	for _, line := range got[:len(got)-1] {
		var w, i int
		var xs string
		if _, err := fmt.Sscanf(line, "writer=%d line=%d %s", &w, &i, &xs); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if i != next[w] || len(xs) != 1+i%300 {
			t.Fatalf("writer %d: line %d (%d bytes of x) after line %d", w, i, len(xs), next[w]-1)
		}
		next[w]++
	}
}

// stuckWriter holds every write until it is let through.
type stuckWriter struct {
	through chan struct{}
	out     atomic.Int64
}

func (s *stuckWriter) Write(p []byte) (int, error) {
	<-s.through
	s.out.Add(int64(len(p)))
	return len(p), nil
}

// TestLogWriterWaitsForRoom: with the output stuck, no more than
// maxPendingLog bytes wait (a Write waits for room past it), and once the
// output takes them every byte written comes out: nothing is dropped.
func TestLogWriterWaitsForRoom(t *testing.T) {
	out := &stuckWriter{through: make(chan struct{})}
	lw := newLogWriter(out)
	line := append(bytes.Repeat([]byte("y"), 999), '\n')
	const lines = 3 * maxPendingLog / 1000
	var written atomic.Int64
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for range lines {
			lw.Write(line)
			written.Add(int64(len(line)))
		}
	}()
	for {
		select {
		case out.through <- struct{}{}:
			// What was written and not yet out waits in lw, the goroutine's
			// batch (at most maxPendingLog) and one line past it at most.
			if ahead := written.Load() - out.out.Load(); ahead > 2*maxPendingLog+int64(len(line)) {
				t.Fatalf("%d bytes waiting with the output stuck", ahead)
			}
			continue
		case <-finished:
		}
		break
	}
	close(out.through)
	lw.Close()
	if got, want := out.out.Load(), int64(lines*len(line)); got != want {
		t.Fatalf("%d bytes out, want %d", got, want)
	}
}

// signalWriter tells each write it receives.
type signalWriter struct{ got chan []byte }

func (s *signalWriter) Write(p []byte) (int, error) {
	s.got <- append([]byte(nil), p...)
	return len(p), nil
}

// TestLogWriterWritesALoneLine: a line that no other follows goes out by
// itself (logFlushDelay after it), without waiting for Close, and lines
// enough to fill a batch go out together.
func TestLogWriterWritesALoneLine(t *testing.T) {
	out := &signalWriter{got: make(chan []byte, 16)}
	lw := newLogWriter(out)
	defer lw.Close()
	fmt.Fprintf(lw, "lone line\n")
	if got := <-out.got; string(got) != "lone line\n" {
		t.Fatalf("wrote %q", got)
	}
	line := append(bytes.Repeat([]byte("z"), 99), '\n')
	const lines = logFlushBytes/100 + 1
	for range lines {
		lw.Write(line)
	}
	writes := 0
	for n := 0; n < lines*len(line); writes++ {
		n += len(<-out.got)
	}
	if writes > lines/10 {
		t.Errorf("%d lines went out in %d writes", lines, writes)
	}
}

// TestLogWriterFlush: the lines written before Flush are out when it
// returns.
func TestLogWriterFlush(t *testing.T) {
	out := &lockedBuffer{}
	lw := newLogWriter(out)
	defer lw.Close()
	fmt.Fprintf(lw, "level=WARN msg=start-up\n")
	lw.Flush()
	if got := out.String(); got != "level=WARN msg=start-up\n" {
		t.Fatalf("after Flush the output holds %q", got)
	}
	lw.Flush() // nothing waits: returns at once
}
