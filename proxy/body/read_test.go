package body

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/scarproxy/scarproxy/proxy/wire"
)

// readBodyOf runs Read on a request with the given body and announced
// length, with a lease or without.
func readBodyOf(t *testing.T, rd *Reader, body io.Reader, length int64, pooled bool) ([]byte, *wire.Error, *Lease) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", body)
	req.ContentLength = length
	var lease *Lease
	if pooled {
		lease = NewLease()
	}
	b, aerr := rd.Read(httptest.NewRecorder(), req, lease)
	return b, aerr, lease
}

// TestReadBodyDoesNotTrustContentLength: a request announcing 32 MiB and
// sending 10 bytes gets a buffer for what arrived, not for what it said.
func TestReadBodyDoesNotTrustContentLength(t *testing.T) {
	rd := NewReader(0, 0)
	for _, pooled := range []bool{false, true} {
		t.Run(fmt.Sprint("pooled=", pooled), func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			body := io.MultiReader(strings.NewReader("0123456789"), iotest.ErrReader(io.ErrUnexpectedEOF))
			_, aerr, lease := readBodyOf(t, rd, body, 32<<20, pooled)
			runtime.ReadMemStats(&after)
			if aerr == nil || aerr.Status != http.StatusBadRequest {
				t.Fatalf("a body cut short: %v", aerr)
			}
			if lease != nil {
				lease.Drop()
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
				t.Fatalf("reading 10 bytes of an announced 32 MiB allocated %d bytes", got)
			}
		})
	}
}

// TestReadBodyReadsEveryByte: whatever the body's size and whether its
// length is known, Read returns it whole, holding at most about twice
// its size.
func TestReadBodyReadsEveryByte(t *testing.T) {
	rd := NewReader(0, 0)
	for _, size := range []int{0, 1, 511, 512, 513, firstBodyBuf - 1, firstBodyBuf, firstBodyBuf + 512, firstBodyBuf + 513, 200 << 10, 1<<20 + 3, 3 << 20} {
		for _, known := range []bool{true, false} {
			for _, pooled := range []bool{false, true} {
				name := fmt.Sprintf("%d/known=%v/pooled=%v", size, known, pooled)
				want := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
				length := int64(size)
				if !known {
					length = -1
				}
				// One byte per read at the start, as a slow client sends.
				body := io.MultiReader(iotest.OneByteReader(bytes.NewReader(want[:min(size, 3)])), bytes.NewReader(want[min(size, 3):]))
				before := rd.Held()
				got, aerr, lease := readBodyOf(t, rd, body, length, pooled)
				if aerr != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s: read %d bytes (%v), want %d", name, len(got), aerr, size)
				}
				if limit := 2*size + unknownBodyBuf + 2*bytes.MinRead; cap(got) > limit && cap(got) > 1<<minPoolShift {
					t.Errorf("%s: a buffer of %d bytes for %d", name, cap(got), size)
				}
				if lease != nil {
					lease.Drop()
					if held := rd.Held(); held != before {
						t.Fatalf("%s: %d bytes still held from the budget once the lease is dropped", name, held-before)
					}
				}
			}
		}
	}
}

// TestReadGrowingFollowsTheBytes: a body of announced length grows its
// buffer by doubling until a quarter of it arrived, then takes room for
// all of it; a body that stops early never holds more than four times
// what arrived.
func TestReadGrowingFollowsTheBytes(t *testing.T) {
	size := 1<<20 + 3
	want := bytes.Repeat([]byte("x"), size)
	var grown []int
	grow := func(n int) []byte { grown = append(grown, n); return make([]byte, 0, n) }
	got, err := readGrowing(bytes.NewReader(want), int64(size), grow, func([]byte) {})
	if err != nil || len(got) != size {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, size)
	}
	wantGrown := []int{firstBodyBuf, 2 * firstBodyBuf, 4 * firstBodyBuf, 8 * firstBodyBuf, size + bytes.MinRead}
	if !slices.Equal(grown, wantGrown) {
		t.Errorf("buffers of %v bytes, want %v", grown, wantGrown)
	}
	for _, sent := range []int{10, firstBodyBuf, 3 * firstBodyBuf, 300 << 10} {
		grown = grown[:0]
		_, err := readGrowing(io.MultiReader(bytes.NewReader(want[:sent]), iotest.ErrReader(io.ErrUnexpectedEOF)), 32<<20, grow, func([]byte) {})
		if err == nil {
			t.Fatalf("a body cut at %d bytes read whole", sent)
		}
		if most := slices.Max(grown); most > 4*sent && most > firstBodyBuf {
			t.Errorf("%d bytes of an announced 32 MiB took a buffer of %d", sent, most)
		}
	}
}
