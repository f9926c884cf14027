package wire

import (
	"errors"
	"slices"
)

// TurnScan is what ScanTurn found in a request body: where the top-level
// members the format reads are, and where the elements of its
// conversation's array are.
type TurnScan struct {
	// Top are the members named by ScanTurn's keys, in their order; absent
	// when not there.
	Top []Span
	// Elems are the array's elements read, from Resume.From on (those
	// before were skipped, see Resume).
	Elems []Span
	// Ends are where every element of the array ends, those skipped
	// included (Resume.Remember takes them). Nil when the array has more
	// than MaxElems elements.
	Ends []Elem
	// ArrayEnd is where the array ends; 0 when the member is not an
	// array.
	ArrayEnd int
	// After are the spans of Top after the array, relative to its end:
	// what a memo keeps with the bytes after the array.
	After []Span
	// Same says which members of Top after the array are, byte for byte,
	// the remembered turn's (all of them when Resume.TailKnown): what the
	// format read of them then holds.
	Same []bool
	// Truncated says the array has more than MaxElems elements: Elems
	// and Ends are not all there.
	Truncated bool
	// KnownStart says the elements before the first user element were
	// not checked again: the body starts with the bytes of a start found
	// valid before (see KnownStarts).
	KnownStart bool
}

// SameAfter reports whether the top-level member keys[k] is after the
// array and its value is the remembered turn's, byte for byte.
func (ts *TurnScan) SameAfter(k int) bool { return k < len(ts.Same) && ts.Same[k] }

// errTailKnown ends a scan whose memo knew the rest of the body.
var errTailKnown = errors.New("rest of the body known")

// newElemsRoom is the room ScanTurn leaves after a conversation's
// remembered elements, when it copies them, for the new ones of a turn
// (an answer and its tool results): the slice then grows once at most.
// A turn whose array of ends is full gets as much room again (see
// Resume.resumedEnds).
const newElemsRoom = 8

// ScanTurn scans body in one pass that checks it (JSON, nesting bounded,
// no member named by keys given twice: a *JSONError or a
// *DuplicateKeyError) and locates the top-level members named keys and,
// when keys[array] is an array, its elements. The first element whose
// "role" reads "user" ends the conversation's head: with a memo (r), the
// scan names the conversation there, skips the elements of its
// remembered turn that body repeats, and, when the bytes after the array
// are the remembered turn's, ends at the array's end, taking the
// positions of the members there from the memo (after returns the
// remembered turn's After). With a memo, the elements before the first
// user element are not checked again when the body starts with the same
// bytes as one that was (see KnownStarts). When the bytes after the array
// changed, a member there whose value is the remembered turn's under the
// same key is not checked again either (see TailMember).
func ScanTurn[S any](body []byte, keys []string, array int, r *Resume[S], tenant string, after func(S) []Span) (TurnScan, error) {
	ts := TurnScan{Top: make([]Span, len(keys))}
	s := Scanner{B: body}
	var dup error
	named := false
	var known *KnownStart[Span]
	elem := func() error {
		start := s.I
		if len(ts.Ends) == 0 && r.memo != nil {
			if h := r.memo.starts.Find(tenant, body, start); h != nil {
				// The same bytes as a start found valid: its elements,
				// none a user's, are where they were.
				for _, e := range h.Elems {
					ts.Ends = append(ts.Ends, Elem{End: e.End})
				}
				ts.Elems = append(ts.Elems, h.Elems...)
				s.I, ts.KnownStart, known = h.End, true, h
				return nil
			}
		}
		var role Span
		if s.Peek() == '{' {
			err := s.Members(3, func(key []byte) error {
				at := s.I
				if err := s.Value(3); err != nil {
					return err
				}
				if !role.OK() && string(key) == "role" {
					role = Span{at, s.I}
				}
				return nil
			})
			if err != nil {
				return err
			}
		} else if err := s.Value(2); err != nil {
			return err
		}
		if ts.Truncated || len(ts.Ends) >= MaxElems {
			ts.Truncated, ts.Ends = true, nil
			return nil
		}
		ts.Ends = append(ts.Ends, Elem{End: s.I})
		ts.Elems = append(ts.Elems, Span{start, s.I})
		if named || !role.OK() || !RoleIs(role.Raw(body), "user") {
			return nil
		}
		named = true
		cut, sum := 0, uint64(0)
		if head := ts.Elems[:len(ts.Elems)-1]; r.memo != nil && len(head) > 0 {
			cut = head[len(head)-1].End
			sum = r.memo.starts.StartSum(r.memo.seed, tenant, body, known, head[0].Start, cut, head, !ts.KnownStart)
		}
		r.Name(tenant, body, cut, s.I, sum)
		if last := r.Skip(body, len(ts.Ends)-1); last >= 0 {
			// The remembered elements, and room for a turn's new ones.
			ts.Ends = r.resumedEnds(last, MoreElems(body, r.Prior.Elems[last].End))
			ts.Elems = ts.Elems[:0]
			s.I = ts.Ends[last].End
		}
		return nil
	}
	err := s.Document(func() error {
		if s.Peek() != '{' {
			return s.Value(0)
		}
		return s.Members(1, func(key []byte) error {
			k := slices.Index(keys, string(key))
			if k >= 0 && ts.Top[k].OK() && dup == nil {
				dup = &DuplicateKeyError{Key: keys[k]}
			}
			start := s.I
			if k == array && s.Peek() == '[' && !ts.Top[k].OK() {
				if err := s.Elements(2, elem); err != nil {
					return err
				}
				ts.Top[k], ts.ArrayEnd = Span{start, s.I}, s.I
				ts.After, ts.Same = make([]Span, len(keys)), make([]bool, len(keys))
				if dup == nil && r.Tail(body, s.I) {
					for i, rel := range after(r.Prior.State) {
						if rel.OK() && !ts.Top[i].OK() {
							ts.Top[i] = Span{rel.Start + s.I, rel.End + s.I}
							ts.Same[i] = true
						}
					}
					ts.After = after(r.Prior.State)
					s.I = len(body)
					return errTailKnown
				}
				return nil
			}
			same := false
			if ts.ArrayEnd > 0 {
				var err error
				if same, err = r.member(&s, key); err != nil {
					return err
				}
			} else if err := s.Value(1); err != nil {
				return err
			}
			if k >= 0 {
				ts.Top[k] = Span{start, s.I}
				if ts.ArrayEnd > 0 {
					ts.After[k] = Span{start - ts.ArrayEnd, s.I - ts.ArrayEnd}
					ts.Same[k] = same
				}
			}
			return nil
		})
	})
	if err == errTailKnown {
		err = nil
	}
	if err != nil {
		return TurnScan{}, err
	}
	if dup != nil {
		return TurnScan{}, dup
	}
	return ts, nil
}

// MoreElems reports whether an element of an array follows the one that
// ends at end in body (a comma comes next, not the array's end).
func MoreElems(body []byte, end int) bool {
	s := Scanner{B: body, I: end}
	s.WS()
	return s.Peek() == ','
}
