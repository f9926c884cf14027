package store

import (
	"cmp"
	"slices"
	"time"
)

// The dashboard's reads: counts of a tenant's incidents in groups, made by
// the store so that a page over 100,000 incidents moves a few thousand
// groups, not the incidents; and pages of incidents chosen by a filter.

// GroupQuery selects the incidents of one tenant that IncidentGroups counts.
type GroupQuery struct {
	Workspace string // required
	Project   string // required
	// Since, when non-zero, drops incidents older than it (Time < Since).
	Since time.Time
	// Until, when non-zero, drops incidents at or after it (Time >= Until).
	Until time.Time
}

// IncidentGroup counts the incidents of one tenant that share a UTC hour,
// a type, a status code, a code, a provider and a fingerprint.
type IncidentGroup struct {
	Hour        time.Time // the start of the UTC hour
	Type        string
	StatusCode  int
	Code        string
	Provider    string
	Fingerprint string
	Count       int
	// SampleID and Sample are the ID and message of the group's incident
	// with the greatest ID (the newest, for IDs the store assigned).
	SampleID string
	Sample   string
}

// groupKey is what the incidents of one IncidentGroup share.
type groupKey struct {
	hour                             int64 // Unix seconds of the hour
	typ, code, provider, fingerprint string
	status                           int
}

func groupKeyOf(inc *Incident) groupKey {
	return groupKey{hour: hourOf(inc.Time), typ: inc.Type, code: inc.Code, provider: inc.Provider,
		fingerprint: inc.Fingerprint, status: inc.StatusCode}
}

// hourOf returns the Unix seconds of the start of t's UTC hour.
func hourOf(t time.Time) int64 {
	s := t.Unix()
	h := s - s%3600
	if s%3600 < 0 {
		h -= 3600
	}
	return h
}

// sortGroups orders groups by hour, then type, status code, code,
// provider and fingerprint: the order IncidentGroups returns them in.
func sortGroups(gs []IncidentGroup) {
	slices.SortFunc(gs, func(a, b IncidentGroup) int {
		return cmp.Or(a.Hour.Compare(b.Hour), cmp.Compare(a.Type, b.Type), cmp.Compare(a.StatusCode, b.StatusCode),
			cmp.Compare(a.Code, b.Code), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
}

// IncidentFilter selects a page of one tenant's incidents, newest first.
// Every field set must match.
type IncidentFilter struct {
	Workspace string // required
	Project   string // required
	Session   string
	Type      string
	Provider  string
	Model     string
	// Fingerprints, when not empty, keeps incidents whose Fingerprint is
	// one of them.
	Fingerprints []string
	// Since and Until bound Time: Since <= Time < Until (zero: unbounded).
	Since, Until time.Time
	// Cursor continues a listing: the Next of the page before. It is
	// opaque and belongs to the backend that made it.
	Cursor string
	// Limit caps the page; 0 means 100. Backends cap it at 10000.
	Limit int
}

// IncidentPage is one page of a filtered listing.
type IncidentPage struct {
	Incidents []Incident
	// Next, when not empty, is the Cursor of the following page.
	Next string
}

// matches reports whether inc passes f's field filters (the tenant and
// the time bounds are the caller's).
func (f *IncidentFilter) matches(inc *Incident) bool {
	switch {
	case f.Session != "" && inc.Session != f.Session,
		f.Type != "" && inc.Type != f.Type,
		f.Provider != "" && inc.Provider != f.Provider,
		f.Model != "" && inc.Model != f.Model:
		return false
	}
	return len(f.Fingerprints) == 0 || slices.Contains(f.Fingerprints, inc.Fingerprint)
}

// clean cleans f's names as stored names are (see the package doc, # Text).
func (f *IncidentFilter) clean() {
	for _, p := range []*string{&f.Workspace, &f.Project, &f.Session, &f.Type, &f.Provider, &f.Model} {
		*p = cleanText(*p)
	}
	fps := make([]string, len(f.Fingerprints))
	for i, fp := range f.Fingerprints {
		fps[i] = cleanText(fp)
	}
	f.Fingerprints = fps
}
