package memoryapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/store"
)

// The tenants the store holds, as a caller may see them: the memory API's
// GET /scar/v1/workspaces and the dashboard's workspace and project picker.

// tenantsOf returns the tenants holding records that gateway key k (nil:
// the admin) may use, the most recently changed first, at most limit.
// For a key the store's whole list is read (store.MaxLimit) and its own
// kept, so that other workspaces never crowd them out.
func (a *API) tenantsOf(ctx context.Context, k *tenant.Key, limit int) ([]store.TenantRef, error) {
	read := limit
	if k != nil {
		read = store.MaxLimit
	}
	refs, err := a.store.ListTenants(ctx, read)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return refs, nil
	}
	kept := refs[:0]
	for _, r := range refs {
		if r.Workspace == k.Workspace && (r.Project == "" || k.AllowsProject(r.Project)) {
			kept = append(kept, r)
		}
	}
	return kept[:min(len(kept), limit)], nil
}

// workspaceView is a workspace as GET /scar/v1/workspaces lists it.
type workspaceView struct {
	Workspace string        `json:"workspace"`
	Latest    string        `json:"latest"` // RFC 3339
	Projects  []projectView `json:"projects"`
}

type projectView struct {
	Project string `json:"project"`
	Latest  string `json:"latest"`
}

// groupWorkspaces groups tenants (the most recently changed first) by
// workspace, in the same order; a workspace's solutions (project "")
// count for its Latest, and are not a project.
func groupWorkspaces(refs []store.TenantRef) []workspaceView {
	out := []workspaceView{}
	at := map[string]int{}
	for _, r := range refs {
		i, ok := at[r.Workspace]
		if !ok {
			i = len(out)
			at[r.Workspace] = i
			out = append(out, workspaceView{Workspace: r.Workspace, Latest: r.Latest.UTC().Format(timeFormat), Projects: []projectView{}})
		}
		if r.Project != "" {
			out[i].Projects = append(out[i].Projects, projectView{Project: r.Project, Latest: r.Latest.UTC().Format(timeFormat)})
		}
	}
	return out
}

// timeFormat is how the workspace list writes times.
const timeFormat = "2006-01-02T15:04:05.999999Z07:00"

// listWorkspaces answers GET /scar/v1/workspaces: the workspaces and
// projects that hold records, the most recently changed first; a gateway
// key's own workspace only.
func (a *API) listWorkspaces(c echo.Context) error {
	limit, aerr := listLimit(c.QueryParams())
	if aerr != nil {
		return aerr
	}
	if c.QueryParam("limit") == "" {
		limit = store.MaxLimit
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	refs, err := a.tenantsOf(ctx, scopeOf(c), limit)
	if err != nil {
		return a.storeError(c, "list_tenants", err)
	}
	return c.JSON(http.StatusOK, map[string]any{"workspaces": groupWorkspaces(refs)})
}
