package body

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestGetBufSizes(t *testing.T) {
	for _, n := range []int{0, 1, 16 << 10, 16<<10 + 1, 100 << 10, 1 << 20, 1<<20 + 1, 5 << 20} {
		b := getBuf(n)
		if len(*b) != 0 || cap(*b) < n {
			t.Errorf("getBuf(%d): len %d cap %d", n, len(*b), cap(*b))
		}
		pooled := cap(*b)&(cap(*b)-1) == 0 && cap(*b) <= 1<<maxPoolShift
		if n <= 1<<maxPoolShift && !pooled {
			t.Errorf("getBuf(%d) = cap %d, not a pooled size", n, cap(*b))
		}
		putBuf(b)
	}
	odd := make([]byte, 0, 20000)
	putBuf(&odd) // not a class size: dropped, not pooled
	if b := getBuf(16 << 10); cap(*b) == 20000 {
		t.Error("a buffer of a size that is not a class came back from the pool")
	}
}

// TestPoolBounds: a long conversation's body (past 1 MiB) comes back
// from its free list, and no free list holds more than freeClassBytes.
func TestPoolBounds(t *testing.T) {
	b := getBuf(3 << 20)
	if cap(*b) != 4<<20 {
		t.Fatalf("getBuf(3 MiB) has room for %d bytes, want 4 MiB", cap(*b))
	}
	*b = append(*b, "x"...)
	free := bodyFree[maxPoolShift-minPoolShift] // 4 MiB
	n := len(free)
	putBuf(b)
	if len(free) != n+1 {
		t.Error("a 4 MiB buffer given back was not kept")
	}
	if got := getBuf(3 << 20); len(*got) != 0 || cap(*got) != 4<<20 {
		t.Errorf("getBuf(3 MiB) from the free list: len %d cap %d", len(*got), cap(*got))
	}
	for i, ch := range bodyFree {
		size := 1 << (minPoolShift + i)
		if cap(ch) < 1 || cap(ch) > freePerClass || cap(ch)*size > freeClassBytes {
			t.Errorf("the %d KiB free list holds %d buffers", size>>10, cap(ch))
		}
	}
}

// The lease returns its buffers only when the handler and every reader the
// transport was given are done, and a closed reader reads nothing more.
func TestBodyLease(t *testing.T) {
	l := NewLease()
	b := l.Buf(100)
	*b = append(*b, "payload"...)
	r1 := NewDrainReader(*b, l)
	r2 := NewDrainReader(*b, l) // a replay (GetBody)
	l.Drop()                    // the handler returns first
	if got := l.refs.Load(); got != 2 {
		t.Fatalf("refs %d after the handler let go, want 2 (two open readers)", got)
	}
	if p, _ := io.ReadAll(r1); string(p) != "payload" {
		t.Fatalf("read %q", p)
	}
	r1.Close()
	r1.Close() // twice is once
	if got := l.refs.Load(); got != 1 {
		t.Fatalf("refs %d, want 1", got)
	}
	r2.Close()
	if l.refs.Load() != 0 || l.bufs != nil {
		t.Fatalf("refs %d, %d buffers kept after the last reader closed", l.refs.Load(), len(l.bufs))
	}
	if n, err := r2.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("Read after Close = %d, %v", n, err)
	}
	if n, _ := r2.WriteTo(io.Discard); n != 0 {
		t.Fatalf("WriteTo after Close wrote %d bytes", n)
	}
}

// TestDrainReader: a drain reader gives every byte once and then holds
// none of them.
func TestDrainReader(t *testing.T) {
	data := []byte(strings.Repeat("0123456789", 1000))
	tests := []struct {
		name string
		read func(*DrainReader) ([]byte, error)
	}{
		{"Read", func(r *DrainReader) ([]byte, error) { return io.ReadAll(r) }},
		{"WriteTo", func(r *DrainReader) ([]byte, error) {
			var buf bytes.Buffer
			n, err := r.WriteTo(&buf)
			if n != int64(buf.Len()) {
				return nil, fmt.Errorf("WriteTo returned %d, wrote %d", n, buf.Len())
			}
			return buf.Bytes(), err
		}},
		{"small reads", func(r *DrainReader) ([]byte, error) { return io.ReadAll(io.LimitReader(r, 1<<20)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &DrainReader{b: data}
			if r.Len() != len(data) {
				t.Fatalf("Len = %d before reading, want %d", r.Len(), len(data))
			}
			got, err := tt.read(r)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes, %v; want the %d bytes", len(got), err, len(data))
			}
			if r.b != nil || r.Len() != 0 {
				t.Errorf("the reader still references the body after reading it (Len %d)", r.Len())
			}
			if n, err := r.Read(make([]byte, 8)); n != 0 || err != io.EOF {
				t.Errorf("Read after the end = %d, %v; want 0, EOF", n, err)
			}
		})
	}
}
