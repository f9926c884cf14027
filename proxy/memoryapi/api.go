package memoryapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// scopeKey holds, in the Echo context, the workspace a gateway key limits
// an admin request to.
const scopeKey = "scar.scope"

// adminAuth guards /scar/v1: with an admin token or gateway keys
// configured, a request needs the admin token (every workspace) or a
// gateway key (its own workspace only).
func (a *API) adminAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		k, ok := a.tenants.Authorize(c.Request().Header)
		if !ok {
			return &wire.Error{Status: http.StatusUnauthorized, Message: "The memory API needs the admin token or a gateway key.", Type: "invalid_request_error", Code: "unauthorized"}
		}
		if k != nil {
			c.Set(scopeKey, k)
		}
		return next(c)
	}
}

// scopeOf returns the gateway key an admin request is limited to, or nil
// (the admin token, or an open memory API).
func scopeOf(c echo.Context) *tenant.Key {
	k, _ := c.Get(scopeKey).(*tenant.Key)
	return k
}

// workspaceFor resolves the workspace an admin request acts on.
func (a *API) workspaceFor(c echo.Context, asked string) (string, *wire.Error) {
	return a.tenants.Workspace(scopeOf(c), asked)
}

// tenantFor resolves (workspace, project) for an admin request.
func (a *API) tenantFor(c echo.Context, workspace, project string, required bool) (tenant.Tenant, *wire.Error) {
	return a.tenants.Scoped(scopeOf(c), workspace, project, required)
}

// decodeJSON decodes a request body strictly: unknown fields, wrong types
// and trailing data are errors that name the field.
func (a *API) decodeJSON(c echo.Context, v any) *wire.Error {
	body, aerr := a.opts.Bodies.Read(c.Response(), c.Request(), nil)
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
			return wire.BadRequest(fmt.Sprintf("%s: must be a %s", te.Field, te.Type.String()))
		case errors.As(err, &se), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return wire.BadRequest("body is not valid JSON")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return wire.BadRequest(strings.TrimPrefix(err.Error(), "json: ") + " (not part of this API)")
		default:
			return wire.BadRequest("body: " + err.Error())
		}
	}
	if dec.More() {
		return wire.BadRequest("body holds more than one JSON value")
	}
	return nil
}

type incidentIn struct {
	Workspace  string     `json:"workspace"`
	Project    string     `json:"project"`
	Session    string     `json:"session"`
	Type       string     `json:"type"`
	Agent      string     `json:"agent"`
	Provider   string     `json:"provider"`
	Model      string     `json:"model"`
	StatusCode statusCode `json:"status_code"`
	Code       string     `json:"code"`
	Message    string     `json:"message"`
}

// statusCode is the status_code of a posted incident: an HTTP status, as
// a number or a string of digits. Any other string is an error code (the
// original failure-memory library passed Node's error.code, such as
// "ECONNRESET", as the status) and becomes the incident's code.
type statusCode struct {
	status int
	code   string
}

func (sc *statusCode) UnmarshalJSON(b []byte) error {
	*sc = statusCode{}
	if string(b) == "null" {
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(str)); err == nil {
			sc.status = n
		} else {
			sc.code = str
		}
		return nil
	}
	if err := json.Unmarshal(b, &sc.status); err != nil {
		return errors.New("status_code: must be an HTTP status or an error code string")
	}
	return nil
}

// maxCodeRunes caps an incident's code.
const maxCodeRunes = 64

// incidentCode returns the code of a posted incident, from code or from a
// status_code that is not a number.
func incidentCode(in *incidentIn) (string, *wire.Error) {
	code, alt := strings.TrimSpace(in.Code), strings.TrimSpace(in.StatusCode.code)
	switch {
	case code == "":
		code = alt
	case alt != "" && alt != code:
		return "", wire.BadRequest("code: differs from the code given as status_code")
	}
	if utf8.RuneCountInString(code) > maxCodeRunes || strings.IndexFunc(code, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError
	}) >= 0 {
		return "", wire.BadRequest(fmt.Sprintf("code: must be at most %d characters without spaces (e.g. ECONNRESET)", maxCodeRunes))
	}
	return code, nil
}

func (a *API) postIncident(c echo.Context) error {
	var in incidentIn
	if aerr := a.decodeJSON(c, &in); aerr != nil {
		return aerr
	}
	inc, aerr := a.recordIncident(c.Request().Context(), scopeOf(c), &in)
	if aerr != nil {
		return aerr
	}
	return c.JSON(http.StatusCreated, inc)
}

// recordIncident validates and stores an incident posted by gateway key k
// (nil: none), through the memory API or the scar_record tool.
func (a *API) recordIncident(ctx context.Context, k *tenant.Key, in *incidentIn) (*store.Incident, *wire.Error) {
	t, aerr := a.tenants.Scoped(k, in.Workspace, in.Project, false)
	if aerr != nil {
		return nil, aerr
	}
	status := in.StatusCode.status
	switch {
	case strings.TrimSpace(in.Message) == "":
		return nil, wire.BadRequest("message: required")
	case in.Type == "":
		return nil, wire.BadRequest("type: required (e.g. test_failure, lint_error, tool_error)")
	case tenant.ValidName(in.Type) != nil:
		return nil, wire.BadRequest("type: " + tenant.ValidName(in.Type).Error())
	case status != 0 && (status < 100 || status > 599):
		return nil, wire.BadRequest("status_code: must be an HTTP status (100-599), an error code string, or omitted")
	}
	code, aerr := incidentCode(in)
	if aerr != nil {
		return nil, aerr
	}
	for _, f := range []struct{ name, v string }{{"session", in.Session}, {"agent", in.Agent}} {
		if f.v != "" {
			if err := tenant.ValidName(f.v); err != nil {
				return nil, wire.BadRequest(f.name + ": " + err.Error())
			}
		}
	}
	t.Session, t.Agent = in.Session, in.Agent
	inc := a.memory.Incident(t, in.Model, in.Provider, in.Type, status, in.Message, a.memory.Now())
	inc.Code = code
	sctx, cancel := a.memoryStoreCtx(ctx)
	defer cancel()
	if err := a.store.AddIncident(sctx, inc); err != nil {
		return nil, a.storeAPIError(ctx, "add_incident", err)
	}
	a.memory.CountIncident(inc)
	a.log.DebugContext(ctx, "incident recorded", "workspace", inc.Workspace, "project", inc.Project,
		"conversation", inc.Session, "type", inc.Type, "status", inc.StatusCode, "code", inc.Code,
		"fingerprint", inc.Fingerprint, "bytes", len(inc.Message))
	return inc, nil
}

func (a *API) listIncidents(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := a.tenantFor(c, q.Get("workspace"), q.Get("project"), false)
	if aerr != nil {
		return aerr
	}
	limit, aerr := listLimit(q)
	if aerr != nil {
		return aerr
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	incs, err := a.store.ListIncidents(ctx, store.IncidentQuery{
		Workspace: t.Workspace, Project: t.Project, Session: q.Get("session"), Limit: limit,
	})
	if err != nil {
		return a.storeError(c, "list_incidents", err)
	}
	if incs == nil {
		incs = []store.Incident{}
	}
	return c.JSON(http.StatusOK, map[string]any{"incidents": incs})
}

func (a *API) deleteIncidents(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := a.tenantFor(c, q.Get("workspace"), q.Get("project"), true)
	if aerr != nil {
		return aerr
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	n, err := a.store.DeleteIncidents(ctx, t.Workspace, t.Project)
	if err != nil {
		return a.storeError(c, "delete_incidents", err)
	}
	return c.JSON(http.StatusOK, map[string]int{"deleted": n})
}

// guardView is the guard preview of one tenant.
type guardView struct {
	Patterns []guard.Entry `json:"patterns"`
	Block    string        `json:"block"`
	Loop     *loopView     `json:"loop,omitempty"`
}

// loopView is a conversation's current loop.
type loopView struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
	Level string `json:"level"` // guard, stop, hard-stop
}

func (a *API) getGuard(c echo.Context) error {
	q := c.QueryParams()
	v, aerr := a.previewGuard(c.Request().Context(), scopeOf(c), q.Get("workspace"), q.Get("project"), q.Get("session"))
	if aerr != nil {
		return aerr
	}
	return c.JSON(http.StatusOK, v)
}

// previewGuard returns the guard the next request of a conversation
// (session; "" for a request of none) of a tenant would get.
func (a *API) previewGuard(ctx context.Context, k *tenant.Key, workspace, project, session string) (guardView, *wire.Error) {
	t, aerr := a.tenants.Scoped(k, workspace, project, false)
	if aerr != nil {
		return guardView{}, aerr
	}
	sctx, cancel := a.memoryStoreCtx(ctx)
	defer cancel()
	entries, block, loop, err := a.memory.Preview(sctx, t.Workspace, t.Project, session, a.memory.Now())
	if err != nil {
		return guardView{}, a.storeAPIError(ctx, "list_incidents", err)
	}
	if entries == nil {
		entries = []guard.Entry{}
	}
	v := guardView{Patterns: entries, Block: block}
	if loop.Level > guard.LevelNone {
		v.Loop = &loopView{Kind: loop.Kind, Count: loop.Count, Level: guard.LevelName(loop.Level)}
	}
	return v, nil
}

// patternView is one failure pattern the guard runs.
type patternView struct {
	Label       string   `json:"label"`
	Regex       string   `json:"regex,omitempty"`
	Exclude     string   `json:"exclude,omitempty"`
	StatusCodes []int    `json:"status_codes,omitempty"`
	Types       []string `json:"types,omitempty"`
	Fix         string   `json:"fix"`
	Builtin     bool     `json:"builtin"`
}

// patternsView is the guard's pattern bank and the rule that turns
// incidents into guard entries.
type patternsView struct {
	Patterns   []patternView `json:"patterns"`
	MinRepeats int           `json:"min_repeats"`
	Window     string        `json:"window"`
}

// activePatterns lists the enabled patterns in the order they are tried.
// Regexes are matched case-insensitively.
func (a *API) activePatterns() patternsView {
	cfg := a.memory.Guard().Config()
	pats := a.memory.Guard().Patterns()
	out := patternsView{Patterns: make([]patternView, len(pats)), MinRepeats: cfg.MinRepeats, Window: cfg.Window.String()}
	for i, p := range pats {
		out.Patterns[i] = patternView{Label: p.Name, Regex: p.Regex, Exclude: p.Exclude, StatusCodes: p.StatusCodes,
			Types: p.Types, Fix: p.Fix, Builtin: guard.IsBuiltin(p.Name)}
	}
	return out
}

func (a *API) listPatterns(c echo.Context) error {
	return c.JSON(http.StatusOK, a.activePatterns())
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

func (a *API) postSolution(c echo.Context) error {
	var in solutionIn
	if aerr := a.decodeJSON(c, &in); aerr != nil {
		return aerr
	}
	if len(in.Confidence) == 0 || string(in.Confidence) == "null" {
		return wire.BadRequest("confidence: required, a number in [0,1]")
	}
	var raw float64
	if err := json.Unmarshal(in.Confidence, &raw); err != nil {
		return wire.BadRequest("confidence: must be a number in [0,1]")
	}
	sol, created, aerr := a.storeSolution(c.Request().Context(), scopeOf(c), store.Solution{
		Workspace: in.Workspace, Project: in.Project, Goal: in.Goal, Approach: in.Approach, Outcome: in.Outcome, Confidence: raw,
	})
	if aerr != nil {
		return aerr
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	return c.JSON(status, sol)
}

// storeSolution validates and stores a solution given by gateway key k
// (nil: none) through the memory API or the recall_store tool: in.Workspace
// as asked, in.Confidence as given (see ParseConfidence). It reports
// whether the solution is new (false: the same goal was updated).
func (a *API) storeSolution(ctx context.Context, k *tenant.Key, in store.Solution) (store.Solution, bool, *wire.Error) {
	ws, aerr := a.tenants.Workspace(k, in.Workspace)
	if aerr != nil {
		return store.Solution{}, false, aerr
	}
	if in.Project != "" {
		if err := tenant.ValidName(in.Project); err != nil {
			return store.Solution{}, false, wire.BadRequest("project: " + err.Error())
		}
	}
	if aerr := tenant.ProjectScope(k, in.Project); aerr != nil {
		return store.Solution{}, false, aerr
	}
	for _, f := range []struct{ name, v string }{{"goal", in.Goal}, {"approach", in.Approach}, {"outcome", in.Outcome}} {
		if strings.TrimSpace(f.v) == "" {
			return store.Solution{}, false, wire.BadRequest(f.name + ": required")
		}
		if len(f.v) > 16<<10 {
			return store.Solution{}, false, wire.BadRequest(f.name + ": longer than 16 KiB")
		}
	}
	conf, err := ParseConfidence(in.Confidence)
	if err != nil {
		return store.Solution{}, false, wire.BadRequest(err.Error())
	}
	now := a.memory.Now()
	sol := store.Solution{
		Workspace: ws, Project: in.Project,
		Goal: strings.TrimSpace(in.Goal), Approach: strings.TrimSpace(in.Approach), Outcome: strings.TrimSpace(in.Outcome),
		Confidence: conf, Source: store.SourceAPI, Verified: true, Created: now, Updated: now,
	}
	// Secrets never reach the store, nor the key derived from the goal.
	memory.RedactSolution(&sol)
	sol.Key = recall.GoalKey(sol.Goal)
	sctx, cancel := a.memoryStoreCtx(ctx)
	defer cancel()
	if err := a.memory.PutSolutions(sctx, &sol); err != nil {
		return store.Solution{}, false, a.storeAPIError(ctx, "put_solution", err)
	}
	if err := a.memory.SyncIndexWithin(sctx); err != nil {
		a.log.Warn("recall index sync after write failed", "err", err)
	}
	return sol, sol.Created.Equal(sol.Updated), nil
}

func (a *API) listSolutions(c echo.Context) error {
	ws, aerr := a.workspaceFor(c, c.QueryParam("workspace"))
	if aerr != nil {
		return aerr
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	sols, err := a.store.ListSolutions(ctx, ws)
	if err != nil {
		return a.storeError(c, "list_solutions", err)
	}
	visible := make([]store.Solution, 0, len(sols))
	for _, sol := range sols {
		if sol.Project == "" || tenant.ProjectScope(scopeOf(c), sol.Project) == nil {
			visible = append(visible, sol)
		}
	}
	sols = visible
	return c.JSON(http.StatusOK, map[string]any{"solutions": sols})
}

func (a *API) deleteSolution(c echo.Context) error {
	return a.onSolution(c, "delete_solution", func(ctx context.Context, sol store.Solution) error {
		if err := a.store.DeleteSolution(ctx, sol.Workspace, sol.ID); err != nil {
			return err
		}
		if err := a.memory.SyncIndexWithin(ctx); err != nil {
			a.log.Warn("recall index sync after delete failed", "err", err)
		}
		return c.NoContent(http.StatusNoContent)
	})
}

// onSolution runs act, within the memory API's store budget, on the
// solution the request names (its id, in the workspace it asks for), once
// the request's scope may act on it: a solution of a project the
// request's key does not cover is refused, one that does not exist is a
// 404 in the API's shape, a store failure a 503 naming op.
func (a *API) onSolution(c echo.Context, op string, act func(ctx context.Context, sol store.Solution) error) error {
	ws, aerr := a.workspaceFor(c, c.QueryParam("workspace"))
	if aerr != nil {
		return aerr
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	sol, err := a.store.GetSolution(ctx, ws, c.Param("id"))
	if err == nil {
		if aerr := tenant.ProjectScope(scopeOf(c), sol.Project); aerr != nil {
			return aerr
		}
		err = act(ctx, sol)
	}
	if errors.Is(err, store.ErrNotFound) {
		return &wire.Error{Status: http.StatusNotFound, Message: "No solution with that id in workspace " + tenant.Quote(ws) + ".", Type: "invalid_request_error", Code: "not_found"}
	}
	if err != nil {
		return a.storeError(c, op, err)
	}
	return nil
}

// recallView is the recall preview of one goal. Below, when asked for,
// holds the best solutions under the threshold (near misses) with their
// similarity.
type recallView struct {
	Matches       []recall.Match `json:"matches"`
	Block         string         `json:"block"`
	MinSimilarity float64        `json:"min_similarity"`
	Below         []recall.Match `json:"below,omitzero"`
}

// recallQuery is a recall asked through the memory API or MCP.
type recallQuery struct {
	Workspace, Project, Goal string
	// K is the number of matches wanted, 1..5; 0 means recall.max_results.
	K int
	// MinSimilarity, in [0,1], overrides recall.min_similarity when set.
	MinSimilarity *float64
	// IncludeBelow asks for the near misses.
	IncludeBelow bool
}

func (a *API) recallPreview(c echo.Context) error {
	q := c.QueryParams()
	rq := recallQuery{Workspace: q.Get("workspace"), Project: q.Get("project"), Goal: q.Get("goal")}
	if v := q.Get("k"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5 {
			return wire.BadRequest("k: must be a number from 1 to 5")
		}
		rq.K = n
	}
	if v := q.Get("min_similarity"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return wire.BadRequest("min_similarity: must be a number in [0,1]")
		}
		rq.MinSimilarity = &f
	}
	if v := q.Get("include_below"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return wire.BadRequest("include_below: must be true or false")
		}
		rq.IncludeBelow = b
	}
	v, aerr := a.searchRecall(c.Request().Context(), scopeOf(c), rq)
	if aerr != nil {
		return aerr
	}
	return c.JSON(http.StatusOK, v)
}

// searchRecall answers a recall asked by gateway key k (nil: none), as the
// proxy recalls (memory.Memory.Search: semantic recall included when it
// is on). The near misses are the solutions under the threshold among the
// five most similar by their words, at most q.K of them.
func (a *API) searchRecall(ctx context.Context, k *tenant.Key, q recallQuery) (recallView, *wire.Error) {
	ws, aerr := a.tenants.Workspace(k, q.Workspace)
	if aerr != nil {
		return recallView{}, aerr
	}
	goal := strings.TrimSpace(q.Goal)
	if goal == "" {
		return recallView{}, wire.BadRequest("goal: required")
	}
	n := a.memory.Recall().MaxResults
	if q.K != 0 {
		if q.K < 1 || q.K > 5 {
			return recallView{}, wire.BadRequest("k: must be a number from 1 to 5")
		}
		n = q.K
	}
	minSim := a.memory.Recall().MinSimilarity
	if q.MinSimilarity != nil {
		if m := *q.MinSimilarity; !(m >= 0 && m <= 1) {
			return recallView{}, wire.BadRequest("min_similarity: must be a number in [0,1]")
		}
		minSim = *q.MinSimilarity
	}
	if k != nil && len(k.Projects) > 0 {
		if aerr := tenant.ProjectScope(k, q.Project); aerr != nil {
			return recallView{}, aerr
		}
	}
	rq := recall.Query{Workspace: ws, Project: q.Project, Goal: goal, K: n, MinSimilarity: minSim}
	matches := a.memory.Search(ctx, rq)
	if matches == nil {
		matches = []recall.Match{}
	}
	v := recallView{Matches: matches, Block: recall.Block(matches), MinSimilarity: minSim}
	if q.IncludeBelow {
		v.Below = []recall.Match{}
		rq.K, rq.MinSimilarity = 5, 0
		for _, m := range a.memory.Index().Search(rq) {
			if m.Similarity < minSim && len(v.Below) < n {
				v.Below = append(v.Below, m)
			}
		}
	}
	return v, nil
}

// deleteSolutions removes every solution of one workspace: the admin
// token names it, a gateway key may name its own (or none). A key limited
// to some projects may not: the workspace holds other projects' solutions.
func (a *API) deleteSolutions(c echo.Context) error {
	k, asked := scopeOf(c), c.QueryParam("workspace")
	if asked == "" && k == nil {
		return wire.BadRequest("workspace: required (every solution of that workspace is deleted)")
	}
	ws, aerr := a.tenants.Workspace(k, asked)
	if aerr != nil {
		return aerr
	}
	if aerr := tenant.ProjectScope(k, ""); aerr != nil {
		return aerr
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	n, err := a.store.DeleteSolutions(ctx, ws)
	if err != nil {
		return a.storeError(c, "delete_solutions", err)
	}
	if err := a.memory.SyncIndexWithin(ctx); err != nil {
		a.log.Warn("recall index sync after delete failed", "err", err)
	}
	return c.JSON(http.StatusOK, map[string]int{"deleted": n})
}

// adminStoreCtx bounds the store calls of one memory API request by
// StoreTimeout in all: a store that hangs gets a 503, not a hung client.
func (a *API) adminStoreCtx(c echo.Context) (context.Context, context.CancelFunc) {
	return a.memoryStoreCtx(c.Request().Context())
}

// memoryStoreCtx bounds the store calls of one memory call (a memory API
// request, an MCP tool call) by StoreTimeout in all.
func (a *API) memoryStoreCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.memory.StoreTimeout())
}

// storeError answers a failed store call of the memory API.
func (a *API) storeError(c echo.Context, op string, err error) error {
	return a.storeAPIError(c.Request().Context(), op, err)
}

// storeAPIError records a failed store call of the memory API or MCP
// (ctx: the caller's, not the store calls' bounded one) and returns what
// to answer.
func (a *API) storeAPIError(ctx context.Context, op string, err error) *wire.Error {
	a.memory.StoreFailed(ctx, op, err)
	switch {
	case errors.Is(err, store.ErrInvalid):
		return wire.BadRequest("invalid record")
	case errors.Is(err, context.DeadlineExceeded):
		return &wire.Error{Status: http.StatusServiceUnavailable, Message: "The memory store did not answer in time; a change asked for may or may not have been made.", Type: "api_error", Code: "store_unavailable"}
	}
	return &wire.Error{Status: http.StatusServiceUnavailable, Message: "The memory store is unavailable; nothing was changed.", Type: "api_error", Code: "store_unavailable"}
}

// fixIn is the body of POST /scar/v1/fixes: a learned fix stored by hand
// (tests, imports). Failures is a pointer so that an absent count and a
// wrong type are told apart.
type fixIn struct {
	Workspace   string `json:"workspace"`
	Project     string `json:"project"`
	Key         string `json:"key"`
	Pattern     string `json:"pattern"`
	Fingerprint string `json:"fingerprint"`
	Tool        string `json:"tool"`
	Failure     string `json:"failure"`
	Call        string `json:"call"`
	Explanation string `json:"explanation"`
	Failures    *int   `json:"failures"`
	Session     string `json:"session"`
}

// Bounds on the fields of a fix stored by hand, checked before the text
// is redacted and capped.
const (
	maxFixToolBytes = 256
	maxFixKeyBytes  = 1024
	maxFixPattern   = 80 // runes, as a guard pattern's name
)

func (a *API) postFix(c echo.Context) error {
	var in fixIn
	if aerr := a.decodeJSON(c, &in); aerr != nil {
		return aerr
	}
	f, created, aerr := a.storeFix(c.Request().Context(), scopeOf(c), &in)
	if aerr != nil {
		return aerr
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	return c.JSON(status, f)
}

// storeFix validates and stores a fix given by gateway key k (nil: none),
// redacted and capped, with the pattern, fingerprint and key derived from
// the failure when not given (see prepareFix). It reports whether the fix
// is new (false: the fix of the same key was updated).
func (a *API) storeFix(ctx context.Context, k *tenant.Key, in *fixIn) (store.Fix, bool, *wire.Error) {
	t, aerr := a.tenants.Scoped(k, in.Workspace, in.Project, false)
	if aerr != nil {
		return store.Fix{}, false, aerr
	}
	oneLine := func(v string) bool {
		return utf8.ValidString(v) && strings.IndexFunc(v, unicode.IsControl) < 0
	}
	tool := strings.TrimSpace(in.Tool)
	switch {
	case tool == "":
		return store.Fix{}, false, wire.BadRequest("tool: required, the tool that failed, then succeeded")
	case len(tool) > maxFixToolBytes || !oneLine(tool):
		return store.Fix{}, false, wire.BadRequest(fmt.Sprintf("tool: must be one line of at most %d bytes", maxFixToolBytes))
	case strings.TrimSpace(in.Failure) == "":
		return store.Fix{}, false, wire.BadRequest("failure: required, the error the fix ended")
	case strings.TrimSpace(in.Call) == "":
		return store.Fix{}, false, wire.BadRequest("call: required, the arguments of the call that succeeded")
	case len(in.Key) > maxFixKeyBytes || !oneLine(in.Key):
		return store.Fix{}, false, wire.BadRequest(fmt.Sprintf("key: must be one line of at most %d bytes", maxFixKeyBytes))
	case utf8.RuneCountInString(in.Pattern) > maxFixPattern || !oneLine(in.Pattern) || strings.Contains(in.Pattern, "###"):
		return store.Fix{}, false, wire.BadRequest(fmt.Sprintf("pattern: must be one line of at most %d characters without \"###\"", maxFixPattern))
	case in.Fingerprint != "" && !isFingerprint(in.Fingerprint):
		return store.Fix{}, false, wire.BadRequest("fingerprint: must be 16 lower-case hex digits, as the guard computes them")
	case in.Failures != nil && *in.Failures < 0:
		return store.Fix{}, false, wire.BadRequest("failures: must not be negative")
	}
	if in.Session != "" {
		if err := tenant.ValidName(in.Session); err != nil {
			return store.Fix{}, false, wire.BadRequest("session: " + err.Error())
		}
	}
	f := store.Fix{
		Workspace: t.Workspace, Project: t.Project, Key: strings.TrimSpace(in.Key),
		Pattern: strings.TrimSpace(in.Pattern), Fingerprint: in.Fingerprint, Tool: tool,
		Failure: strings.TrimSpace(in.Failure), Call: strings.TrimSpace(in.Call),
		Explanation: strings.TrimSpace(in.Explanation), Session: in.Session,
	}
	if in.Failures != nil {
		f.Failures = *in.Failures
	}
	a.memory.PrepareFix(&f)
	sctx, cancel := a.memoryStoreCtx(ctx)
	defer cancel()
	if err := a.memory.PutFixes(sctx, &f); err != nil {
		return store.Fix{}, false, a.storeAPIError(ctx, "put_fix", err)
	}
	return f, f.Created.Equal(f.Updated), nil
}

// isFingerprint reports whether v has the form of guard.Fingerprint's
// results.
func isFingerprint(v string) bool {
	if len(v) != 16 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// listLimit reads the limit query parameter of a list: 1 to 10000,
// default 100.
func listLimit(q url.Values) (int, *wire.Error) {
	v := q.Get("limit")
	if v == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 10000 {
		return 0, wire.BadRequest("limit: must be a number from 1 to 10000")
	}
	return n, nil
}

func (a *API) listFixes(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := a.tenantFor(c, q.Get("workspace"), q.Get("project"), false)
	if aerr != nil {
		return aerr
	}
	limit, aerr := listLimit(q)
	if aerr != nil {
		return aerr
	}
	if failure := q.Get("failure"); failure != "" {
		// The fixes of one error, best match first, each with its match.
		learned, _, _, aerr := a.fixesOf(c.Request().Context(), t, failure, q.Get("type"), 0)
		if aerr != nil {
			return aerr
		}
		return c.JSON(http.StatusOK, map[string]any{"fixes": learned[:min(len(learned), limit)]})
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	fixes, err := a.store.ListFixes(ctx, store.FixQuery{Workspace: t.Workspace, Project: t.Project, Limit: limit})
	if err != nil {
		return a.storeError(c, "list_fixes", err)
	}
	if fixes == nil {
		fixes = []store.Fix{}
	}
	return c.JSON(http.StatusOK, map[string]any{"fixes": fixes})
}

func (a *API) deleteFix(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := a.tenantFor(c, q.Get("workspace"), q.Get("project"), false)
	if aerr != nil {
		return aerr
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	err := a.store.DeleteFix(ctx, t.Workspace, t.Project, c.Param("id"))
	if errors.Is(err, store.ErrNotFound) {
		return &wire.Error{Status: http.StatusNotFound, Message: "No fix with that id in workspace " + tenant.Quote(t.Workspace) + ", project " + tenant.Quote(t.Project) + ".", Type: "invalid_request_error", Code: "not_found"}
	}
	if err != nil {
		return a.storeError(c, "delete_fix", err)
	}
	return c.NoContent(http.StatusNoContent)
}

// deleteFixes removes every fix of one tenant, named as DELETE
// /scar/v1/incidents names it.
func (a *API) deleteFixes(c echo.Context) error {
	q := c.QueryParams()
	t, aerr := a.tenantFor(c, q.Get("workspace"), q.Get("project"), true)
	if aerr != nil {
		return aerr
	}
	ctx, cancel := a.adminStoreCtx(c)
	defer cancel()
	n, err := a.store.DeleteFixes(ctx, t.Workspace, t.Project)
	if err != nil {
		return a.storeError(c, "delete_fixes", err)
	}
	return c.JSON(http.StatusOK, map[string]int{"deleted": n})
}
