package memory

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// BenchmarkGuardForGrowingConversations derives the guards of 32
// conversations whose failures keep coming, in a tenant whose window is
// full (10,000 incidents seeded, the default read limit): every turn
// derives its conversation's guard, one turn in ten adds a failure of
// its conversation to the window, and the turn after a failure overcomes
// the tool that failed. It is what scarbench's growing conversations ask
// of the guard, without the HTTP around it.
func BenchmarkGuardForGrowingConversations(b *testing.B) {
	st := tempBolt(b)
	m := newTestMemory(b, st)
	ctx := context.Background()
	now := time.Now()
	tools := []string{"run_tests", "run_shell", "read_file", "edit_file"}
	failure := func(conv string, i int, at time.Time) store.Incident {
		in := store.Incident{Time: at, Workspace: "w", Project: "p", Session: conv, Type: store.TypeToolError,
			Message: fmt.Sprintf("%s: FAILED tests/test_%d.py::test_case - AssertionError: expected %d, got %d", tools[i%len(tools)], i%50, i, i+1)}
		in.Fingerprint = guard.Fingerprint(in.Message)
		return in
	}
	for k := range 10 {
		var seed []store.IncidentWrite
		for i := k * 1000; i < (k+1)*1000; i++ {
			in := failure(fmt.Sprint("old-", i%500), i, now.Add(-time.Duration(10000-i)*time.Millisecond*100))
			seed = append(seed, store.IncidentWrite{Incident: &in})
		}
		if _, err := st.AddIncidents(ctx, seed); err != nil {
			b.Fatal(err)
		}
	}
	convs := make([]string, 32)
	for i := range convs {
		convs[i] = fmt.Sprint("conv-", i)
		for k := range 40 { // each has been failing for a while
			in := failure(convs[i], k, now.Add(-time.Duration(40-k)*time.Second))
			if err := st.AddIncident(ctx, &in); err != nil {
				b.Fatal(err)
			}
		}
	}
	w, _, err := m.window(ctx, "w", "p", now, nil)
	if err != nil {
		b.Fatal(err)
	}
	at := now
	turns := make([]int, len(convs))
	for b.Loop() {
		for c, conv := range convs {
			turns[c]++
			var tallies []wire.ToolTally
			if turns[c]%10 == 1 {
				tallies = []wire.ToolTally{{Name: tools[turns[c]%len(tools)]}}
			}
			if turns[c]%10 == 0 {
				at = at.Add(time.Millisecond)
				in := failure(conv, turns[c], at)
				in.ID = fmt.Sprintf("new-%d-%d", c, turns[c])
				m.guardCache.mu.Lock()
				w = w.with([]store.Incident{in}, w.version+1, nil, false)
				m.guardCache.mu.Unlock()
			}
			if _, _, err := m.guardFor(&storeBudget{ctx: ctx}, w, conv, tallies, at); err != nil {
				b.Fatal(err)
			}
		}
	}
}
