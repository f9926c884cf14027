package wire

import (
	"slices"
	"sync"
	"testing"
)

func chunksOf[T any](v ...T) Chunks[T] {
	var c Chunks[T]
	for _, x := range v {
		c.Append(x)
	}
	return c
}

func chunksSlice[T any](c *Chunks[T]) []T {
	out := make([]T, 0, c.Len())
	for i := range c.Len() {
		out = append(out, *c.At(i))
	}
	return out
}

// TestChunksPrefixCopiesOnAppend: a prefix holds the list's first
// elements and shares its chunks, the partial one until its first append,
// and what the prefix and the list append afterwards stays each one's
// own, at every length around the chunks' bounds.
func TestChunksPrefixCopiesOnAppend(t *testing.T) {
	for _, total := range []int{0, 1, ChunkLen - 1, ChunkLen, ChunkLen + 1, 3*ChunkLen + 5} {
		for n := 0; n <= total; n++ {
			var c Chunks[int]
			want := make([]int, 0, total)
			for i := range total {
				c.Append(i)
				want = append(want, i)
			}
			p := c.Prefix(n)
			if got := chunksSlice(&p); !slices.Equal(got, want[:n]) {
				t.Fatalf("total %d: Prefix(%d) = %v", total, n, got)
			}
			for i := 0; i < n/ChunkLen*ChunkLen; i += ChunkLen {
				if p.At(i) != c.At(i) {
					t.Fatalf("total %d: Prefix(%d) copied the full chunk at %d", total, n, i)
				}
			}
			if n > 0 && p.At(n-1) != c.At(n-1) {
				t.Fatalf("total %d: Prefix(%d) copied the partial chunk before appending", total, n)
			}
			p.Append(-1)
			if n%ChunkLen != 0 && p.At(n-1) == c.At(n-1) {
				t.Fatalf("total %d: Prefix(%d) shares the partial chunk after appending", total, n)
			}
			for i := 1; i < 2*ChunkLen; i++ {
				p.Append(-1 - i)
			}
			if got := chunksSlice(&c); !slices.Equal(got, want) {
				t.Fatalf("total %d: appending to Prefix(%d) changed the list: %v", total, n, got)
			}
			c.Append(1000)
			if got := chunksSlice(&p); len(got) != n+2*ChunkLen || !slices.Equal(got[:n], want[:n]) || got[n] != -1 {
				t.Fatalf("total %d: appending to the list changed Prefix(%d): %v", total, n, got)
			}
			if p.Cap() < p.Len() || p.Cap()%ChunkLen != 0 {
				t.Fatalf("Cap %d for Len %d", p.Cap(), p.Len())
			}
		}
	}
}

// TestChunksExtendWhileOthersRead: one list appends past a list it was
// copied from (a turn's Extension) while others take prefixes of that
// list and read it: under -race, no access conflicts.
func TestChunksExtendWhileOthersRead(t *testing.T) {
	base := chunksOf(make([]int, ChunkLen+3)...)
	taker := base
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				p := base.Prefix(base.Len())
				p.Append(7)
				for i := range base.Len() {
					_ = *base.At(i)
				}
			}
		})
	}
	for i := range 5 * ChunkLen {
		taker.Append(i)
	}
	wg.Wait()
	if base.Len() != ChunkLen+3 || taker.Len() != 6*ChunkLen+3 || *taker.At(ChunkLen + 3) != 0 || *taker.At(taker.Len() - 1) != 5*ChunkLen-1 {
		t.Fatalf("base %d, taker %d", base.Len(), taker.Len())
	}
}

func TestChunksAtOutOfRange(t *testing.T) {
	c := chunksOf(1, 2)
	defer func() {
		if recover() == nil {
			t.Fatal("At(Len) did not panic")
		}
	}()
	c.At(2)
}

// TestChunksPrefixAllocatesNothing: a prefix that appends nothing (a
// retry of a turn) costs no copy.
func TestChunksPrefixAllocatesNothing(t *testing.T) {
	c := chunksOf(make([]int, 3*ChunkLen+2)...)
	if n := testing.AllocsPerRun(100, func() {
		p := c.Prefix(c.Len())
		_ = p.At(p.Len() - 1)
	}); n != 0 {
		t.Fatalf("Prefix allocated %v times", n)
	}
}
