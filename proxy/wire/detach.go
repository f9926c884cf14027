package wire

import (
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
