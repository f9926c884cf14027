package memory

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// TestGuardForCountsWhatTheWindowHolds follows a tenant's window through
// batches of new incidents (tool failures of three conversations and of
// none, provider failures that name their provider or not, loops, some
// older than the window's newest) and checks, after every batch, each
// conversation's guard against guard.DetectAll run afresh over what the
// guard counts: the window's provider failures and the conversation's
// own failures, those of the tools it overcame retired. Its own failures
// and the entries they give are carried from window to window
// (convFailures), so this compares the carried counts with counting anew;
// a request still on the window before each batch derives its guard too.
// With a read limit below the tenant's incidents the window is full and
// a conversation's own failures come from the store too (each
// conversation keeps within one read's limit, so the store gives them
// all).
func TestGuardForCountsWhatTheWindowHolds(t *testing.T) {
	for seed := range 32 { // each read limit with 8 seeds
		limit := []int{0, 6, 12, 25}[seed%4]
		t.Run(fmt.Sprint("limit ", limit, " seed ", seed), func(t *testing.T) {
			st := tempBolt(t)
			m := newTestMemory(t, st, func(o *Options) { o.GuardReadLimit = limit })
			ctx := context.Background()
			g := m.Guard()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(limit)))
			base := time.Now().Add(-10 * time.Minute)
			clock := base
			convs := []string{"c", "d", "e", ""}
			tools := []string{"run_tests", "run_shell", "read_file"}
			messages := []string{
				"ModuleNotFoundError: No module named 'yaml'",
				"make: *** [build] Error 2",
				"cat: notes.txt: No such file or directory",
				"the widget frobnicated unexpectedly",
				"exit status 1",
			}
			seq := 0
			per := make(map[string]int) // incidents per conversation
			incident := func(older bool) store.Incident {
				seq++
				at := clock
				if older {
					at = clock.Add(-time.Duration(rng.IntN(60)) * time.Second)
				} else {
					clock = clock.Add(time.Duration(rng.IntN(3)) * time.Second) // some share a time
					at = clock
				}
				in := store.Incident{ID: fmt.Sprintf("i%04d", seq), Time: at, Workspace: "w", Project: "p",
					Session: convs[rng.IntN(len(convs))]}
				if limit > 0 && in.Session != "" && per[in.Session] >= limit-1 {
					// Keep within one read of the conversation's incidents:
					// other conversations fill the window.
					in.Session = fmt.Sprint("other-", seq)
				}
				per[in.Session]++
				switch k := rng.IntN(10); {
				case k < 6:
					in.Type = store.TypeToolError
					in.Message = tools[rng.IntN(len(tools))] + ": " + messages[rng.IntN(len(messages))]
				case k < 8:
					in.Type, in.StatusCode, in.Message = store.TypeHTTPError, []int{429, 500, 503}[rng.IntN(3)], "upstream said no"
					in.Provider = []string{"up", "down", ""}[rng.IntN(3)]
				case k < 9:
					in.Type, in.Provider = store.TypeTimeout, "up"
				default:
					in.Type, in.Message = store.TypeLoop, "run_tests: same call"
				}
				in.Fingerprint = guard.Fingerprint(in.Message)
				return in
			}
			var all []store.Incident
			for range 20 {
				in := incident(false)
				if err := st.AddIncident(ctx, &in); err != nil {
					t.Fatal(err)
				}
				all = append(all, in)
			}
			w, at, err := m.window(ctx, "w", "p", clock, nil)
			if err != nil {
				t.Fatal(err)
			}
			overcomes := make(map[string][]wire.ToolTally)
			for step := range 40 {
				now := clock.Add(time.Second)
				for _, conv := range convs {
					if rng.IntN(3) == 0 {
						continue // no turn of this conversation on this window
					}
					if rng.IntN(4) == 0 { // a turn that changes what the agent overcame
						var overcome []wire.ToolTally
						for _, tool := range tools {
							if rng.IntN(3) == 0 {
								overcome = append(overcome, wire.ToolTally{Name: tool})
							}
						}
						overcomes[conv] = overcome
					}
					overcome := overcomes[conv]
					got, _, err := m.guardFor(&storeBudget{ctx: ctx}, w, conv, overcome, now)
					if err != nil {
						t.Fatal(err)
					}
					want := m.withFixes(g.DetectAll(counted(w, all, conv, overcomeTools(overcome)), now), nil)
					if a, b := entryKeys(got), entryKeys(want); !slices.Equal(a, b) {
						t.Fatalf("step %d, conversation %q, overcome %v:\ngot  %q\nwant %q", step, conv, overcomeTools(overcome), a, b)
					}
				}
				var add []store.Incident
				for range 1 + rng.IntN(3) {
					in := incident(rng.IntN(5) == 0)
					if err := st.AddIncident(ctx, &in); err != nil {
						t.Fatal(err)
					}
					add = append(add, in)
					all = append(all, in)
				}
				m.guardCache.mu.Lock()
				prev := w
				w = w.with(add, w.version+1, nil, false)
				m.guardCache.mu.Unlock()
				if !prev.full {
					// A request that took the window before the batch
					// derives its guard after it: from what it took,
					// and what it keeps does not leak into the new one.
					conv := convs[rng.IntN(len(convs))]
					got, _, err := m.guardFor(&storeBudget{ctx: ctx}, prev, conv, overcomes[conv], now)
					if err != nil {
						t.Fatal(err)
					}
					want := m.withFixes(g.DetectAll(counted(prev, nil, conv, overcomeTools(overcomes[conv])), now), nil)
					if a, b := entryKeys(got), entryKeys(want); !slices.Equal(a, b) {
						t.Fatalf("step %d, conversation %q on the window before:\ngot  %q\nwant %q", step, conv, a, b)
					}
				}
			}
			_ = at
			if limit > 0 && !w.full {
				t.Fatal("the window never filled")
			}
		})
	}
}

// counted returns what a conversation's guard counts in w: the window's
// provider failures and the conversation's own failures (from all, the
// tenant's incidents, when w is full, as the store holds them), those of
// the tools overcome retired.
func counted(w *guardWindow, all []store.Incident, conv string, overcome []string) []store.Incident {
	var out []store.Incident
	for _, in := range w.incidents {
		if guard.ProviderFailure(in.Type) {
			out = append(out, in)
		}
	}
	own := w.incidents
	if w.full && conv != "" {
		own = all
	}
	for _, in := range own {
		if in.Session == conv && ownFailure(&in) && !retired(overcome, guard.ToolOf(&in)) {
			out = append(out, in)
		}
	}
	return out
}

// entryKeys returns the entries as sorted strings of all their fields,
// so that entries of equal rank compare whatever their order.
func entryKeys(entries []guard.Entry) []string {
	keys := make([]string, len(entries))
	for i, e := range entries {
		keys[i] = fmt.Sprintf("%d|%s|%s|%s|%s|%s", e.Count, e.Pattern, e.Provider, e.Example, e.Fingerprint, strings.Join(e.Tools, ","))
	}
	slices.SortFunc(keys, cmp.Compare)
	return keys
}

// TestConvFailuresSharedByConcurrentTurns: the failures a window carries
// for a conversation are classified and counted by whichever of its
// concurrent turns comes first, and every turn gets what a lone turn
// gets (run with -race).
func TestConvFailuresSharedByConcurrentTurns(t *testing.T) {
	st := tempBolt(t)
	m := newTestMemory(t, st)
	ctx := context.Background()
	now := time.Now()
	add := func(msg string, at time.Duration) store.Incident {
		in := store.Incident{Time: now.Add(at), Workspace: "w", Project: "p", Session: "c", Type: store.TypeToolError, Message: msg}
		in.Fingerprint = guard.Fingerprint(in.Message)
		if err := st.AddIncident(ctx, &in); err != nil {
			t.Fatal(err)
		}
		return in
	}
	add("run_tests: FAILED test_parse", -time.Minute)
	add("run_shell: make: *** [build] Error 2", -time.Minute)
	w, _, err := m.window(ctx, "w", "p", now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.guardFor(&storeBudget{ctx: ctx}, w, "c", nil, now); err != nil {
		t.Fatal(err)
	}
	m.guardCache.mu.Lock()
	w = w.with([]store.Incident{add("run_tests: FAILED test_parse", -time.Second), add("run_shell: make: *** [build] Error 2", -time.Second)}, w.version+1, nil, false)
	m.guardCache.mu.Unlock()
	if cf := w.owns.get("c"); cf == nil || len(cf.unclassed) != 2 {
		t.Fatalf("the window did not carry c's failures with two to classify: %+v", cf)
	}
	overcomes := [][]wire.ToolTally{nil, {{Name: "run_tests"}}, {{Name: "run_shell"}}, {{Name: "run_shell"}, {Name: "run_tests"}}}
	results := make([][]string, 4*len(overcomes))
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			entries, _, err := m.guardFor(&storeBudget{ctx: ctx}, w, "c", overcomes[i%len(overcomes)], now)
			if err != nil {
				t.Error(err)
			}
			results[i] = entryKeys(entries)
		})
	}
	wg.Wait()
	for i, got := range results {
		fresh := newConvFailures(m.Guard(), w.owns.get("c").incs)
		want := m.withFixes(fresh.entries(m.Guard(), 0, len(fresh.incs), overcomeTools(overcomes[i%len(overcomes)])), nil)
		if !slices.Equal(got, entryKeys(want)) {
			t.Errorf("turn %d: got %q, want %q", i, got, entryKeys(want))
		}
	}
	if n := len(results[0]); n != 2 {
		t.Errorf("with nothing overcome, %d entries: %q", n, results[0])
	}
}

// TestConvFailuresFollowedTwice: the first window to follow a
// conversation's failures with newer ones appends them to the shared
// arrays; a second follower of the same failures copies, so neither
// sees the other's; a failure already held (read from the store before
// the window followed its write) is not added again.
func TestConvFailuresFollowedTwice(t *testing.T) {
	g, err := guard.New(guard.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	fail := func(id string, at time.Duration) store.Incident {
		return store.Incident{ID: id, Time: t0.Add(at), Session: "c", Type: store.TypeToolError, Message: "run_tests: FAILED test_" + id}
	}
	incs := make([]store.Incident, 0, 8)
	incs = append(incs, fail("a", 0), fail("b", time.Second))
	cf := newConvFailures(g, incs)
	cf.classes = append(make([]guard.Class, 0, 8), cf.classes...)

	first := cf.followed([]store.Incident{fail("x", 2*time.Second)})
	second := cf.followed([]store.Incident{fail("y", 2*time.Second)})
	if &first.incs[0] != &cf.incs[0] {
		t.Error("the first follower copied the failures instead of appending to them")
	}
	if &second.incs[0] == &cf.incs[0] {
		t.Error("the second follower appended to the arrays the first one did")
	}
	for _, c := range []struct {
		cf   *convFailures
		want []string
	}{{cf, []string{"a", "b"}}, {first, []string{"a", "b", "x"}}, {second, []string{"a", "b", "y"}}} {
		if got := ids(c.cf.incs); !slices.Equal(got, c.want) {
			t.Errorf("failures %v, want %v", got, c.want)
		}
		classes := c.cf.classified(g)
		for i := range c.cf.incs {
			if classes[i] != g.ClassOf(&c.cf.incs[i]) {
				t.Errorf("%s: class %+v, want that of its own failure", c.cf.incs[i].ID, classes[i])
			}
		}
	}
	if again := first.followed([]store.Incident{fail("x", 2*time.Second), fail("b", time.Second)}); again != first {
		t.Errorf("failures held already were added again: %v", ids(again.incs))
	}
	older := first.followed([]store.Incident{fail("o", time.Second/2)})
	if got := ids(older.incs); !slices.Equal(got, []string{"a", "o", "b", "x"}) {
		t.Errorf("an older failure joined as %v", got)
	}
}
