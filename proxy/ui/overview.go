package ui

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/store"
)

// span is a time range a page may show, and the bucket of its chart.
type span struct {
	Name   string // the query value: "24h", "7d", "30d"
	Label  string
	Length time.Duration
	Bucket time.Duration
}

var spans = []span{
	{"24h", "last 24 hours, by hour", 24 * time.Hour, time.Hour},
	{"7d", "last 7 days, by day", 7 * 24 * time.Hour, 24 * time.Hour},
	{"30d", "last 30 days, by day", 30 * 24 * time.Hour, 24 * time.Hour},
}

// spanOf returns the span a query names (default: the first).
func spanOf(name string) span {
	for _, s := range spans {
		if s.Name == name {
			return s
		}
	}
	return spans[0]
}

// rangeOf returns [since, until) of sp at now: whole buckets, the last
// one holding now.
func rangeOf(sp span, now time.Time) (since, until time.Time) {
	until = now.UTC().Truncate(sp.Bucket).Add(sp.Bucket)
	return until.Add(-sp.Length), until
}

// overviewData is the overview page.
type overviewData struct {
	Span         span
	Spans        []span
	Failures     int
	Chart        chart
	Patterns     []patternRow
	Fingerprints []fingerprintRow
	Loops        []loopRow
	LoopTotal    int
	Providers    []providerRow
	Solutions    solutionStats
	Recent       []store.Incident
	RecentPat    []string
	RecentLabels map[string]store.Conversation
	Usage        store.Usage // the range's token usage, summed
}

type patternRow struct {
	Pattern       string
	Count         int
	Before, After int // in the first and the second half of the range
	Trend         string
}

type fingerprintRow struct {
	Fingerprint, Pattern, Type, Example string
	Count                               int
	Last                                time.Time
}

type loopRow struct {
	Level, Label string
	Count        int
}

type providerRow struct {
	Provider string
	Failures int
	PerHour  float64
	Kinds    string // e.g. "429 ×12, timeout ×3"
}

type solutionStats struct {
	Total, Verified, Auto, New int
}

// trend describes the change from before to after.
func trend(before, after int) string {
	switch {
	case before == 0 && after > 0:
		return "new"
	case after > before*3/2 && after-before >= 2:
		return "rising"
	case before > after*3/2 && before-after >= 2:
		return "falling"
	}
	return "steady"
}

// loopLevels are the levels a loop incident's Code names, in order. They
// count loops, once per loop and level: how many requests carried a
// guard is scarproxy_blocks_injected_total, per replica.
var loopLevels = []loopRow{
	{Level: "guard", Label: "Loops named in the guard"},
	{Level: "stop", Label: "Loops that got the STOP block"},
	{Level: "hard-stop", Label: "Loops stopped without tools"},
	{Level: "broken", Label: "Loops broken"},
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request, s *session, p *page) {
	ctx := r.Context()
	now := h.opts.Now()
	sp := spanOf(r.FormValue("range"))
	since, until := rangeOf(sp, now)
	groups, err := h.src.Groups(ctx, p.WS, p.Proj, since, until)
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	d := overviewData{Span: sp, Spans: spans}
	mid := since.Add(sp.Length / 2)

	pats := map[string]*patternRow{}
	fps := map[string]*fingerprintRow{}
	loops := map[string]int{}
	provs := map[string]*providerRow{}
	provKinds := map[string]map[string]int{}
	for _, g := range groups {
		if g.Type == store.TypeLoop {
			loops[g.Code] += g.Count
			d.LoopTotal += g.Count
			continue
		}
		d.Failures += g.Count
		pr := pats[g.Pattern]
		if pr == nil {
			pr = &patternRow{Pattern: g.Pattern}
			pats[g.Pattern] = pr
		}
		pr.Count += g.Count
		if g.Hour.Before(mid) {
			pr.Before += g.Count
		} else {
			pr.After += g.Count
		}
		fk := g.Fingerprint + "\x00" + g.Type
		fr := fps[fk]
		if fr == nil {
			fr = &fingerprintRow{Fingerprint: g.Fingerprint, Type: g.Type, Pattern: g.Pattern}
			fps[fk] = fr
		}
		fr.Count += g.Count
		if !g.Hour.Before(fr.Last) {
			fr.Last, fr.Example = g.Hour, g.Sample
		}
		if guard.ProviderFailure(g.Type) {
			name := cmp.Or(g.Provider, "(unknown)")
			pv := provs[name]
			if pv == nil {
				pv = &providerRow{Provider: name}
				provs[name] = pv
				provKinds[name] = map[string]int{}
			}
			pv.Failures += g.Count
			kind := g.Type
			if g.StatusCode != 0 {
				kind = fmt.Sprint(g.StatusCode)
			}
			provKinds[name][kind] += g.Count
		}
	}
	for _, pr := range pats {
		pr.Trend = trend(pr.Before, pr.After)
		d.Patterns = append(d.Patterns, *pr)
	}
	slices.SortFunc(d.Patterns, func(a, b patternRow) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Pattern, b.Pattern))
	})
	for _, fr := range fps {
		fr.Example = guard.Sanitize(guard.Redact(fr.Example), 160)
		d.Fingerprints = append(d.Fingerprints, *fr)
	}
	slices.SortFunc(d.Fingerprints, func(a, b fingerprintRow) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), b.Last.Compare(a.Last), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
	if len(d.Fingerprints) > 10 {
		d.Fingerprints = d.Fingerprints[:10]
	}
	for _, l := range loopLevels {
		l.Count = loops[l.Level]
		d.Loops = append(d.Loops, l)
	}
	hours := sp.Length.Hours()
	for name, pv := range provs {
		pv.PerHour = float64(pv.Failures) / hours
		var kinds []string
		for k := range provKinds[name] {
			kinds = append(kinds, k)
		}
		slices.SortFunc(kinds, func(a, b string) int {
			return cmp.Or(cmp.Compare(provKinds[name][b], provKinds[name][a]), cmp.Compare(a, b))
		})
		for i, k := range kinds {
			if i > 0 {
				pv.Kinds += ", "
			}
			pv.Kinds += fmt.Sprintf("%s ×%d", k, provKinds[name][k])
		}
		d.Providers = append(d.Providers, *pv)
	}
	slices.SortFunc(d.Providers, func(a, b providerRow) int {
		return cmp.Or(cmp.Compare(b.Failures, a.Failures), cmp.Compare(a.Provider, b.Provider))
	})
	d.Chart = buildChart(groups, d.Patterns, since, until, sp.Bucket)

	sols, err := h.src.Solutions(ctx, s.p, p.WS)
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	for _, sol := range sols {
		d.Solutions.Total++
		if sol.Verified {
			d.Solutions.Verified++
		}
		if sol.Source == store.SourceAuto {
			d.Solutions.Auto++
		}
		if !sol.Created.Before(since) {
			d.Solutions.New++
		}
	}
	page, pats2, err := h.src.Incidents(ctx, store.IncidentFilter{Workspace: p.WS, Project: p.Proj, Limit: 5})
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	d.Recent, d.RecentPat, d.RecentLabels = page.Incidents, pats2, h.labels(ctx, p, page.Incidents)
	hoursUsed, err := h.src.Usage(ctx, store.UsageQuery{Workspace: p.WS, Project: p.Proj, Since: since, Until: until, By: store.UsageByHour, Limit: store.MaxLimit})
	if err != nil {
		h.fail(w, r, p, err)
		return
	}
	d.Usage, _ = usageBuckets(hoursUsed, sp.Bucket)
	p.Title = "Overview"
	p.Data = d
	h.render(w, http.StatusOK, "overview", p)
}
