package store

import "time"

// The tenants a store holds: the dashboard's workspace and project picker,
// and the memory API's list of workspaces.

// TenantRef is a tenant that holds records, and when it last changed.
type TenantRef struct {
	Workspace string `json:"workspace"`
	// Project is the project; "" for a workspace's solutions, which
	// belong to the workspace (a solution's own project is not listed).
	Project string `json:"project"`
	// Latest is the newest time among the tenant's records: an incident's
	// Time, a fix's or a solution's Updated, a usage record's Hour.
	Latest time.Time `json:"latest"`
}

// defaultTenantLimit is ListTenants' limit when it is 0 or less.
const defaultTenantLimit = 1000

// TenantLimit applies ListTenants' default (1000) and cap (MaxLimit) to
// limit.
func TenantLimit(limit int) int {
	switch {
	case limit <= 0:
		return defaultTenantLimit
	case limit > MaxLimit:
		return MaxLimit
	}
	return limit
}
