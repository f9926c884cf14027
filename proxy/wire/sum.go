package wire

import (
	"math/rand/v2"

	"github.com/zeebo/xxh3"
)

// MemoSeed is the secret of a memo's sums, chosen at random when the memo
// is made. The memos of the formats name a conversation by a sum of the
// tenant and its head, and check that a new turn repeats the remembered
// one by the sum of its body up to the end of each element. A client that
// cannot predict the sums has no known way to make two prefixes collide.
// XXH3 is no MAC, though: one that did could mislead what the proxy reads
// of its own tenant's conversations only (the tenant is part of every
// sum), and the bytes the client sent are forwarded as they came whatever
// the memo read.
//
// A prefix is summed element by element: [MemoSeed.Name] sums the tenant
// and the head, and [NextSum] goes on with the bytes up to the end of the
// next element, seeded by the sum so far. Two prefixes have the same sum
// when they are the same bytes cut at the same ends, which the memos
// ensure (they cut a new body where the remembered turn's elements ended).
// Each cut is one call of XXH3 over its bytes, which reads a long
// conversation several times faster than a streaming hash that is fed the
// same bytes.
type MemoSeed uint64

// NewMemoSeed returns a random seed.
func NewMemoSeed() MemoSeed { return MemoSeed(rand.Uint64()) }

// Head returns the sum of the tenant and the first bytes of a body.
func (s MemoSeed) Head(tenant string, head []byte) uint64 {
	return xxh3.HashSeed(head, xxh3.HashStringSeed(tenant, uint64(s)))
}

// Name returns the sum that names a body's conversation: the sum of the
// tenant and its head, body[:end], cut where the elements before the
// head's user element end (cut; 0 when there are none). The bytes up to
// the cut are an agent's instructions, the same on every request of every
// run (see KnownStarts): start is their sum, Head(tenant, body[:cut]),
// when the caller has it, else 0. The name is the sum its elements' sums
// go on from.
func (s MemoSeed) Name(tenant string, body []byte, cut, end int, start uint64) uint64 {
	if start == 0 {
		start = s.Head(tenant, body[:cut])
	}
	return NextSum(start, body[cut:end])
}

// Bytes returns the sum of b alone (the bytes after a conversation's
// array).
func (s MemoSeed) Bytes(b []byte) uint64 { return xxh3.HashSeed(b, uint64(s)) }

// NextSum returns the sum of a prefix whose sum up to its previous cut
// is sum and that goes on with b. No bytes leave the sum as it was.
func NextSum(sum uint64, b []byte) uint64 {
	if len(b) == 0 {
		return sum
	}
	return xxh3.HashSeed(b, sum)
}
