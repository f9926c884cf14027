package wire

import "testing"

func TestMemoSumsTellPrefixesApart(t *testing.T) {
	s := NewMemoSeed()
	if s.Head("a", []byte("bc")) == s.Head("ab", []byte("c")) {
		t.Error("the tenant and the head run together: tenant a with head bc sums as tenant ab with head c")
	}
	if s.Head("t", []byte("head")) == NewMemoSeed().Head("t", []byte("head")) {
		t.Error("two seeds give the same sum")
	}
	h := s.Head("t", []byte("head"))
	if NextSum(h, nil) != h {
		t.Error("no bytes changed the sum")
	}
	// A change of one byte anywhere in an element, short or long, changes
	// its sum; so does where the bytes were cut.
	for _, n := range []int{1, 3, 8, 16, 100, 240, 241, 5000, 1 << 20} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + i%26)
		}
		want := NextSum(h, b)
		for _, at := range []int{0, n / 2, n - 1} {
			b[at] ^= 1
			if NextSum(h, b) == want {
				t.Errorf("%d bytes: a change at %d keeps the sum", n, at)
			}
			b[at] ^= 1
		}
		if NextSum(NextSum(h, b[:n/2]), b[n/2:]) == want && n > 1 {
			t.Errorf("%d bytes cut in two sum as one element", n)
		}
		if s.Bytes(b) == want {
			t.Errorf("%d bytes: their sum after the head is their sum alone", n)
		}
	}
}
