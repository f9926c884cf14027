package wire

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
)

// An agent starts every request of every run with the same elements:
// Codex CLI sends its instructions and tools as developer items before the
// first user item, 27 to 53 KB of them, and checking that they are valid
// JSON costs 15 to 43 µs a request, while comparing them with bytes seen
// before costs 1 to 2 µs. knownHeads remembers such starts: the bytes of a
// body from its first byte to the end of the last element before the
// array's first user element, once they were found valid and seen twice,
// and where each of those elements is. A body that starts with the same
// bytes is valid up to there, and its elements end where they ended: the
// scan jumps over them (ScanTurn).
//
// The starts are kept per tenant: what one tenant's requests hold is never
// compared with another's. They are bounded in number and bytes; the
// oldest goes first.
type knownHeads struct {
	mu    sync.Mutex
	list  atomic.Pointer[[]*knownHead] // never changed once stored
	bytes atomic.Int64
	seen  [knownSeen]uint64 // sums of starts seen once, a ring
	next  int
}

// knownHead is one start: its tenant, its bytes, and the elements of the
// array among them.
type knownHead struct {
	tenant string
	start  []byte
	first  int    // where the array's first element starts
	elems  []Span // in start
}

// Bounds of knownHeads: a start shorter than knownMin is checked about as
// fast as it is compared; one of more than knownMaxElems elements is not
// an agent's instructions.
const (
	knownMax      = 16
	knownMaxBytes = 4 << 20
	knownMin      = 4 << 10
	knownMaxElems = 64
	knownSeen     = 64
)

// find returns the start of tenant's that body begins with, its first
// element at first, nil for none. Nothing follows the start in a body
// that holds only it: such a body is scanned.
func (k *knownHeads) find(tenant string, body []byte, first int) *knownHead {
	list := k.list.Load()
	if list == nil {
		return nil
	}
	for _, h := range *list {
		if h.first == first && len(body) > len(h.start) && h.tenant == tenant && bytes.Equal(body[:len(h.start)], h.start) {
			return h
		}
	}
	return nil
}

// offer is called with a body found valid up to its array's first user
// element, and the elements before that one, elems (the first starting at
// first). The second time the same start is offered, it is kept.
func (k *knownHeads) offer(seed MemoSeed, tenant string, body []byte, first int, elems []Span) {
	if len(elems) == 0 || len(elems) > knownMaxElems {
		return
	}
	end := elems[len(elems)-1].End
	// Only an object is sure to end where it ended (see Resume.Skip).
	if end < knownMin || end > knownMaxBytes/4 || body[end-1] != '}' {
		return
	}
	sum := seed.Head(tenant, body[:end])
	k.mu.Lock()
	defer k.mu.Unlock()
	i := slices.Index(k.seen[:], sum)
	if i < 0 {
		k.seen[k.next] = sum
		k.next = (k.next + 1) % knownSeen
		return
	}
	k.seen[i] = 0
	h := &knownHead{tenant: tenant, start: bytes.Clone(body[:end]), first: first, elems: slices.Clone(elems)}
	var old []*knownHead
	if p := k.list.Load(); p != nil {
		old = *p
	}
	list := make([]*knownHead, 0, min(len(old)+1, knownMax))
	list = append(list, h)
	n := int64(len(h.start))
	for _, o := range old {
		if len(list) == knownMax || n+int64(len(o.start)) > knownMaxBytes {
			break
		}
		list = append(list, o)
		n += int64(len(o.start))
	}
	k.list.Store(&list)
	k.bytes.Store(n)
}
