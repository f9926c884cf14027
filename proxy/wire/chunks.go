package wire

// Chunks is an append-only list kept in chunks of ChunkLen elements: a
// format's marks, one per element of a conversation read. A request that
// resumes from a remembered turn keeps the turn's marks up to where it
// resumes (Prefix): it shares every chunk, and copies the partial one
// only when it appends, so what it pays is its own elements, not the
// length of the conversation (and a retry that appends nothing pays
// nothing).
//
// No element below a list's Len is written once appended, and chunks are
// always ChunkLen long (a list's Len says how much of the last one holds
// elements), so two lists that share chunks never write where the other
// reads: a list appends past its own Len only, into a chunk that is its
// own (a prefix copies the partial chunk it shares before its first
// append) or, for the one request that took a turn's Extension, past the
// turn's Len. The zero Chunks is empty.
type Chunks[T any] struct {
	chunks [][]T // never written in place when shared: see Append
	n      int
	// shared says the last chunk, partial, is another list's (Prefix):
	// the first Append copies it.
	shared bool
}

// ChunkLen is the number of elements of a chunk: a prefix copies at most
// this many, a list holds at most ChunkLen-1 it does not use.
const ChunkLen = 4

// Len returns the number of elements.
func (c *Chunks[T]) Len() int { return c.n }

// Cap returns the number of elements the list's chunks have room for:
// what it holds in memory.
func (c *Chunks[T]) Cap() int { return len(c.chunks) * ChunkLen }

// At returns element i (0 <= i < Len): it may be changed only by the
// list that appended it, before any other shares it.
func (c *Chunks[T]) At(i int) *T {
	if i < 0 || i >= c.n {
		panic("wire: Chunks index out of range")
	}
	return &c.chunks[i/ChunkLen][i%ChunkLen]
}

// Append adds v at the end.
func (c *Chunks[T]) Append(v T) {
	k := c.n / ChunkLen
	switch {
	case c.shared:
		// Only the elements below Len: the list it came from may be
		// appending past them. The array of chunks is shared too: this
		// list takes its own, with room for one chunk more.
		own := make([]T, ChunkLen)
		copy(own, c.chunks[k][:c.n%ChunkLen])
		chunks := make([][]T, k+1, k+2)
		copy(chunks, c.chunks[:k])
		chunks[k] = own
		c.chunks, c.shared = chunks, false
	case k == len(c.chunks):
		// A shared array's capacity ends at its length: append copies.
		c.chunks = append(c.chunks, make([]T, ChunkLen))
	}
	c.chunks[k][c.n%ChunkLen] = v
	c.n++
}

// Prefix returns a list of the first n elements (0 <= n <= Len) that
// appends without writing to c's chunks: it shares c's chunks (the array
// of them too, its capacity cut at its length) and copies the partial
// one, if any, when it first appends.
func (c *Chunks[T]) Prefix(n int) Chunks[T] {
	if n < 0 || n > c.n {
		panic("wire: Chunks prefix out of range")
	}
	k := (n + ChunkLen - 1) / ChunkLen
	return Chunks[T]{chunks: c.chunks[:k:k], n: n, shared: n%ChunkLen != 0}
}
