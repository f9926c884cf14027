package memory

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// TestGenerationsBoundedInBytes: the map never holds much more than its
// byte budget, counts exactly the bytes of what it holds, keeps what is
// read again and lets go of what was not.
func TestGenerationsBoundedInBytes(t *testing.T) {
	size := func(k int, v string) int64 { return int64(len(v)) }
	g := newGenerations(1<<20, 10_000, size)
	check := func() {
		t.Helper()
		var n int64
		for k, v := range g.cur {
			n += size(k, v)
		}
		for k, v := range g.prev {
			if _, twice := g.cur[k]; twice {
				t.Fatalf("key %d in both generations", k)
			}
			n += size(k, v)
		}
		if n != g.bytes() {
			t.Fatalf("counted %d bytes, holds %d", g.bytes(), n)
		}
		if n > 10_000+1_000 {
			t.Fatalf("holds %d bytes, budget 10000", n)
		}
	}
	g.put(-1, strings.Repeat("k", 100)) // kept: read all along
	for i := range 1000 {
		g.put(i, strings.Repeat("v", 100+i%900))
		if _, ok := g.get(-1); !ok {
			t.Fatalf("the entry read after every write was let go at %d", i)
		}
		if i%7 == 0 {
			g.put(i, "shorter") // replaced in place
		}
		if i%11 == 5 {
			g.remove(i - 1)
		}
		check()
	}
	if _, ok := g.get(0); ok {
		t.Error("the oldest entry, never read again, is still held")
	}
	g.remove(-1)
	check()

	// Without a byte budget only the entries count.
	e := newGenerations[int, bool](4, 0, nil)
	for i := range 100 {
		e.put(i, true)
		if e.len() > 8 {
			t.Fatalf("%d entries held, at most 8", e.len())
		}
	}
}

// TestGuardCacheBoundedInBytes: the windows of many tenants, each with
// the largest incidents, derived guards and own incidents, stay within the
// cache's budget; the tenant in use keeps its window while those unused
// longest go, and the bytes counted are those of the windows held.
func TestGuardCacheBoundedInBytes(t *testing.T) {
	st := tempBolt(t)
	m := newTestMemory(t, st)
	const budget = 2 << 20
	m.guardCache = newGuardCache(budget)
	ctx := context.Background()
	now := time.Now()
	big := strings.Repeat("Traceback line that goes on and on. ", 60)[:maxIncidentMessage]
	for i := range 60 {
		ws := fmt.Sprintf("team-%02d", i)
		for j := range 20 {
			in := store.Incident{Time: now.Add(-time.Minute), Workspace: ws, Project: "p", Session: fmt.Sprint("c", j%4),
				Type: store.TypeToolError, Message: fmt.Sprintf("run_tests: %d %s", j, big)}
			in.Fingerprint = guard.Fingerprint(in.Message)
			if err := st.AddIncident(ctx, &in); err != nil {
				t.Fatal(err)
			}
		}
	}
	hot := tenantKey{"team-00", "p"}
	for i := range 60 {
		for _, k := range []tenantKey{hot, {fmt.Sprintf("team-%02d", i), "p"}} {
			w, at, err := m.window(ctx, k.workspace, k.project, now, nil)
			if err != nil {
				t.Fatal(err)
			}
			for c := range 4 {
				if _, _, err := m.guardFor(&storeBudget{ctx: ctx}, w, fmt.Sprint("c", c), nil, at); err != nil {
					t.Fatal(err)
				}
			}
		}
		m.guardCache.mu.Lock()
		var n int64
		for k, w := range m.guardCache.m {
			if got := windowBytes(w); got != m.guardCache.counted[k] {
				t.Errorf("%v: counted %d bytes, holds %d", k, m.guardCache.counted[k], got)
			}
			n += windowBytes(w)
		}
		held, hotHeld := m.guardCache.held, m.guardCache.m[hot] != nil
		m.guardCache.mu.Unlock()
		if n != held {
			t.Fatalf("after %d tenants: counted %d bytes, windows hold %d", i+1, held, n)
		}
		if held > budget {
			t.Fatalf("after %d tenants: %d bytes held, budget %d", i+1, held, budget)
		}
		if !hotHeld {
			t.Fatalf("after %d tenants: the tenant used all along lost its window", i+1)
		}
	}
	if len(m.guardCache.m) >= 60 {
		t.Fatalf("%d windows held: none let go", len(m.guardCache.m))
	}
}

// TestRecallCacheBoundedInBytes: the recall of many conversations, each
// with a large block, stays within the cache's budget, and a conversation
// whose recall was let go recalls nothing again (its first request has
// passed).
func TestRecallCacheBoundedInBytes(t *testing.T) {
	c := newRecallCache(1<<14, 1<<20)
	block := wire.NewBlock(strings.Repeat("a recalled solution, quoted as data. ", 200))
	sol := store.Solution{ID: "s1", Goal: strings.Repeat("fix the flaky test ", 50), Approach: strings.Repeat("retry ", 100)}
	for i := range 2000 {
		c.mu.Lock()
		c.m.put(recallKey{"w", "p", fmt.Sprint("conv-", i)}, recallResult{matches: []recall.Match{{Solution: sol}}, block: block})
		c.mu.Unlock()
		if n := c.bytes(); n > 1<<20+recallBytes(recallKey{}, recallResult{block: block})*2 {
			t.Fatalf("after %d conversations: %d bytes held", i+1, n)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m.get(recallKey{"w", "p", "conv-0"}); ok {
		t.Error("the first conversation's recall is still held")
	}
	if _, ok := c.m.get(recallKey{"w", "p", "conv-1999"}); !ok {
		t.Error("the latest conversation's recall was let go")
	}
}

// TestWindowCarriesTheGuardsItsNewIncidentsDoNotTouch: when a window
// follows a conversation's new tool failure, the guards derived for the
// other conversations are kept (and are what deriving them again gives),
// that conversation's is derived again, and a provider failure, which
// counts in every conversation, keeps none.
func TestWindowCarriesTheGuardsItsNewIncidentsDoNotTouch(t *testing.T) {
	st := tempBolt(t)
	m := newTestMemory(t, st)
	ctx := context.Background()
	now := time.Now()
	add := func(session, typ, msg string, status int) store.Incident {
		in := store.Incident{Time: now.Add(-time.Minute), Workspace: "w", Project: "p", Session: session, Type: typ,
			StatusCode: status, Provider: "up", Message: msg}
		in.Fingerprint = guard.Fingerprint(in.Message)
		if err := st.AddIncident(ctx, &in); err != nil {
			t.Fatal(err)
		}
		return in
	}
	for range 2 {
		add("c", store.TypeToolError, "run_tests: ModuleNotFoundError: No module named 'yaml'", 0)
		add("d", store.TypeToolError, "run_shell: make: *** [build] Error 2", 0)
	}
	w, at, err := m.window(ctx, "w", "p", now, nil)
	if err != nil {
		t.Fatal(err)
	}
	derive := func(w *guardWindow, conv string) guardResult {
		t.Helper()
		entries, block, err := m.guardFor(&storeBudget{ctx: ctx}, w, conv, nil, at)
		if err != nil {
			t.Fatal(err)
		}
		return guardResult{entries: entries, block: block}
	}
	derive(w, "c")
	derive(w, "d")
	ck := func(conv string) string {
		gen, _ := m.recovered.of(tenantKey{"w", "p"})
		return conv + "\x00\x00" + fmt.Sprint(gen)
	}
	if _, ok := w.derived(ck("c")); !ok {
		t.Fatalf("the guard derived for c is not kept under %q", ck("c"))
	}

	m.guardCache.mu.Lock()
	w1 := w.with([]store.Incident{add("d", store.TypeToolError, "run_shell: make: *** [build] Error 2", 0)}, w.version+1, nil, false)
	m.guardCache.mu.Unlock()
	kept, ok := w1.derived(ck("c"))
	if !ok {
		t.Fatal("the guard of a conversation the new failure does not touch was not carried")
	}
	if _, ok := w1.derived(ck("d")); ok {
		t.Fatal("the guard of the conversation that failed again was carried")
	}
	if d := derive(w1, "d"); len(d.entries) != 1 || d.entries[0].Count != 3 {
		t.Errorf("d's guard does not count its third failure: %+v", d.entries)
	}
	w1.mu.Lock()
	w1.convs, w1.derivedBytes = nil, 0 // what deriving c's guard anew gives
	w1.mu.Unlock()
	if again := derive(w1, "c"); again.block.Text != kept.block.Text {
		t.Fatalf("carried guard\n%s\nderived again\n%s", kept.block.Text, again.block.Text)
	}

	m.guardCache.mu.Lock()
	w2 := w1.with([]store.Incident{add("", store.TypeHTTPError, "rate limited", 429)}, w1.version+1, nil, false)
	m.guardCache.mu.Unlock()
	if len(w2.convs) != 0 || w2.derivedBytes != 0 {
		t.Fatalf("a provider failure kept %d derived guards", len(w2.convs))
	}
	// The conversations' own failures did not change: they are kept,
	// and count as counted afresh.
	if w2.owns != w1.owns || w2.owns.get("c") == nil || w2.owns.get("d") == nil {
		t.Fatalf("a provider failure changed the conversations' own failures: %v → %v", w1.owns, w2.owns)
	}
	carried := derive(w2, "d")
	w2.mu.Lock()
	w2.convs, w2.derivedBytes, w2.owns = nil, 0, nil
	w2.mu.Unlock()
	if again := derive(w2, "d"); again.block.Text != carried.block.Text {
		t.Fatalf("guard from the failures carried\n%s\nfrom the window\n%s", carried.block.Text, again.block.Text)
	}
}
