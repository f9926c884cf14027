package ui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

func TestNiceMax(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{0, 4}, {3, 4}, {4, 4}, {5, 8}, {9, 20}, {21, 40}, {41, 80}, {399, 400}, {401, 800}, {100_000, 200_000},
	} {
		if got := niceMax(tc.in); got != tc.want {
			t.Errorf("niceMax(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestTrend(t *testing.T) {
	for _, tc := range []struct {
		before, after int
		want          string
	}{
		{0, 0, "steady"}, {0, 3, "new"}, {4, 9, "rising"}, {10, 10, "steady"}, {9, 4, "falling"}, {1, 2, "steady"},
	} {
		if got := trend(tc.before, tc.after); got != tc.want {
			t.Errorf("trend(%d, %d) = %q, want %q", tc.before, tc.after, got, tc.want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/incidents?type=x": "/ui/incidents?type=x",
		"":                     "/ui/",
		"https://evil.example": "/ui/",
		"//evil.example/ui/":   "/ui/",
		"/ui/\r\nSet-Cookie:":  "/ui/",
		"/scar/v1/incidents":   "/ui/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// The chart stacks each bucket's failures by pattern, loops apart, the
// patterns beyond maxSeries in one "Other patterns" series.
func TestBuildChart(t *testing.T) {
	since := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	until := since.Add(4 * time.Hour)
	g := func(hour int, pattern, typ string, n int) Group {
		return Group{IncidentGroup: store.IncidentGroup{Hour: since.Add(time.Duration(hour) * time.Hour), Type: typ, Count: n}, Pattern: pattern}
	}
	var groups []Group
	var pats []patternRow
	for i := range maxSeries + 2 {
		name := fmt.Sprintf("P%d", i)
		groups = append(groups, g(1, name, store.TypeToolError, 10-i))
		pats = append(pats, patternRow{Pattern: name, Count: 10 - i})
	}
	groups = append(groups, g(3, "P0", store.TypeToolError, 2), g(3, "LOOP", store.TypeLoop, 50), g(9, "P0", store.TypeToolError, 7))
	c := buildChart(groups, pats, since, until, time.Hour)
	if len(c.Bars) != 4 || len(c.Series) != maxSeries+1 || c.Series[maxSeries].Name != "Other patterns" {
		t.Fatalf("bars %d series %+v", len(c.Bars), c.Series)
	}
	totals := []int{}
	for _, b := range c.Bars {
		totals = append(totals, b.Total)
	}
	// hour 1: 10+9+...+3 = 52; hour 3: 2 (the loop is not a failure); hour 9 is outside.
	if fmt.Sprint(totals) != "[0 52 0 2]" || c.Max != 52 {
		t.Fatalf("totals %v max %d", totals, c.Max)
	}
	if other := c.Bars[1].Cells[maxSeries]; other != 4+3 {
		t.Fatalf("other patterns: %d", other)
	}
	// Stacked: each segment starts where the one below ended.
	y := c.Bottom
	for _, s := range c.Bars[1].Segs {
		if s.Y+s.H != y {
			t.Fatalf("segment %+v does not sit on %d", s, y)
		}
		y = s.Y
	}
	if y < c.Top {
		t.Fatalf("bar above the plot: %d < %d", y, c.Top)
	}
	if !strings.Contains(c.Summary, "Busiest: 2026-01-02 01:00 UTC with 52") {
		t.Fatalf("summary: %q", c.Summary)
	}
	if e := buildChart(nil, nil, since, until, time.Hour); !e.Empty || e.Summary != "No failures in this range." {
		t.Fatalf("empty chart: %+v", e)
	}
}
