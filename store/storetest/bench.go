package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// The list benchmarks read the tenant bench/p of a store that its backend's
// benchmark seeds with BenchIncidents incidents, one a second back from
// BenchNewest, spread over BenchSessions sessions ("session-00" to
// "session-99", the i-th incident in session i % BenchSessions).
const (
	BenchIncidents = 1_000_000
	BenchSessions  = 100
)

// BenchNewest is the time of the newest incident of the benchmark tenant;
// incidents are one second apart, older ones back from it.
var BenchNewest = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// BenchmarkList runs the list cases shared by the bbolt and PostgreSQL
// benchmarks against a store seeded as described above.
func BenchmarkList(b *testing.B, s store.Store) {
	ctx := context.Background()
	cases := []struct {
		name string
		q    store.IncidentQuery
		want int
	}{
		{"window=10s/limit=1000", store.IncidentQuery{Since: BenchNewest.Add(-10 * time.Second), Limit: 1000}, 11},
		{"window=1h/limit=1000", store.IncidentQuery{Since: BenchNewest.Add(-time.Hour), Limit: 1000}, 1000},
		{"window=1h/session/limit=1000", store.IncidentQuery{Since: BenchNewest.Add(-time.Hour), Session: "session-07", Limit: 1000}, 36},
		{"window=none/limit=100", store.IncidentQuery{}, 100},
		{"window=empty", store.IncidentQuery{Since: BenchNewest.Add(time.Second), Limit: 1000}, 0},
	}
	for _, c := range cases {
		c.q.Workspace, c.q.Project = "bench", "p"
		b.Run(c.name, func(b *testing.B) {
			got, err := s.ListIncidents(ctx, c.q)
			if err != nil || len(got) != c.want {
				b.Fatalf("ListIncidents = %d incidents, %v; want %d", len(got), err, c.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ListIncidents(ctx, c.q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(c.want), "incidents/op")
		})
	}
}
