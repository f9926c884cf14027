package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"time"
)

// newID returns a 26-character identifier that sorts by t: 16 hex digits of
// t's Unix nanoseconds followed by 10 random hex digits. Two IDs made in the
// same nanosecond differ in their random part (40 bits).
func newID(t time.Time) string {
	var b [13]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixNano()))
	// crypto/rand.Read never returns an error and always fills b.
	_, _ = rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

// Limits shared by both backends.
const (
	defaultIncidentLimit = 100   // IncidentQuery.Limit when 0
	maxLimit             = 10000 // cap on IncidentQuery.Limit and SolutionChanges' limit
	defaultChangeLimit   = 1000  // SolutionChanges' limit when <= 0
)

// incidentLimit applies IncidentQuery.Limit's default and cap.
func incidentLimit(n int) int {
	switch {
	case n <= 0:
		return defaultIncidentLimit
	case n > maxLimit:
		return maxLimit
	}
	return n
}

// changeLimit applies SolutionChanges' default and cap.
func changeLimit(n int) int {
	switch {
	case n <= 0:
		return defaultChangeLimit
	case n > maxLimit:
		return maxLimit
	}
	return n
}

// normTime is the form in which both backends store a time: UTC, whole
// microseconds (PostgreSQL's precision), no monotonic reading.
func normTime(t time.Time) time.Time {
	return t.Truncate(time.Microsecond).UTC()
}

// ceilMicro rounds t up to a whole microsecond, so that for any stored
// (microsecond) time s, s < t exactly when s < ceilMicro(t).
func ceilMicro(t time.Time) time.Time {
	tr := t.Truncate(time.Microsecond)
	if tr.Before(t) {
		tr = tr.Add(time.Microsecond)
	}
	return tr.UTC()
}

// maxDedupeKey is the longest dedupe key stored as given; longer ones are
// stored as their SHA-256 (both backends index the key).
const maxDedupeKey = 256

// dedupeKey returns the form in which key is stored.
func dedupeKey(key string) string {
	if len(key) <= maxDedupeKey {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
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

// validSolution returns an error wrapping ErrInvalid for a solution missing
// a required field or whose confidence is NaN or infinite.
func validSolution(s *Solution) error {
	switch {
	case s == nil:
		return fmt.Errorf("%w: nil solution", ErrInvalid)
	case s.Workspace == "":
		return fmt.Errorf("%w: solution without workspace", ErrInvalid)
	case s.Key == "":
		return fmt.Errorf("%w: solution without key", ErrInvalid)
	case s.Goal == "":
		return fmt.Errorf("%w: solution without goal", ErrInvalid)
	case math.IsNaN(s.Confidence) || math.IsInf(s.Confidence, 0):
		return fmt.Errorf("%w: solution confidence is not a number", ErrInvalid)
	}
	return nil
}

// fixLimit applies FixQuery.Limit's default and cap (those of incidents).
func fixLimit(n int) int { return incidentLimit(n) }

// validFix returns an error wrapping ErrInvalid for a fix missing a
// required field or with a negative failure count.
func validFix(f *Fix) error {
	switch {
	case f == nil:
		return fmt.Errorf("%w: nil fix", ErrInvalid)
	case f.Workspace == "":
		return fmt.Errorf("%w: fix without workspace", ErrInvalid)
	case f.Project == "":
		return fmt.Errorf("%w: fix without project", ErrInvalid)
	case f.Key == "":
		return fmt.Errorf("%w: fix without key", ErrInvalid)
	case f.Tool == "":
		return fmt.Errorf("%w: fix without tool", ErrInvalid)
	case f.Failures < 0:
		return fmt.Errorf("%w: fix with a negative failure count", ErrInvalid)
	}
	return nil
}
