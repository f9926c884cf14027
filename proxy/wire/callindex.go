package wire

// Identified is a tool call read from a request, named by its id.
type Identified interface{ CallID() string }

// CallIndex holds the tool calls read from a request, in order, and finds
// them by id. A tool result most often answers one of the latest calls:
// they are searched first, and a map is built only for a long
// conversation. The zero CallIndex is empty.
type CallIndex[C Identified] struct {
	Calls   []C
	byID    map[string]int // id -> index, of Calls[:indexed]
	indexed int
}

// Add appends a call.
func (x *CallIndex[C]) Add(c C) { x.Calls = append(x.Calls, c) }

// Find returns the latest call with the given id, or nil.
func (x *CallIndex[C]) Find(id string) *C {
	const scan = 32
	for i := len(x.Calls) - 1; i >= max(x.indexed, len(x.Calls)-scan); i-- {
		if x.Calls[i].CallID() == id {
			return &x.Calls[i]
		}
	}
	if len(x.Calls) <= scan {
		return nil
	}
	if x.byID == nil {
		x.byID = make(map[string]int, len(x.Calls))
	}
	for i := x.indexed; i < len(x.Calls); i++ {
		x.byID[x.Calls[i].CallID()] = i
	}
	x.indexed = len(x.Calls)
	if i, ok := x.byID[id]; ok {
		return &x.Calls[i]
	}
	return nil
}
