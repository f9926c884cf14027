package store

import (
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
	// Limit caps the page; 0 means 100. Backends cap it at MaxLimit.
	Limit int
}

// IncidentPage is one page of a filtered listing.
type IncidentPage struct {
	Incidents []Incident
	// Next, when not empty, is the Cursor of the following page.
	Next string
}
