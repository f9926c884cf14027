package wire

import (
	"bytes"
	"slices"
	"sync"
	"sync/atomic"
)

// An agent starts every request of every run with the same elements:
// Codex CLI sends its instructions and tools as developer items before the
// first user item, 27 to 53 KB of them, qwen-code a system message of
// 38 KB; checking that they are valid JSON costs 15 to 43 µs a request,
// comparing them with bytes seen before 1 to 2 µs. KnownStarts remembers
// such starts: the bytes of a body from its first byte to the end of the
// last element before the array's first user element, once they were found
// valid and seen twice, and what the scan found of each of those elements
// (E). A body that starts with the same bytes is valid up to there, and
// its elements are where they were: the scan jumps over them.
//
// The starts are kept per tenant: what one tenant's requests hold is never
// compared with another's. They are bounded in number and bytes; the
// oldest goes first. Keeping one costs a copy (and the collector's work
// on it), so the copies are paid for by what is found: a copy counts
// twice its bytes, a start found its bytes back, and a start is kept only
// while what is owed stays within twice knownMaxBytes (the memo filled
// once). More distinct starts in use than the memo keeps (each pushing
// out another, none found) cost no more than filling it once. The zero KnownStarts is empty and ready to use.
type KnownStarts[E any] struct {
	mu    sync.Mutex
	list  atomic.Pointer[[]*KnownStart[E]] // never changed once stored
	bytes atomic.Int64
	debt  atomic.Int64      // twice the bytes copied, less the bytes found; at least 0
	seen  [knownSeen]uint64 // sums of starts seen once, a ring
	next  int
}

// KnownStart is one start: its tenant, its bytes, and the elements of the
// array among them.
type KnownStart[E any] struct {
	tenant string
	start  []byte
	first  int // where the array's first element starts
	// Elems are what the scan found of the elements; the last one ends
	// at End, where the start does.
	Elems []E
	End   int
	// Sum is the start's memo sum, MemoSeed.Head(tenant, start): where
	// the name of a conversation that begins with it goes on from (see
	// MemoSeed.Name).
	Sum uint64
}

// Bounds of KnownStarts: a start shorter than knownMin is checked about as
// fast as it is compared; one of more than knownMaxElems elements is not
// an agent's instructions.
const (
	knownMax      = 16
	knownMaxBytes = 4 << 20
	knownMin      = 4 << 10
	knownMaxElems = 64
	knownSeen     = 64
)

// Find returns the start of tenant's that body begins with, its array's
// first element at first, nil for none. A body that holds nothing after
// the start is scanned.
func (k *KnownStarts[E]) Find(tenant string, body []byte, first int) *KnownStart[E] {
	list := k.list.Load()
	if list == nil {
		return nil
	}
	for _, h := range *list {
		if h.first == first && len(body) > h.End && h.tenant == tenant && bytes.Equal(body[:h.End], h.start) {
			if d := k.debt.Load(); d > 0 {
				k.debt.Add(-min(d, int64(h.End)))
			}
			return h
		}
	}
	return nil
}

// StartSum returns the memo sum of body[:cut], cut being where the
// elements before the array's first user element end (see MemoSeed.Name):
// known's sum when the body began with that start and it ends there, else
// the bytes summed, then offered as a start (its elements elems, the first
// at first) when offer says the scan checked them.
func (k *KnownStarts[E]) StartSum(seed MemoSeed, tenant string, body []byte, known *KnownStart[E], first, cut int, elems []E, offer bool) uint64 {
	if known != nil && known.End == cut {
		return known.Sum
	}
	sum := seed.Head(tenant, body[:cut])
	if offer {
		k.Offer(sum, tenant, body, first, cut, elems)
	}
	return sum
}

// Offer is called with a body found valid up to its array's first user
// element, and what the scan found of the elements before that one,
// elems, the first starting at first and the last ending at end; sum is
// the memo sum of those bytes, MemoSeed.Head(tenant, body[:end]). The
// second time the same start is offered, it is kept.
func (k *KnownStarts[E]) Offer(sum uint64, tenant string, body []byte, first, end int, elems []E) {
	// Only an object is sure to end where it ended (see Resume.Skip).
	if len(elems) == 0 || len(elems) > knownMaxElems || end < knownMin || end > knownMaxBytes/4 || body[end-1] != '}' {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	i := slices.Index(k.seen[:], sum)
	if i < 0 {
		k.seen[k.next] = sum
		k.next = (k.next + 1) % knownSeen
		return
	}
	k.seen[i] = 0
	if k.debt.Load()+2*int64(end) > 2*knownMaxBytes {
		return // the copies are not paid for (see KnownStarts)
	}
	k.debt.Add(2 * int64(end))
	h := &KnownStart[E]{tenant: tenant, start: bytes.Clone(body[:end]), first: first, Elems: slices.Clone(elems), End: end, Sum: sum}
	var old []*KnownStart[E]
	if p := k.list.Load(); p != nil {
		old = *p
	}
	list := make([]*KnownStart[E], 0, min(len(old)+1, knownMax))
	list = append(list, h)
	n := int64(end)
	for _, o := range old {
		if len(list) == knownMax || n+int64(o.End) > knownMaxBytes {
			break
		}
		list = append(list, o)
		n += int64(o.End)
	}
	k.list.Store(&list)
	k.bytes.Store(n)
}

// Bytes returns the bytes of the starts kept.
func (k *KnownStarts[E]) Bytes() int { return int(k.bytes.Load()) }
