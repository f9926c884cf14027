package memoryapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// wrongIn is the optional body of POST …/wrong.
type wrongIn struct {
	Note string `json:"note"`
}

// wrongMark reads the mark a request asks for: POST marks (with the
// body's note, when it has a body), DELETE clears.
func (a *API) wrongMark(c echo.Context) (*store.Wrong, *wire.Error) {
	if c.Request().Method == http.MethodDelete {
		return nil, nil
	}
	var in wrongIn
	if r := c.Request(); r.ContentLength != 0 {
		if aerr := a.decodeJSON(c, &in); aerr != nil {
			return nil, aerr
		}
	}
	return a.memory.WrongMark(true, in.Note), nil
}

// markFix marks one learned fix wrong (POST) or clears its mark (DELETE),
// and answers with the fix as stored.
func (a *API) markFix(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := a.tenantFor(c, q.Get("workspace"), q.Get("project"), false)
	if aerr != nil {
		return aerr
	}
	mark, aerr := a.wrongMark(c)
	if aerr != nil {
		return aerr
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	f, err := a.memory.MarkFix(ctx, t.Workspace, t.Project, c.Param("id"), mark)
	if errors.Is(err, store.ErrNotFound) {
		return &wire.Error{Status: http.StatusNotFound, Message: "No fix with that id in workspace " + tenant.Quote(t.Workspace) + ", project " + tenant.Quote(t.Project) + ".", Type: "invalid_request_error", Code: "not_found"}
	}
	if err != nil {
		return a.storeError(c, "mark_fix", err)
	}
	return c.JSON(http.StatusOK, f)
}

// markSolution marks one solution wrong (POST) or clears its mark
// (DELETE), and answers with the solution as stored.
func (a *API) markSolution(c echo.Context) error {
	mark, aerr := a.wrongMark(c)
	if aerr != nil {
		return aerr
	}
	return a.onSolution(c, "mark_solution", func(ctx context.Context, sol store.Solution) error {
		sol, err := a.memory.MarkSolution(ctx, sol.Workspace, sol.ID, mark)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, sol)
	})
}
