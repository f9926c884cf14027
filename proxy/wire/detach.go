package wire

import (
	"slices"
	"strings"
	"unsafe"
)

// A format reads the new elements of a turn from one copy of their bytes
// (a region), and what it keeps of them across turns (call names and ids,
// the task, the first tool call's id) are pieces of that copy. A piece
// keeps the whole copy alive, with every tool result and file the turn
// carried: a megabyte per conversation for a name of ten bytes. A
// [Detacher] gives such pieces their own bytes before they are kept.

// minDetach is the smallest region whose pieces are copied: keeping a
// smaller one alive costs less than copying.
const minDetach = 16 << 10

// Detacher copies the strings that lie inside one region. Its zero value
// and nil copy nothing.
type Detacher struct {
	lo, hi         uintptr
	last, lastCopy string // the latest string copied, and its copy
}

// NewDetacher returns a Detacher of region; nil when region is too small
// to be worth it.
func NewDetacher(region string) *Detacher {
	if len(region) < minDetach {
		return nil
	}
	lo := uintptr(unsafe.Pointer(unsafe.StringData(region)))
	return &Detacher{lo: lo, hi: lo + uintptr(len(region))}
}

// Str returns s, or a copy of it when s lies inside the region. The same
// string given again (as marks repeat the task) gets the same copy.
func (d *Detacher) Str(s string) string {
	if d == nil || s == "" {
		return s
	}
	if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p < d.lo || p >= d.hi {
		return s
	}
	if len(s) == len(d.last) && unsafe.StringData(s) == unsafe.StringData(d.last) {
		return d.lastCopy
	}
	d.last, d.lastCopy = s, strings.Clone(s)
	return d.lastCopy
}

// Strs replaces the strings of ss that lie inside the region with copies.
func (d *Detacher) Strs(ss []string) {
	if d == nil {
		return
	}
	for i, s := range ss {
		ss[i] = d.Str(s)
	}
}

// PriorVerdicts returns the verdicts of a remembered turn's tool results
// (verdicts, each of the element at says) up to and including element
// last, which a request resuming after that element starts from, and
// whether they are the turn's own arrays (own): when the request took the
// turn's lists (took, see Resumed) and keeps all of them, it appends its
// verdicts past them in place (see Verdicts); otherwise they are clipped,
// and an append copies them.
func PriorVerdicts(verdicts []ToolTally, at []int, last int, took bool) (v []ToolTally, pos []int, own bool) {
	n := 0
	for n < len(at) && at[n] <= last {
		n++
	}
	if took && n == len(verdicts) {
		return verdicts, at, true
	}
	return verdicts[:n:n], at[:n:n], false
}

// Verdicts returns the verdicts a turn leaves its memo: prior's (the
// verdicts of the results before the turn's, whose positions are at)
// followed by those of results, each at its result's position; the
// results' tool names given their own bytes by d. Unless own, the slices
// returned never share an array with prior's or at's beyond their
// lengths; own says the request took the remembered turn's lists
// (Resumed), and prior and at are the turn's own, whose arrays it appends
// to in place past their lengths (no other request does, and no reader of
// the turn reads there), so that a conversation's turns do not copy its
// verdicts turn after turn.
func Verdicts(prior []ToolTally, at []int, results []ToolResult, d *Detacher, own bool) ([]ToolTally, []int) {
	verdicts, pos := prior, at
	if !own {
		verdicts, pos = slices.Clip(prior), slices.Clip(at)
	}
	for _, tr := range results {
		t := ToolTally{Name: d.Str(tr.Name), LastFailed: tr.Failed}
		if tr.Failed {
			t.Failures = 1
		}
		verdicts, pos = append(verdicts, t), append(pos, tr.At)
	}
	return verdicts, pos
}
