package wire

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// foldVerdicts is Info.Tallies' fold of results, one at a time.
func foldVerdicts(results []ToolResult) []ToolTally {
	in := Info{ToolResults: results}
	return in.Tallies()
}

// TestVerdictLogResumed: the tallies a log gives a request resuming after
// any element are the fold of the verdicts up to there, and what one
// request appends (the one that took the log, or one that resumed short)
// changes nothing another reads.
func TestVerdictLogResumed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		n := rng.IntN(20)
		var results []ToolResult
		var log VerdictLog
		var prior []ToolTally
		// The log grows turn by turn, each turn taking the one before.
		for i := 0; i < n; {
			k := 1 + rng.IntN(3)
			var turn []ToolResult
			for ; k > 0 && i < n; k-- {
				r := ToolResult{Name: []string{"t0", "t1", "t2", ""}[rng.IntN(4)], Failed: rng.IntN(3) == 0, At: 2*i + 1}
				turn, i = append(turn, r), i+1
			}
			var own VerdictLog
			own, prior = log.Resumed(2*i, true)
			log = own.Add(prior, turn, nil)
			prior = log.tallies
			results = append(results, turn...)
		}
		if got, want := log.tallies, foldVerdicts(results); !slices.Equal(got, want) {
			t.Fatalf("round %d: tallies %v, want %v", round, got, want)
		}
		seen := make([]ToolTally, log.Len())
		for i := range seen {
			seen[i] = *log.At(i)
		}
		// A request resuming after each element: its Prior, and what it
		// appends.
		for last := -1; last <= 2*n; last++ {
			kept := 0
			for kept < len(results) && results[kept].At <= last {
				kept++
			}
			for _, took := range []bool{false, true} {
				if took && kept != len(results) {
					continue
				}
				v, p := log.Resumed(last, took)
				if want := foldVerdicts(results[:kept]); !slices.Equal(p, want) && (len(p) != 0 || len(want) != 0) {
					t.Fatalf("round %d, resumed after %d: prior %v, want %v", round, last, p, want)
				}
				next := v.Add(p, []ToolResult{{Name: "new", Failed: true, At: last + 1}}, nil)
				if next.Len() != kept+1 || *next.At(kept) != (ToolTally{Name: "new", Failures: 1, LastFailed: true}) {
					t.Fatalf("round %d, resumed after %d: appended %d verdicts", round, last, next.Len()-kept)
				}
				if !took {
					// A second request resuming there (a retry) writes
					// nothing the first reads.
					w, q := log.Resumed(last, false)
					w.Add(q, []ToolResult{{Name: "retry", At: last + 1}}, nil)
					if *next.At(kept) != (ToolTally{Name: "new", Failures: 1, LastFailed: true}) {
						t.Fatalf("round %d, resumed after %d: a retry wrote over the first request's verdict", round, last)
					}
				}
				for i := range seen {
					if *log.At(i) != seen[i] {
						t.Fatalf("round %d: a request resumed after %d (took %v) wrote verdict %d of the log", round, last, took, i)
					}
				}
			}
		}
	}
}
