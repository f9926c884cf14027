package backend

import (
	"cmp"
	"slices"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// SortGroups orders groups by hour, then type, status code, code,
// provider and fingerprint: the order IncidentGroups returns them in.
func SortGroups(gs []store.IncidentGroup) {
	slices.SortFunc(gs, func(a, b store.IncidentGroup) int {
		return cmp.Or(a.Hour.Compare(b.Hour), cmp.Compare(a.Type, b.Type), cmp.Compare(a.StatusCode, b.StatusCode),
			cmp.Compare(a.Code, b.Code), cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Fingerprint, b.Fingerprint))
	})
}

// CleanFilter cleans f's names as stored names are (see package store's
// doc, # Text).
func CleanFilter(f *store.IncidentFilter) {
	for _, p := range []*string{&f.Workspace, &f.Project, &f.Session, &f.Type, &f.Provider, &f.Model} {
		*p = stored.Text(*p)
	}
	fps := make([]string, len(f.Fingerprints))
	for i, fp := range f.Fingerprints {
		fps[i] = stored.Text(fp)
	}
	f.Fingerprints = fps
}
