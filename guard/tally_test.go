package guard

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// TestTallyMatchesDetect: a Tally that gains and loses incidents in any
// order (and its clones, which change on their own, and the tallies
// derived from it once it no longer changes) reports what Detect reports
// over the incidents it counts at that moment.
func TestTallyMatchesDetect(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	g := mustGuard(t, DefaultConfig())
	msgs := []string{
		"Rate limit reached for gpt-4o",
		"SyntaxError: Unexpected end of input",
		"KeyError: 'session_1' while loading /var/cache/app/00ab.json",
		"KeyError: 'session_2' while loading /var/cache/app/11cd.json",
		"assertion failed in test case 4: expected 1, got 2",
		"assertion failed in test case 9: expected 3, got 5",
		"",
	}
	for seed := range uint64(20) {
		rnd := rand.New(rand.NewPCG(seed, 24))
		pool := make([]store.Incident, 60)
		for i := range pool {
			in := store.Incident{Time: now.Add(-time.Duration(rnd.IntN(5)) * time.Minute), Message: msgs[rnd.IntN(len(msgs))]}
			if rnd.IntN(4) > 0 {
				in.ID = fmt.Sprintf("%04d", rnd.IntN(40)) // ties in time, and sometimes in ID
			}
			switch rnd.IntN(5) {
			case 0:
				in.Type, in.StatusCode, in.Provider = store.TypeHTTPError, []int{429, 500, 503}[rnd.IntN(3)], []string{"p1", "p2"}[rnd.IntN(2)]
			case 1:
				in.Type, in.Provider = store.TypeTimeout, "p1"
			case 2:
				in.Type = store.TypeLoop
			default:
				in.Type = store.TypeToolError
				if rnd.IntN(3) > 0 {
					in.Message = []string{"bash: ", "edit: ", "run_tests: "}[rnd.IntN(3)] + in.Message
				}
			}
			pool[i] = in
		}
		tallies := []*Tally{g.NewTally()}
		counted := [][]*store.Incident{nil}
		frozen := []bool{false} // derived from: changes no more
		for step := range 300 {
			k := rnd.IntN(len(tallies))
			if frozen[k] {
				continue
			}
			tl, in := tallies[k], counted[k]
			switch r := rnd.IntN(10); {
			case r == 0 && len(tallies) < 4:
				tallies, counted, frozen = append(tallies, tl.Clone()), append(counted, slices.Clone(in)), append(frozen, false)
				continue
			case r == 1 && len(tallies) < 8:
				tallies, counted, frozen = append(tallies, tl.Derive()), append(counted, slices.Clone(in)), append(frozen, false)
				frozen[k] = true
				continue
			case r < 4 && len(in) > 0:
				j := rnd.IntN(len(in))
				tl.Remove(in[j])
				counted[k] = slices.Delete(in, j, j+1)
			default:
				p := &pool[rnd.IntN(len(pool))]
				tl.Add(p)
				counted[k] = append(in, p)
			}
			for k, tl := range tallies {
				incs := make([]store.Incident, len(counted[k]))
				for i, p := range counted[k] {
					incs[i] = *p
				}
				if tl.Stale() {
					tl.Renew(slices.Values(counted[k]))
				}
				if tl.Stale() {
					t.Fatalf("seed %d step %d: still stale after Renew", seed, step)
				}
				for _, min := range []int{1, 2} {
					got, want := tl.Entries(min), g.detect(incs, now, min)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("seed %d step %d tally %d min %d:\n tally %+v\ndetect %+v", seed, step, k, min, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkTallyStorm: a tally following a storm, one new failure in and
// the oldest out per request, then the entries.
func BenchmarkTallyStorm(b *testing.B) {
	tl, incidents := countedTally(b, 2000, 1000)
	b.ReportAllocs()
	i := 1000
	for b.Loop() {
		n := tl.Derive()
		n.Remove(&incidents[(i-1000)%2000])
		n.Add(&incidents[i%2000])
		if n.Stale() {
			n.Renew(func(yield func(*store.Incident) bool) {
				for j := i - 999; j <= i; j++ {
					if !yield(&incidents[j%2000]) {
						return
					}
				}
			})
		}
		n.Entries(1)
		tl = n
		i++
	}
}

// A Tally derived from another changes without writing what it shares:
// the base can be read meanwhile (run with -race).
func TestTallyDeriveLeavesItsBaseToReaders(t *testing.T) {
	base, incidents := countedTally(t, 400, 200)
	want := base.Entries(1)
	done := make(chan []Entry)
	go func() {
		var last []Entry
		for range 50 {
			last = base.Entries(1)
		}
		done <- last
	}()
	n := base.Derive()
	for i := range 200 {
		n.Remove(&incidents[i])
		n.Add(&incidents[200+i])
	}
	if got := <-done; !reflect.DeepEqual(got, want) {
		t.Errorf("the base changed under its reader:\n got %+v\nwant %+v", got, want)
	}
	if reflect.DeepEqual(n.Entries(1), want) {
		t.Error("the derived tally did not change")
	}
}

// countedTally returns n of benchIncidents' incidents and a Tally of the
// default guard that counts the first counted of them.
func countedTally(tb testing.TB, n, counted int) (*Tally, []store.Incident) {
	incidents := benchIncidents(n, time.Unix(1_700_000_000, 0))
	tl := mustGuard(tb, DefaultConfig()).NewTally()
	for i := range counted {
		tl.Add(&incidents[i])
	}
	return tl, incidents
}
