package wire

import (
	"slices"
	"unsafe"
)

// A conversation's tool results are judged once: what each said (its
// verdict) is remembered with the turn that read it, and a request that
// resumes from the turn starts from there. The request needs the
// verdicts' tallies per tool (Info.Prior: see Info.Tallies); the turns
// after it need the verdicts themselves, since a request may resume from
// any element of a turn (Claude Code's next request resumes one message
// short of the last one's end: it moves its cache marker). A VerdictLog
// keeps both: the verdicts in Chunks, which a resumed request shares
// (copying at most a chunk), and their tallies at the log's end, from
// which those up to an earlier element are found by taking out the
// verdicts after it. Neither a resumed request nor Tallies walks the
// conversation's results: what they cost is the results after the
// element resumed from and the request's own.

// verdict is what one tool result said, and the element it is in.
type verdict struct {
	ToolTally
	at int
}

// VerdictLog is the verdicts of a turn's tool results, in order, and
// their tallies. The zero VerdictLog is empty.
type VerdictLog struct {
	list Chunks[verdict]
	// tallies fold list per tool, in the order tools first answered
	// (Info.Tallies' fold). Never written once the log is made: a
	// resumed request reads them as its Prior.
	tallies []ToolTally
}

// Len returns the number of verdicts.
func (v *VerdictLog) Len() int { return v.list.Len() }

// At returns the verdict of the i-th result (0 <= i < Len), where the
// log holds it: read only.
func (v *VerdictLog) At(i int) *ToolTally { return &v.list.At(i).ToolTally }

// Size returns the bytes the log holds: its chunks and its tallies.
func (v *VerdictLog) Size() int {
	return v.list.Cap()*int(unsafe.Sizeof(verdict{})) + cap(v.list.chunks)*int(unsafe.Sizeof([]verdict{})) +
		cap(v.tallies)*int(unsafe.Sizeof(ToolTally{}))
}

// Resumed returns the log of the verdicts of the results up to and
// including element last, which a request resuming after that element
// extends with its own (Add), and their tallies, the request's
// Info.Prior (read only: they may be v's). took says the request took
// the turn's lists (see Resumed): when it keeps all of v, it appends to
// v's chunks in place, past their length; otherwise it shares them as a
// Prefix.
func (v *VerdictLog) Resumed(last int, took bool) (VerdictLog, []ToolTally) {
	n := v.list.Len()
	for n > 0 && v.list.At(n-1).at > last {
		n--
	}
	if n == v.list.Len() {
		if took {
			return *v, v.tallies
		}
		return VerdictLog{list: v.list.Prefix(n), tallies: v.tallies}, v.tallies
	}
	tallies := v.talliesBefore(n)
	return VerdictLog{list: v.list.Prefix(n), tallies: tallies}, tallies
}

// talliesBefore returns the tallies of the first n verdicts (n < Len):
// v's, less the verdicts from n on. A tool that answered after n only
// takes its latest verdict before n, found looking back from n; one that
// first answered after n is left out (it came last in the order).
func (v *VerdictLog) talliesBefore(n int) []ToolTally {
	out := make([]ToolTally, len(v.tallies))
	copy(out, v.tallies)
	var undone [8]int
	touched := undone[:0] // the entries of out the verdicts from n on changed
	for i := n; i < v.list.Len(); i++ {
		t := v.list.At(i)
		j := tallyIndex(out, t.Name)
		if j < 0 {
			continue // not reached: the tallies fold every verdict
		}
		out[j].Failures -= t.Failures
		if !slices.Contains(touched, j) {
			touched = append(touched, j)
		}
	}
	var gone [8]int
	drop := gone[:0] // the entries of tools that first answered after n
	for _, j := range touched {
		name := out[j].Name
		k := n - 1
		for k >= 0 && v.list.At(k).Name != name {
			k--
		}
		if k < 0 {
			drop = append(drop, j)
			continue
		}
		out[j].LastFailed = v.list.At(k).LastFailed
	}
	if len(drop) == 0 {
		return out
	}
	kept := out[:0]
	for j, t := range out {
		if !slices.Contains(drop, j) {
			kept = append(kept, t)
		}
	}
	return kept
}

// Add returns the log that follows v with the verdicts of results (the
// request's, judged), from prior, v's tallies (the request's Prior); the
// results' tool names given their own bytes by d. It appends to v's
// chunks: see Resumed for when that is in place.
func (v VerdictLog) Add(prior []ToolTally, results []ToolResult, d *Detacher) VerdictLog {
	if len(results) == 0 {
		return VerdictLog{list: v.list, tallies: prior}
	}
	tallies := make([]ToolTally, len(prior), len(prior)+len(results))
	copy(tallies, prior)
	for _, tr := range results {
		t := ToolTally{Name: d.Str(tr.Name), LastFailed: tr.Failed}
		if tr.Failed {
			t.Failures = 1
		}
		v.list.Append(verdict{ToolTally: t, at: tr.At})
		tallies = foldTally(tallies, t)
	}
	return VerdictLog{list: v.list, tallies: tallies}
}

// foldTally adds t to tallies: to its tool's entry, or as a new one.
func foldTally(tallies []ToolTally, t ToolTally) []ToolTally {
	if i := tallyIndex(tallies, t.Name); i >= 0 {
		tallies[i].Failures += t.Failures
		tallies[i].LastFailed = t.LastFailed
		return tallies
	}
	return append(tallies, t)
}

func tallyIndex(tallies []ToolTally, name string) int {
	for i := range tallies {
		if tallies[i].Name == name {
			return i
		}
	}
	return -1
}
