package ui

import (
	"fmt"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// chart is a stacked bar chart of failures per bucket and pattern, drawn
// as inline SVG by the overview template, with its numbers as a table.
type chart struct {
	Width, Height int
	Top, Bottom   int // the plot's top and bottom y
	Left, Right   int // the plot's left and right x
	Bars          []bar
	Series        []series
	Max           int
	Ticks         []tick
	Summary       string
	Empty         bool
}

type bar struct {
	X, W   int
	Label  string // the bucket, for the table and the tooltip
	XLabel string // shown under the bar ("" for most bars)
	Total  int
	Segs   []seg
	Cells  []int // per series, for the table
}

type seg struct {
	Y, H  int
	Class string
	Title string
}

type series struct {
	Name, Class string
	Total       int
}

type tick struct {
	Y     int
	Label string
}

// maxSeries is how many patterns get their own colour; the rest are one.
const maxSeries = 6

// buildChart draws the failures (loops excluded) of groups in [since,
// until) per bucket, stacked by pattern, the patterns in the order of
// pats (most failures first).
func buildChart(groups []Group, pats []patternRow, since, until time.Time, bucket time.Duration) chart {
	c := chart{Width: 760, Height: 240, Top: 12, Bottom: 200, Left: 44, Right: 750}
	idx := map[string]int{}
	for i, p := range pats {
		if i < maxSeries {
			idx[p.Pattern] = i
			c.Series = append(c.Series, series{Name: p.Pattern, Class: fmt.Sprintf("s%d", i)})
		}
	}
	other := len(c.Series)
	if len(pats) > maxSeries {
		c.Series = append(c.Series, series{Name: "Other patterns", Class: fmt.Sprintf("s%d", maxSeries)})
	}
	n := int(until.Sub(since) / bucket)
	counts := make([][]int, n)
	for i := range counts {
		counts[i] = make([]int, len(c.Series))
	}
	for _, g := range groups {
		if g.Type == store.TypeLoop || g.Hour.Before(since) || !g.Hour.Before(until) {
			continue
		}
		b := int(g.Hour.Sub(since) / bucket)
		si, ok := idx[g.Pattern]
		if !ok {
			si = other
		}
		counts[b][si] += g.Count
		c.Series[si].Total += g.Count
	}
	for _, row := range counts {
		t := 0
		for _, v := range row {
			t += v
		}
		c.Max = max(c.Max, t)
	}
	c.Empty = c.Max == 0
	scaleMax := niceMax(c.Max)
	plotH := c.Bottom - c.Top
	for i := 0; i <= 4; i++ {
		v := scaleMax * i / 4
		c.Ticks = append(c.Ticks, tick{Y: c.Bottom - plotH*i/4, Label: fmt.Sprint(v)})
	}
	slot := float64(c.Right-c.Left) / float64(n)
	labelEvery := max(1, n/8)
	layout := "15:04"
	if bucket >= 24*time.Hour {
		layout = "Jan 2"
	}
	busiest, busiestAt := 0, ""
	for i, row := range counts {
		start := since.Add(time.Duration(i) * bucket)
		b := bar{X: c.Left + int(float64(i)*slot+slot*0.15), W: max(1, int(slot*0.7)), Cells: row}
		if bucket >= 24*time.Hour {
			b.Label = start.Format("2006-01-02")
		} else {
			b.Label = start.Format("2006-01-02 15:04") + " UTC"
		}
		if i%labelEvery == 0 || i == n-1 {
			b.XLabel = start.Format(layout)
		}
		y := c.Bottom
		for si, v := range row {
			b.Total += v
			if v == 0 {
				continue
			}
			h := max(1, v*plotH/scaleMax)
			y -= h
			b.Segs = append(b.Segs, seg{Y: y, H: h, Class: c.Series[si].Class,
				Title: fmt.Sprintf("%s: %s ×%d", b.Label, c.Series[si].Name, v)})
		}
		if b.Total > busiest {
			busiest, busiestAt = b.Total, b.Label
		}
		c.Bars = append(c.Bars, b)
	}
	var parts []string
	for _, s := range c.Series {
		parts = append(parts, fmt.Sprintf("%s %d", s.Name, s.Total))
	}
	if c.Empty {
		c.Summary = "No failures in this range."
	} else {
		c.Summary = fmt.Sprintf("Failures per %s, stacked by pattern: %s. Busiest: %s with %d.",
			map[bool]string{true: "day", false: "hour"}[bucket >= 24*time.Hour], strings.Join(parts, ", "), busiestAt, busiest)
	}
	return c
}

// niceMax rounds m up to 1, 2 or 5 times a power of ten (at least 4, so
// that four ticks are whole numbers).
func niceMax(m int) int {
	if m <= 4 {
		return 4
	}
	for p := 1; ; p *= 10 {
		for _, f := range []int{1, 2, 5} {
			if v := f * p * 4; v >= m {
				return v
			}
		}
	}
}
