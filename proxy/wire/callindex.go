package wire

// Identified is a tool call read from a request, named by its id.
type Identified interface{ CallID() string }

// CallIndex holds the tool calls read from a request, in order, and finds
// them by id. A tool result most often answers one of the latest calls:
// they are searched first, and a map is built only for a long
// conversation. The zero CallIndex is empty.
type CallIndex[C Identified] struct {
	Calls []C
	ids   idIndex
}

// Add appends a call.
func (x *CallIndex[C]) Add(c C) { x.Calls = append(x.Calls, c) }

// Find returns the latest call with the given id, or nil.
func (x *CallIndex[C]) Find(id string) *C { return find[C](callSlice[C](x.Calls), &x.ids, id) }

// CallChunks is a CallIndex that keeps its calls in Chunks: a request
// resuming from a remembered turn shares the turn's calls as it does its
// marks (Resumed), copying at most one chunk of them. The zero CallChunks
// is empty.
type CallChunks[C Identified] struct {
	Calls Chunks[C]
	ids   idIndex
}

// Add appends a call.
func (x *CallChunks[C]) Add(c C) { x.Calls.Append(c) }

// Find returns the latest call with the given id, or nil.
func (x *CallChunks[C]) Find(id string) *C { return find[C](&x.Calls, &x.ids, id) }

// idIndex maps the ids of a list's first calls to their places, built
// only when a search goes past the latest calls.
type idIndex struct {
	byID    map[string]int // id -> index, of the first indexed calls
	indexed int
}

// calls is a list of calls find searches.
type calls[C any] interface {
	Len() int
	At(i int) *C
}

type callSlice[C any] []C

func (s callSlice[C]) Len() int    { return len(s) }
func (s callSlice[C]) At(i int) *C { return &s[i] }

// find returns the latest call of l with the given id, or nil.
func find[C Identified, L calls[C]](l L, x *idIndex, id string) *C {
	const scan = 32
	n := l.Len()
	for i := n - 1; i >= max(x.indexed, n-scan); i-- {
		if c := l.At(i); (*c).CallID() == id {
			return c
		}
	}
	if n <= scan {
		return nil
	}
	if x.byID == nil {
		x.byID = make(map[string]int, n)
	}
	for i := x.indexed; i < n; i++ {
		x.byID[(*l.At(i)).CallID()] = i
	}
	x.indexed = n
	if i, ok := x.byID[id]; ok {
		return l.At(i)
	}
	return nil
}
