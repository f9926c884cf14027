// Package bytepair is a set of byte pairs, 8 KB, one bit each: a screen
// before a string search or a map lookup. A text's set holds every two
// adjacent bytes of it, and a word whose first two bytes are not in the
// set of a text is not in that text; a set of words' openings turns away
// the words that open otherwise.
package bytepair

// Set is a set of byte pairs.
type Set [1 << 16 / 64]uint64

func key(a, b byte) uint16 { return uint16(a)<<8 | uint16(b) }

// Add adds the pair a, b.
func (s *Set) Add(a, b byte) { k := key(a, b); s[k>>6] |= 1 << (k & 63) }

// Has reports whether s holds the pair a, b.
func (s *Set) Has(a, b byte) bool { k := key(a, b); return s[k>>6]&(1<<(k&63)) != 0 }

// AddText adds every two adjacent bytes of text.
func (s *Set) AddText(text string) {
	for i := 0; i+1 < len(text); i++ {
		s.Add(text[i], text[i+1])
	}
}

// MayHold reports whether a text whose pairs s holds may hold w: false
// only when w's first two bytes are not among them. A word shorter than
// two bytes may always be there.
func (s *Set) MayHold(w string) bool {
	return len(w) < 2 || s.Has(w[0], w[1])
}
