package wire

import (
	"fmt"
	"testing"
)

type testCall struct{ id, name string }

func (c testCall) CallID() string { return c.id }

// TestFindCalls: both indexes find the latest call of an id, among the
// latest calls and past them (through the map), as calls keep coming
// after a search built the map, and nothing for an unknown id.
func TestFindCalls(t *testing.T) {
	var slice CallIndex[testCall]
	var chunks CallChunks[testCall]
	add := func(c testCall) {
		slice.Add(c)
		chunks.Add(c)
	}
	for i := range 100 {
		add(testCall{id: fmt.Sprintf("call_%d", i%70), name: fmt.Sprint(i)})
	}
	check := func(id, want string) {
		t.Helper()
		for name, got := range map[string]*testCall{"CallIndex": slice.Find(id), "CallChunks": chunks.Find(id)} {
			switch {
			case want == "" && got != nil:
				t.Errorf("%s.Find(%s) = %v, want none", name, id, *got)
			case want != "" && (got == nil || got.name != want):
				t.Errorf("%s.Find(%s) = %v, want the call named %s", name, id, got, want)
			}
		}
	}
	check("call_99", "")
	check("call_29", "99") // among the latest
	check("call_5", "75")  // among the latest (75 was call_5's second)
	check("call_40", "40") // past them: the map
	check("call_0", "70")
	add(testCall{id: "call_40", name: "100"})
	for i := range 40 {
		add(testCall{id: fmt.Sprintf("late_%d", i), name: fmt.Sprint(101 + i)})
	}
	check("call_40", "100") // indexed after the map was built
	check("late_0", "101")
	check("nothing", "")
}
