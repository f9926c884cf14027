package wire

// Chunks is an append-only list kept in chunks of ChunkLen elements: a
// format's marks, one per element of a conversation read. A request that
// resumes from a remembered turn keeps the turn's marks up to where it
// resumes (Prefix): it shares every full chunk and copies at most one, so
// what it pays is its own elements, not the length of the conversation.
//
// No element below a list's Len is written once appended, and chunks are
// always ChunkLen long (a list's Len says how much of the last one holds
// elements), so two lists that share chunks never write where the other
// reads: a list appends past its own Len only, into a chunk that is its
// own (Prefix copies the partial chunk) or, for the one request that took
// a turn's Extension, past the turn's Len. The zero Chunks is empty.
type Chunks[T any] struct {
	chunks [][]T
	n      int
}

// ChunkLen is the number of elements of a chunk.
const ChunkLen = 8

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
	if k == len(c.chunks) {
		c.chunks = append(c.chunks, make([]T, ChunkLen))
	}
	c.chunks[k][c.n%ChunkLen] = v
	c.n++
}

// Prefix returns a list of the first n elements (0 <= n <= Len) that
// appends without writing to c's chunks: it shares c's full chunks and
// holds a copy of the partial one.
func (c *Chunks[T]) Prefix(n int) Chunks[T] {
	if n < 0 || n > c.n {
		panic("wire: Chunks prefix out of range")
	}
	full := n / ChunkLen
	p := Chunks[T]{chunks: make([][]T, full, full+2), n: n}
	copy(p.chunks, c.chunks[:full])
	if r := n % ChunkLen; r > 0 {
		own := make([]T, ChunkLen)
		copy(own, c.chunks[full][:r])
		p.chunks = append(p.chunks, own)
	}
	return p
}
