package proxy

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// scopeKey holds, in the Echo context, the workspace a gateway key limits
// an admin request to.
const scopeKey = "scar.scope"

// adminAuth guards /scar/v1: with an admin token or gateway keys
// configured, a request needs the admin token (every workspace) or a
// gateway key (its own workspace only).
func (s *Server) adminAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.opts.AdminToken == "" && !s.keys.enabled() {
			return next(c)
		}
		tok := bearer(c.Request().Header)
		if s.opts.AdminToken != "" && tok != "" &&
			subtle.ConstantTimeCompare([]byte(tok), []byte(s.opts.AdminToken)) == 1 {
			return next(c)
		}
		if s.keys.enabled() {
			if k := s.keys.lookup(tok); k != nil {
				c.Set(scopeKey, k)
				return next(c)
			}
		}
		return writeError(c, &apiError{Status: http.StatusUnauthorized, Message: "The memory API needs the admin token or a gateway key.", Type: "invalid_request_error", Code: "unauthorized"})
	}
}

// workspaceFor resolves the workspace an admin request acts on: the one
// asked, else the configured default; a gateway key may only name its own.
func (s *Server) workspaceFor(c echo.Context, asked string) (string, *apiError) {
	k, _ := c.Get(scopeKey).(*GatewayKey)
	if k == nil {
		if asked == "" {
			asked = s.opts.DefaultWorkspace
		}
		if err := ValidName(asked); err != nil {
			return "", errBadRequest("workspace: " + err.Error())
		}
		return asked, nil
	}
	if asked != "" && asked != k.Workspace {
		return "", &apiError{Status: http.StatusForbidden, Message: "This gateway key does not give access to workspace " + quoteName(asked) + ".", Type: "invalid_request_error", Code: "workspace_forbidden"}
	}
	return k.Workspace, nil
}

// projectScope checks a project named by an admin request against a
// gateway key's allow-list. A key limited to some projects may not use
// workspace-wide solutions (project ""): they reach every project's recall.
func projectScope(c echo.Context, project string) *apiError {
	k, _ := c.Get(scopeKey).(*GatewayKey)
	if k == nil || len(k.Projects) == 0 || (project != "" && projectAllowed(k, project)) {
		return nil
	}
	name := project
	if name == "" {
		name = "(all projects)"
	}
	return &apiError{Status: http.StatusForbidden, Message: "This gateway key does not give access to project " + quoteName(name) + ".", Type: "invalid_request_error", Code: "project_forbidden"}
}

// tenantFor resolves (workspace, project) for an admin request; unless
// required, either defaults to the configured one.
func (s *Server) tenantFor(c echo.Context, workspace, project string, required bool) (Tenant, *apiError) {
	if required && (workspace == "" && c.Get(scopeKey) == nil || project == "") {
		return Tenant{}, errBadRequest("workspace and project are required")
	}
	ws, aerr := s.workspaceFor(c, workspace)
	if aerr != nil {
		return Tenant{}, aerr
	}
	if project == "" {
		project = s.opts.DefaultProject
	}
	if err := ValidName(project); err != nil {
		return Tenant{}, errBadRequest("project: " + err.Error())
	}
	if k, _ := c.Get(scopeKey).(*GatewayKey); k != nil && !projectAllowed(k, project) {
		return Tenant{}, &apiError{Status: http.StatusForbidden, Message: "This gateway key does not give access to project " + quoteName(project) + ".", Type: "invalid_request_error", Code: "project_forbidden"}
	}
	return Tenant{Workspace: ws, Project: project}, nil
}

// decodeJSON decodes a request body strictly: unknown fields, wrong types
// and trailing data are errors that name the field.
func (s *Server) decodeJSON(c echo.Context, v any) *apiError {
	body, aerr := s.readBody(c, nil)
	if aerr != nil {
		return aerr
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			return errBadRequest(fmt.Sprintf("%s: must be a %s", te.Field, te.Type.String()))
		case errors.As(err, &se), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return errBadRequest("body is not valid JSON")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return errBadRequest(strings.TrimPrefix(err.Error(), "json: ") + " (not part of this API)")
		default:
			return errBadRequest("body: " + err.Error())
		}
	}
	if dec.More() {
		return errBadRequest("body holds more than one JSON value")
	}
	return nil
}

type incidentIn struct {
	Workspace  string `json:"workspace"`
	Project    string `json:"project"`
	Session    string `json:"session"`
	Type       string `json:"type"`
	Agent      string `json:"agent"`
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	StatusCode int    `json:"status_code"`
	Message    string `json:"message"`
}

func (s *Server) postIncident(c echo.Context) error {
	var in incidentIn
	if aerr := s.decodeJSON(c, &in); aerr != nil {
		return writeError(c, aerr)
	}
	t, aerr := s.tenantFor(c, in.Workspace, in.Project, false)
	if aerr != nil {
		return writeError(c, aerr)
	}
	switch {
	case strings.TrimSpace(in.Message) == "":
		return writeError(c, errBadRequest("message: required"))
	case in.Type == "":
		return writeError(c, errBadRequest("type: required (e.g. test_failure, lint_error, tool_error)"))
	case ValidName(in.Type) != nil:
		return writeError(c, errBadRequest("type: "+ValidName(in.Type).Error()))
	case in.StatusCode != 0 && (in.StatusCode < 100 || in.StatusCode > 599):
		return writeError(c, errBadRequest("status_code: must be an HTTP status (100-599) or omitted"))
	}
	for _, f := range []struct{ name, v string }{{"session", in.Session}, {"agent", in.Agent}} {
		if f.v != "" {
			if err := ValidName(f.v); err != nil {
				return writeError(c, errBadRequest(f.name+": "+err.Error()))
			}
		}
	}
	t.Session, t.Agent = in.Session, in.Agent
	inc := s.incident(t, in.Model, in.Provider, in.Type, in.StatusCode, in.Message, s.opts.Now())
	ctx, cancel := s.adminStoreCtx(c)
	defer cancel()
	if err := s.store.AddIncident(ctx, inc); err != nil {
		return s.storeError(c, "add_incident", err)
	}
	s.countIncident(inc)
	return c.JSON(http.StatusCreated, inc)
}

func (s *Server) listIncidents(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := s.tenantFor(c, q.Get("workspace"), q.Get("project"), false)
	if aerr != nil {
		return writeError(c, aerr)
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return writeError(c, errBadRequest("limit: must be a number from 1 to 10000"))
		}
		limit = n
	}
	ctx, cancel := s.adminStoreCtx(c)
	defer cancel()
	incs, err := s.store.ListIncidents(ctx, store.IncidentQuery{
		Workspace: t.Workspace, Project: t.Project, Session: q.Get("session"), Limit: limit,
	})
	if err != nil {
		return s.storeError(c, "list_incidents", err)
	}
	if incs == nil {
		incs = []store.Incident{}
	}
	return c.JSON(http.StatusOK, map[string]any{"incidents": incs})
}

func (s *Server) deleteIncidents(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := s.tenantFor(c, q.Get("workspace"), q.Get("project"), true)
	if aerr != nil {
		return writeError(c, aerr)
	}
	ctx, cancel := s.adminStoreCtx(c)
	defer cancel()
	n, err := s.store.DeleteIncidents(ctx, t.Workspace, t.Project)
	if err != nil {
		return s.storeError(c, "delete_incidents", err)
	}
	return c.JSON(http.StatusOK, map[string]int{"deleted": n})
}

// guardView is the guard preview of one tenant.
type guardView struct {
	Patterns []guard.Entry `json:"patterns"`
	Block    string        `json:"block"`
}

func (s *Server) guardPreview(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := s.tenantFor(c, q.Get("workspace"), q.Get("project"), false)
	if aerr != nil {
		return writeError(c, aerr)
	}
	ctx, cancel := s.adminStoreCtx(c)
	defer cancel()
	entries, block, err := s.guardEntries(ctx, t.Workspace, t.Project, q.Get("session"), s.opts.Now())
	if err != nil {
		return s.storeError(c, "list_incidents", err)
	}
	if entries == nil {
		entries = []guard.Entry{}
	}
	return c.JSON(http.StatusOK, guardView{Patterns: entries, Block: block.Text})
}

// solutionIn is the body of POST /scar/v1/solutions. Confidence is a raw
// JSON value so that a wrong type gets a message naming the field.
type solutionIn struct {
	Workspace  string          `json:"workspace"`
	Project    string          `json:"project"`
	Goal       string          `json:"goal"`
	Approach   string          `json:"approach"`
	Outcome    string          `json:"outcome"`
	Confidence json.RawMessage `json:"confidence"`
}

// ParseConfidence reads a confidence: a number in [0,1], or in (1,100]
// read as a percentage. Anything else is an error.
func ParseConfidence(v float64) (float64, error) {
	switch {
	case math.IsNaN(v) || v < 0:
		return 0, errors.New("confidence: must be in [0,1] (or a percentage up to 100)")
	case v <= 1:
		return v, nil
	case v <= 100:
		return v / 100, nil
	}
	return 0, errors.New("confidence: must be in [0,1] (or a percentage up to 100)")
}

func (s *Server) postSolution(c echo.Context) error {
	var in solutionIn
	if aerr := s.decodeJSON(c, &in); aerr != nil {
		return writeError(c, aerr)
	}
	ws, aerr := s.workspaceFor(c, in.Workspace)
	if aerr != nil {
		return writeError(c, aerr)
	}
	if in.Project != "" {
		if err := ValidName(in.Project); err != nil {
			return writeError(c, errBadRequest("project: "+err.Error()))
		}
	}
	if aerr := projectScope(c, in.Project); aerr != nil {
		return writeError(c, aerr)
	}
	for _, f := range []struct{ name, v string }{{"goal", in.Goal}, {"approach", in.Approach}, {"outcome", in.Outcome}} {
		if strings.TrimSpace(f.v) == "" {
			return writeError(c, errBadRequest(f.name+": required"))
		}
		if len(f.v) > 16<<10 {
			return writeError(c, errBadRequest(f.name+": longer than 16 KiB"))
		}
	}
	if len(in.Confidence) == 0 || string(in.Confidence) == "null" {
		return writeError(c, errBadRequest("confidence: required, a number in [0,1]"))
	}
	var raw float64
	if err := json.Unmarshal(in.Confidence, &raw); err != nil {
		return writeError(c, errBadRequest("confidence: must be a number in [0,1]"))
	}
	conf, err := ParseConfidence(raw)
	if err != nil {
		return writeError(c, errBadRequest(err.Error()))
	}
	now := s.opts.Now()
	sol := store.Solution{
		Workspace: ws, Project: in.Project,
		Goal: strings.TrimSpace(in.Goal), Approach: strings.TrimSpace(in.Approach), Outcome: strings.TrimSpace(in.Outcome),
		Confidence: conf, Source: store.SourceAPI, Verified: true, Created: now, Updated: now,
	}
	// Secrets never reach the store, nor the key derived from the goal.
	redactSolution(&sol)
	sol.Key = recall.GoalKey(sol.Goal)
	ctx, cancel := s.adminStoreCtx(c)
	defer cancel()
	if err := s.store.PutSolution(ctx, &sol); err != nil {
		return s.storeError(c, "put_solution", err)
	}
	if err := s.syncIndexWithin(ctx); err != nil {
		s.log.Warn("recall index sync after write failed", "err", err)
	}
	status := http.StatusCreated
	if !sol.Created.Equal(sol.Updated) {
		status = http.StatusOK
	}
	return c.JSON(status, sol)
}

func (s *Server) listSolutions(c echo.Context) error {
	ws, aerr := s.workspaceFor(c, c.QueryParam("workspace"))
	if aerr != nil {
		return writeError(c, aerr)
	}
	ctx, cancel := s.adminStoreCtx(c)
	defer cancel()
	sols, err := s.store.ListSolutions(ctx, ws)
	if err != nil {
		return s.storeError(c, "list_solutions", err)
	}
	visible := make([]store.Solution, 0, len(sols))
	for _, sol := range sols {
		if sol.Project == "" || projectScope(c, sol.Project) == nil {
			visible = append(visible, sol)
		}
	}
	sols = visible
	return c.JSON(http.StatusOK, map[string]any{"solutions": sols})
}

func (s *Server) deleteSolution(c echo.Context) error {
	ws, aerr := s.workspaceFor(c, c.QueryParam("workspace"))
	if aerr != nil {
		return writeError(c, aerr)
	}
	ctx, cancel := s.adminStoreCtx(c)
	defer cancel()
	sol, err := s.store.GetSolution(ctx, ws, c.Param("id"))
	if err == nil {
		if aerr := projectScope(c, sol.Project); aerr != nil {
			return writeError(c, aerr)
		}
		err = s.store.DeleteSolution(ctx, ws, sol.ID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return writeError(c, &apiError{Status: http.StatusNotFound, Message: "No solution with that id in workspace " + quoteName(ws) + ".", Type: "invalid_request_error", Code: "not_found"})
	}
	if err != nil {
		return s.storeError(c, "delete_solution", err)
	}
	if err := s.syncIndexWithin(ctx); err != nil {
		s.log.Warn("recall index sync after delete failed", "err", err)
	}
	return c.NoContent(http.StatusNoContent)
}

// recallView is the recall preview of one goal.
type recallView struct {
	Matches []recall.Match `json:"matches"`
	Block   string         `json:"block"`
}

func (s *Server) recallPreview(c echo.Context) error {
	q := c.QueryParams()
	ws, aerr := s.workspaceFor(c, q.Get("workspace"))
	if aerr != nil {
		return writeError(c, aerr)
	}
	goal := strings.TrimSpace(q.Get("goal"))
	if goal == "" {
		return writeError(c, errBadRequest("goal: required"))
	}
	k := s.recall.MaxResults
	if v := q.Get("k"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5 {
			return writeError(c, errBadRequest("k: must be a number from 1 to 5"))
		}
		k = n
	}
	if key, _ := c.Get(scopeKey).(*GatewayKey); key != nil && len(key.Projects) > 0 {
		if aerr := projectScope(c, q.Get("project")); aerr != nil {
			return writeError(c, aerr)
		}
	}
	matches := s.index.Search(recall.Query{Workspace: ws, Project: q.Get("project"), Goal: goal, K: k, MinSimilarity: s.recall.MinSimilarity})
	if matches == nil {
		matches = []recall.Match{}
	}
	return c.JSON(http.StatusOK, recallView{Matches: matches, Block: recall.Block(matches)})
}

// adminStoreCtx bounds the store calls of one memory API request by
// StoreTimeout in all: a store that hangs gets a 503, not a hung client.
func (s *Server) adminStoreCtx(c echo.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Request().Context(), s.opts.StoreTimeout)
}

// syncIndexWithin is syncIndex for a caller that must not wait past ctx:
// the index may be held by a sync that waits on the store (Run's, which
// has no deadline), and syncIndex waits for it without looking at ctx.
// When ctx ends first, the sync left behind runs once the index is free
// and returns at once (its ctx is over).
func (s *Server) syncIndexWithin(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.syncIndex(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("proxy: sync recall index: %w", ctx.Err())
	}
}

// storeError answers a failed store call of the memory API.
func (s *Server) storeError(c echo.Context, op string, err error) error {
	s.storeFailed(c.Request().Context(), op, err)
	switch {
	case errors.Is(err, store.ErrInvalid):
		return writeError(c, errBadRequest("invalid record"))
	case errors.Is(err, context.DeadlineExceeded):
		return writeError(c, &apiError{Status: http.StatusServiceUnavailable, Message: "The memory store did not answer in time; a change asked for may or may not have been made.", Type: "api_error", Code: "store_unavailable"})
	}
	return writeError(c, &apiError{Status: http.StatusServiceUnavailable, Message: "The memory store is unavailable; nothing was changed.", Type: "api_error", Code: "store_unavailable"})
}
