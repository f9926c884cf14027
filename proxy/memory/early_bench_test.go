package memory

import (
	"context"
	"testing"
	"time"
)

// BenchmarkEarly is a request's first look at its tenant's guard window,
// on bbolt, when this replica keeps the window: every request pays it.
func BenchmarkEarly(b *testing.B) {
	m := newTestMemory(b, tempBolt(b))
	ctx := context.Background()
	now := time.Now()
	if e := m.Early(ctx, "w", "p", now); e.err != nil {
		b.Fatal(e.err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if e := m.Early(ctx, "w", "p", now); e.err != nil {
			b.Fatal(e.err)
		}
	}
}
