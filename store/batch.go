package store

import (
	"fmt"
	"time"

	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// IncidentWrite is one incident of a batch given to AddIncidents.
type IncidentWrite struct {
	Incident *Incident
	// DedupeKey, when set, stores the incident only when the key is new
	// for its tenant, as AddIncidentOnce does.
	DedupeKey string
	// Stored is set by AddIncidents: the incident was stored (false: its
	// dedupe key was known).
	Stored bool
}

// VersionStep says that one AddIncidents call moved a tenant's incident
// version from From to To, and that nothing else changed the tenant's
// incidents between the two: whoever holds what it derived from the
// tenant's incidents at From may add the batch's stored incidents of the
// tenant to it and hold the result at To, instead of reading them again.
type VersionStep struct {
	Workspace, Project string
	From, To           int64
}

// PrepareIncident validates inc and puts it in the form a store keeps it:
// its text cleaned, its Time set (now when zero) and normalized, its ID
// assigned when empty. The Add methods do the same; a caller that shows an
// incident before the store has it (a proxy's pending failures) prepares
// it first, so that what it shows is what will be read back. It returns
// ErrInvalid as AddIncident does.
func PrepareIncident(inc *Incident, now time.Time) error {
	if err := validIncident(inc); err != nil {
		return err
	}
	cleanIncident(inc)
	if inc.Time.IsZero() {
		inc.Time = now
	}
	inc.Time = stored.Time(inc.Time)
	if inc.ID == "" {
		inc.ID = stored.NewID(inc.Time)
	}
	return nil
}

// validIncident returns an error wrapping ErrInvalid for an incident
// without a tenant.
func validIncident(inc *Incident) error {
	switch {
	case inc == nil:
		return fmt.Errorf("%w: nil incident", ErrInvalid)
	case inc.Workspace == "":
		return fmt.Errorf("%w: incident without workspace", ErrInvalid)
	case inc.Project == "":
		return fmt.Errorf("%w: incident without project", ErrInvalid)
	}
	return nil
}

// cleanIncident cleans every text field of inc.
func cleanIncident(inc *Incident) {
	for _, f := range []*string{&inc.ID, &inc.Workspace, &inc.Project, &inc.Session, &inc.Agent,
		&inc.Provider, &inc.Model, &inc.Type, &inc.Code, &inc.Message, &inc.Fingerprint} {
		*f = stored.Text(*f)
	}
}
