package memory

// generations is a map bounded in entries and in bytes, kept in two
// generations: when the newest is full (half the bytes, or maxEntries
// entries) it becomes the older one and the older one is dropped. An entry
// read from the older generation moves to the newest, so what was used
// least recently goes first. The caller locks.
type generations[K comparable, V any] struct {
	maxEntries int              // per generation
	maxBytes   int64            // of both generations; 0: entries only
	size       func(K, V) int64 // the bytes an entry holds; nil with maxBytes 0

	cur, prev           map[K]V
	curBytes, prevBytes int64
}

func newGenerations[K comparable, V any](maxEntries int, maxBytes int64, size func(K, V) int64) *generations[K, V] {
	return &generations[K, V]{maxEntries: maxEntries, maxBytes: maxBytes, size: size, cur: make(map[K]V)}
}

func (g *generations[K, V]) sizeOf(k K, v V) int64 {
	if g.size == nil {
		return 0
	}
	return g.size(k, v)
}

// get returns k's value, moving it to the newest generation.
func (g *generations[K, V]) get(k K) (V, bool) {
	if v, ok := g.cur[k]; ok {
		return v, true
	}
	v, ok := g.prev[k]
	if ok {
		delete(g.prev, k)
		g.prevBytes -= g.sizeOf(k, v)
		g.put(k, v)
	}
	return v, ok
}

// put sets k's value in the newest generation.
func (g *generations[K, V]) put(k K, v V) {
	n := g.sizeOf(k, v)
	if old, ok := g.cur[k]; ok {
		g.curBytes -= g.sizeOf(k, old)
	} else {
		if old, ok := g.prev[k]; ok {
			delete(g.prev, k)
			g.prevBytes -= g.sizeOf(k, old)
		}
		if len(g.cur) >= g.maxEntries || g.maxBytes > 0 && g.curBytes+n > g.maxBytes/2 && len(g.cur) > 0 {
			g.prev, g.prevBytes = g.cur, g.curBytes
			g.cur, g.curBytes = make(map[K]V, min(len(g.prev), 1<<10)), 0
		}
	}
	g.cur[k] = v
	g.curBytes += n
}

// remove drops k.
func (g *generations[K, V]) remove(k K) {
	if v, ok := g.cur[k]; ok {
		delete(g.cur, k)
		g.curBytes -= g.sizeOf(k, v)
	}
	if v, ok := g.prev[k]; ok {
		delete(g.prev, k)
		g.prevBytes -= g.sizeOf(k, v)
	}
}

// bytes returns the bytes the entries hold.
func (g *generations[K, V]) bytes() int64 { return g.curBytes + g.prevBytes }

// len returns the entries held.
func (g *generations[K, V]) len() int { return len(g.cur) + len(g.prev) }
