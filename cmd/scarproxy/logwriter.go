package main

import (
	"io"
	"sync"
	"time"
)

// logWriter hands the lines the logger writes to a goroutine that writes
// them on, so that a request does not wait for the write of its access
// line: lines keep their order and go out together, logFlushDelay after
// the first of them or as soon as logFlushBytes wait, in one write
// instead of one per line. Nothing is dropped: past maxPendingLog bytes
// waiting (besides the batch being written), a Write waits for room.
// Close writes what waits and stops the goroutine; a Write after Close
// goes straight to the output. A process that dies without Close loses
// what waits.
type logWriter struct {
	w     io.Writer
	wake  chan struct{} // bytes are to be written now: cap 1
	done  chan struct{} // closed when the goroutine is gone
	timer *time.Timer   // wakes the goroutine logFlushDelay after a first line

	mu      sync.Mutex
	room    *sync.Cond // signalled when the goroutine took the bytes waiting
	pending []byte     // bytes written, not yet handed on
	spare   []byte     // the goroutine's last batch, for reuse
	closed  bool
	// The bytes given to Write, and those the goroutine wrote on (Flush
	// waits for the one to reach the other).
	appended, written int64
}

// How long the first line of a batch waits, how many bytes make a batch
// go out at once, and how many may wait at most.
const (
	logFlushDelay = 50 * time.Millisecond
	logFlushBytes = 64 << 10
	maxPendingLog = 1 << 20
)

func newLogWriter(w io.Writer) *logWriter {
	l := &logWriter{w: w, wake: make(chan struct{}, 1), done: make(chan struct{})}
	l.room = sync.NewCond(&l.mu)
	l.timer = time.AfterFunc(time.Hour, l.signal)
	l.timer.Stop()
	go l.run()
	return l
}

func (l *logWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	for !l.closed && len(l.pending) > 0 && len(l.pending)+len(p) > maxPendingLog {
		l.room.Wait()
	}
	if l.closed {
		l.mu.Unlock()
		<-l.done // after what waited, never beside it
		return l.w.Write(p)
	}
	first := len(l.pending) == 0
	l.pending = append(l.pending, p...)
	l.appended += int64(len(p))
	full := len(l.pending) >= logFlushBytes
	l.mu.Unlock()
	switch {
	case full:
		l.signal()
	case first:
		l.timer.Reset(logFlushDelay)
	}
	return len(p), nil
}

// signal wakes the goroutine to write what waits.
func (l *logWriter) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *logWriter) run() {
	defer close(l.done)
	for {
		<-l.wake
		l.mu.Lock()
		batch, closed := l.pending, l.closed
		l.pending, l.spare = l.spare[:0], nil
		l.room.Broadcast()
		l.mu.Unlock()
		if len(batch) > 0 {
			_, _ = l.w.Write(batch) // a logger has nowhere to report its own failure
		}
		l.mu.Lock()
		if cap(batch) <= maxPendingLog {
			l.spare = batch
		}
		l.written += int64(len(batch))
		l.room.Broadcast()
		l.mu.Unlock()
		if closed {
			return
		}
	}
}

// Flush returns once the lines written before it are out: the start-up
// lines, say, which an operator reads before the first request comes.
func (l *logWriter) Flush() {
	l.mu.Lock()
	target := l.appended
	l.mu.Unlock()
	l.signal()
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.written < target && !l.closed {
		l.room.Wait()
	}
}

// Close writes the bytes waiting and stops the goroutine.
func (l *logWriter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.room.Broadcast()
	l.mu.Unlock()
	l.timer.Stop()
	l.signal()
	<-l.done
	return nil
}
