package backend

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// maxBatch caps the incidents of one AddIncidents call.
const maxBatch = 1000

// PrepareBatch validates and prepares every incident of batch.
func PrepareBatch(batch []store.IncidentWrite, now func() time.Time) error {
	if len(batch) > maxBatch {
		return fmt.Errorf("%w: %d incidents in one batch, at most %d", store.ErrInvalid, len(batch), maxBatch)
	}
	for i := range batch {
		if batch[i].Incident == nil {
			return fmt.Errorf("%w: batch entry %d has no incident", store.ErrInvalid, i)
		}
		batch[i].Stored = false
		if err := store.PrepareIncident(batch[i].Incident, now()); err != nil {
			return fmt.Errorf("batch entry %d: %w", i, err)
		}
	}
	return nil
}

// BatchTenants returns the tenants of batch, in one order (the lock order
// of concurrent writers).
func BatchTenants(batch []store.IncidentWrite) [][2]string {
	var ts [][2]string
	for _, w := range batch {
		ts = append(ts, [2]string{w.Incident.Workspace, w.Incident.Project})
	}
	slices.SortFunc(ts, func(a, b [2]string) int {
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	})
	return slices.Compact(ts)
}
