package memory

import (
	"context"
	"errors"
	"sync"
)

// errQueueClosed is returned by a push after the queue's close.
var errQueueClosed = errors.New("memory: the queue is shut down")

// queue hands work to one background goroutine and counts the work pushed
// and not yet ended, so that a caller can wait for none (wait) and a
// shutdown can store what is left (close, then the consumer drains ch and
// closes done). The incident writer and the capture queue are each one.
type queue[T any] struct {
	ch   chan T
	done chan struct{} // closed by the consumer once it has drained ch

	mu      sync.RWMutex  // read: pushing; write: closing
	closed  bool          // ch is closed
	closing chan struct{} // closed by close: stop gathering, drain what is left

	countMu sync.Mutex
	count   int        // pushed and not ended
	idle    *sync.Cond // signalled when count is 0
}

func newQueue[T any](size int) *queue[T] {
	q := &queue[T]{ch: make(chan T, size), done: make(chan struct{}), closing: make(chan struct{})}
	q.idle = sync.NewCond(&q.countMu)
	return q
}

// push queues v, waiting for room until ctx ends.
func (q *queue[T]) push(ctx context.Context, v T) error {
	if !q.put(v, ctx.Done()) {
		if q.isClosed() {
			return errQueueClosed
		}
		return ctx.Err()
	}
	return nil
}

// offer queues v if there is room; it never waits. It reports false when
// v was dropped (the queue is full, or shut down).
func (q *queue[T]) offer(v T) bool { return q.put(v, nil) }

// put queues v, waiting for room until giveUp is closed (nil: not at
// all). It reports whether v was queued.
func (q *queue[T]) put(v T, giveUp <-chan struct{}) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return false
	}
	q.adjust(1)
	select {
	case q.ch <- v:
		return true
	default:
	}
	if giveUp != nil {
		select {
		case q.ch <- v:
			return true
		case <-giveUp:
		}
	}
	q.adjust(-1)
	return false
}

func (q *queue[T]) isClosed() bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	return q.closed
}

// ended notes that n items the consumer took have ended (stored, or
// failed).
func (q *queue[T]) ended(n int) { q.adjust(-n) }

func (q *queue[T]) adjust(n int) {
	q.countMu.Lock()
	q.count += n
	if q.count == 0 {
		q.idle.Broadcast()
	}
	q.countMu.Unlock()
}

// wait returns once every item pushed so far has ended.
func (q *queue[T]) wait() {
	q.countMu.Lock()
	for q.count > 0 {
		q.idle.Wait()
	}
	q.countMu.Unlock()
}

// close stops new pushes and waits, until ctx ends, for the consumer to
// end what was queued.
func (q *queue[T]) close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
		close(q.closing)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
