package memoryapi

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// The memory as MCP tools: streamable HTTP at /mcp and
// /w/{workspace}/{project}/mcp, and any other transport (stdio for
// `scarproxy mcp`) through [Server.ServeMCP].
//
// The recall tools keep the names, arguments and result fields of the
// success-memory library scarproxy grew from (recall_store, recall_similar,
// recall_context, recall_info), so its users change nothing; every tool
// runs the memory API's code (the same checks, store calls, recall index
// and guard), with the memory API's tenancy: the admin token reaches every
// workspace, a gateway key its own, and an open memory API (neither
// configured) anything.
//
// A tool's result is read by a model as a block is: the stored prose in
// it goes through the blocks' quoting path, in the same JSON fields, with
// a notice field (see mcpquote.go).
//
// Over HTTP the server is stateless: every POST is answered on its own,
// with no MCP session to keep, so replicas behind a load balancer need no
// affinity, and credentials are checked on every request.

// mcpMaxBody bounds the body of one MCP request (a tool's text fields are
// capped at 16 KiB each).
const mcpMaxBody = 1 << 20

// mcpCaller is who calls a tool and the tenant their calls default to.
type mcpCaller struct {
	key                         *tenant.Key // nil: the admin token, an open API, or stdio
	workspace, project, session string      // defaults for calls that name none
}

type mcpCallerKey struct{}

// mcpInstructions is sent to clients when they connect.
const mcpInstructions = `scarproxy's memory of this workspace. Before starting a task, call recall_similar (or recall_context) with the task as goal to reuse how a similar task was solved; after solving one with a reusable approach, call recall_store. When a tool or command fails, scar_record records it; scar_guard shows the failures that repeat and their fix instructions, and scar_fixes how one error text was fixed before and its fix instruction.`

// newMCPServer builds the MCP server whose tools act for the caller
// callerOf returns.
func (a *API) newMCPServer(callerOf func(context.Context) mcpCaller) *mcp.Server {
	version := a.opts.Version
	if version == "" {
		version = "dev"
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "scarproxy", Title: "scarproxy memory", Version: version},
		&mcp.ServerOptions{Instructions: mcpInstructions})
	t := &mcpTools{a: a, callerOf: callerOf, version: version}
	no := new(bool)
	addTool(t, srv, &mcp.Tool{
		Name: "recall_store",
		Description: "Save how a task was solved so it can be recalled later. Call this after completing a task " +
			"with a reusable approach (goal = what, approach = how, outcome = result). The same goal (ignoring case " +
			"and spacing) updates the stored solution instead of adding another. Secrets are redacted before storing.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no},
	}, t.recallStore)
	addTool(t, srv, &mcp.Tool{
		Name: "recall_similar",
		Description: "Find the closest prior solution for a new goal. Call this before solving, to reuse a known " +
			"approach instead of starting from scratch. found is true when the best match reaches threshold " +
			"(default: the server's recall.min_similarity); similarity is the best score even when it does not.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: no},
	}, t.recallSimilar)
	addTool(t, srv, &mcp.Tool{
		Name: "recall_context",
		Description: "Return a ready-to-prepend \"RECALL: Similar Task Found\" prompt block for a new goal (empty " +
			"string if nothing similar is in memory).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: no},
	}, t.recallContext)
	addTool(t, srv, &mcp.Tool{
		Name: "recall_info",
		Description: "Lightweight introspection: returns this server's name, version, the list of available tool " +
			"names, and the workspace, project and recall settings calls default to. Read-only; takes no arguments.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: no},
	}, t.recallInfo)
	addTool(t, srv, &mcp.Tool{
		Name: "scar_record",
		Description: "Record a failure you saw (a failing test, build, lint or command) so that scarproxy's " +
			"repeat-failure guard can warn when it happens again. type names the kind (e.g. test_failure), " +
			"message is the error text; code is an error code such as ECONNRESET, status_code an HTTP status.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: no, OpenWorldHint: no},
	}, t.scarRecord)
	addTool(t, srv, &mcp.Tool{
		Name: "scar_guard",
		Description: "Show the repeat-failure guard of the tenant (and of one session, when given): the failures " +
			"that repeated, with counts and fix instructions, the guard block the next request would get, and the " +
			"active failure patterns (labels, regexes, fix texts).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: no},
	}, t.scarGuard)
	addTool(t, srv, &mcp.Tool{
		Name: "scar_fixes",
		Description: "Fixes for an error text. learned holds the fixes learned in this project: the call that " +
			"ended the same failure before (tool, call arguments, the assistant's note), those of the same error " +
			"fingerprint first, then those of the same guard pattern, most recent first; fixes holds the fix " +
			"instruction of the guard pattern the error matches, if any.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: no},
	}, t.scarFixes)
	return srv
}

// addTool registers a tool whose handler returns the memory API's errors,
// and counts its calls.
func addTool[In, Out any](t *mcpTools, srv *mcp.Server, tool *mcp.Tool, h func(context.Context, mcpCaller, In) (Out, *wire.Error)) {
	t.names = append(t.names, tool.Name)
	mcp.AddTool(srv, tool, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		out, aerr := h(ctx, t.callerOf(ctx), in)
		if aerr != nil {
			t.a.mcpCalls.WithLabelValues(tool.Name, "error").Inc()
			var zero Out
			return nil, zero, errors.New(aerr.Message)
		}
		t.a.mcpCalls.WithLabelValues(tool.Name, "ok").Inc()
		return nil, out, nil
	})
}

// ServeMCP runs the MCP tools on transport t (such as &mcp.StdioTransport{})
// until ctx ends or the client disconnects. Calls have full access, as the
// store commands of the command line do: whoever runs this process owns
// the store. Calls that name no workspace or project default to workspace
// and project ("" for the configured defaults; with no project, recall
// searches every project and solutions belong to the whole workspace).
func (a *API) ServeMCP(ctx context.Context, t mcp.Transport, workspace, project string) error {
	for _, f := range []struct{ name, v string }{{"workspace", workspace}, {"project", project}} {
		if f.v != "" {
			if err := tenant.ValidName(f.v); err != nil {
				return errors.New("mcp: " + f.name + ": " + err.Error())
			}
		}
	}
	caller := mcpCaller{workspace: workspace, project: project}
	return a.newMCPServer(func(context.Context) mcpCaller { return caller }).Run(ctx, t)
}

// mcpHTTPHandlers serve the MCP streamable HTTP transport, statelessly,
// with the caller that serveMCP put in the request's context: open for
// an open memory, closed when credentials are required.
//
// On a loopback address the open one refuses a Host header that is not
// loopback: a web page's script, through DNS rebinding, must not reach an
// open memory. With credentials required it could not call anything
// anyway, and a reverse proxy on the same host must keep its public name.
func (a *API) mcpHTTPHandlers() (open, closed http.Handler) {
	srv := a.newMCPServer(func(ctx context.Context) mcpCaller {
		c, _ := ctx.Value(mcpCallerKey{}).(mcpCaller)
		return c
	})
	handler := func(closed bool) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
			Stateless:                  true,
			JSONResponse:               true,
			Logger:                     a.log,
			MaxRequestBodyBytes:        mcpMaxBody,
			DisableLocalhostProtection: closed,
		})
	}
	return handler(false), handler(true)
}

// serveMCP answers /mcp and /w/{workspace}/{project}/mcp: the memory API's
// credentials, then the tenant the calls default to (the path, else the
// X-Scar-Workspace and X-Scar-Project headers; a gateway key only reaches
// its own workspace), then the MCP transport.
func (a *API) serveMCP(c echo.Context) error {
	r := c.Request()
	k, ok := a.tenants.Authorize(r.Header)
	if !ok {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="scarproxy"`)
		return &wire.Error{Status: http.StatusUnauthorized, Message: "MCP needs the admin token or a gateway key (Authorization: Bearer KEY).", Type: "invalid_request_error", Code: "unauthorized"}
	}
	caller := mcpCaller{
		key:       k,
		workspace: cmp.Or(c.Param("workspace"), r.Header.Get(tenant.HeaderWorkspace)),
		project:   cmp.Or(c.Param("project"), r.Header.Get(tenant.HeaderProject)),
		session:   r.Header.Get(tenant.HeaderSession),
	}
	if caller.workspace != "" {
		if _, aerr := a.tenants.Workspace(k, caller.workspace); aerr != nil {
			return aerr
		}
	}
	if caller.project != "" {
		if err := tenant.ValidName(caller.project); err != nil {
			return wire.BadRequest("project: " + err.Error())
		}
		if aerr := tenant.ProjectScope(k, caller.project); aerr != nil {
			return aerr
		}
	}
	if caller.session != "" {
		if err := tenant.ValidName(caller.session); err != nil {
			return wire.BadRequest("invalid " + tenant.HeaderSession + ": " + err.Error())
		}
	}
	h := a.mcpClosed
	if a.tenants.Open() {
		h = a.mcpOpen
	}
	h.ServeHTTP(c.Response(), r.WithContext(context.WithValue(r.Context(), mcpCallerKey{}, caller)))
	return nil
}

// mcpTools holds the tool handlers.
type mcpTools struct {
	a        *API
	callerOf func(context.Context) mcpCaller
	version  string
	names    []string
}

type recallStoreIn struct {
	Goal       string   `json:"goal" jsonschema:"What the task was."`
	Approach   string   `json:"approach" jsonschema:"How it was solved."`
	Outcome    string   `json:"outcome" jsonschema:"What the result was."`
	Confidence *float64 `json:"confidence,omitempty" jsonschema:"Confidence 0.0-1.0 (default 1.0)."`
	Workspace  string   `json:"workspace,omitempty" jsonschema:"Optional workspace id (default: the server's)."`
	Project    string   `json:"project,omitempty" jsonschema:"Optional project; without one the solution belongs to the whole workspace."`
}

type recallStoreOut struct {
	Stored bool   `json:"stored"`
	ID     string `json:"id"`
	// Created is false when the same goal was stored before and was
	// updated.
	Created  bool           `json:"created"`
	Solution store.Solution `json:"solution"`
	Notice   string         `json:"notice"`
}

func (t *mcpTools) recallStore(ctx context.Context, c mcpCaller, in recallStoreIn) (recallStoreOut, *wire.Error) {
	conf := 1.0 // the original library's default
	if in.Confidence != nil {
		conf = *in.Confidence
	}
	sol, created, aerr := t.a.storeSolution(ctx, c.key, store.Solution{
		Workspace: cmp.Or(in.Workspace, c.workspace), Project: cmp.Or(in.Project, c.project),
		Goal: in.Goal, Approach: in.Approach, Outcome: in.Outcome, Confidence: conf,
	})
	if aerr != nil {
		return recallStoreOut{}, aerr
	}
	return recallStoreOut{Stored: true, ID: sol.ID, Created: created, Solution: mcpSolution(sol), Notice: mcpNotice}, nil
}

type recallSimilarIn struct {
	Goal         string   `json:"goal" jsonschema:"The new goal to match against memory."`
	Threshold    *float64 `json:"threshold,omitempty" jsonschema:"Minimum similarity 0.0-1.0 (default: the server's recall.min_similarity)."`
	Workspace    string   `json:"workspace,omitempty" jsonschema:"Optional workspace id."`
	Project      string   `json:"project,omitempty" jsonschema:"Optional project: its solutions and the workspace's; without one, every project's."`
	K            int      `json:"k,omitempty" jsonschema:"Number of matches, 1-5 (default: the server's recall.max_results)."`
	IncludeBelow bool     `json:"include_below,omitempty" jsonschema:"Also list the best solutions under the threshold, with their similarity."`
}

type recallSimilarOut struct {
	Found bool `json:"found"`
	// Similarity is the best match's, even under the threshold (0 when
	// nothing shares a word with the goal).
	Similarity float64         `json:"similarity"`
	Solution   *store.Solution `json:"solution"`
	Threshold  float64         `json:"threshold"`
	Matches    []recall.Match  `json:"matches"`
	Below      []recall.Match  `json:"below,omitzero"`
	Notice     string          `json:"notice"`
}

func (t *mcpTools) recallSimilar(ctx context.Context, c mcpCaller, in recallSimilarIn) (recallSimilarOut, *wire.Error) {
	q := t.recallQuery(c, in.Goal, in.Workspace, in.Project, in.K)
	q.MinSimilarity, q.IncludeBelow = in.Threshold, in.IncludeBelow
	v, aerr := t.a.searchRecall(ctx, c.key, q)
	if aerr != nil {
		return recallSimilarOut{}, aerr
	}
	out := recallSimilarOut{Threshold: v.MinSimilarity, Matches: mcpMatches(v.Matches), Below: mcpMatches(v.Below), Notice: mcpNotice}
	if len(out.Matches) > 0 {
		sol := out.Matches[0].Solution
		out.Found, out.Similarity, out.Solution = true, out.Matches[0].Similarity, &sol
		return out, nil
	}
	// Nothing reached the threshold: report the best score, as the
	// original library does.
	zero := 0.0
	q.K, q.MinSimilarity, q.IncludeBelow = 1, &zero, false
	if best, aerr := t.a.searchRecall(ctx, c.key, q); aerr == nil && len(best.Matches) > 0 {
		out.Similarity = best.Matches[0].Similarity
	}
	return out, nil
}

type recallContextIn struct {
	Goal      string `json:"goal" jsonschema:"The new goal."`
	Workspace string `json:"workspace,omitempty" jsonschema:"Optional workspace id."`
	Project   string `json:"project,omitempty" jsonschema:"Optional project."`
	K         int    `json:"k,omitempty" jsonschema:"Number of solutions in the block, 1-5 (default: the server's recall.max_results)."`
}

type recallContextOut struct {
	Found   bool   `json:"found"`
	Context string `json:"context"`
}

func (t *mcpTools) recallContext(ctx context.Context, c mcpCaller, in recallContextIn) (recallContextOut, *wire.Error) {
	v, aerr := t.a.searchRecall(ctx, c.key, t.recallQuery(c, in.Goal, in.Workspace, in.Project, in.K))
	if aerr != nil {
		return recallContextOut{}, aerr
	}
	return recallContextOut{Found: v.Block != "", Context: v.Block}, nil
}

// recallQuery fills the tenant of a recall from the caller's defaults.
func (t *mcpTools) recallQuery(c mcpCaller, goal, workspace, project string, k int) recallQuery {
	return recallQuery{Workspace: cmp.Or(workspace, c.workspace), Project: cmp.Or(project, c.project), Goal: goal, K: k}
}

type recallInfoOut struct {
	Name          string   `json:"name"`
	Version       string   `json:"version"`
	Tools         []string `json:"tools"`
	Workspace     string   `json:"workspace"`
	Project       string   `json:"project,omitempty"`
	MinSimilarity float64  `json:"min_similarity"`
	MaxResults    int      `json:"max_results"`
}

func (t *mcpTools) recallInfo(_ context.Context, c mcpCaller, _ struct{}) (recallInfoOut, *wire.Error) {
	ws, aerr := t.a.tenants.Workspace(c.key, c.workspace)
	if aerr != nil {
		return recallInfoOut{}, aerr
	}
	return recallInfoOut{
		Name: "scarproxy", Version: t.version, Tools: t.names, Workspace: ws, Project: c.project,
		MinSimilarity: t.a.memory.Recall().MinSimilarity, MaxResults: t.a.memory.Recall().MaxResults,
	}, nil
}

type scarRecordIn struct {
	Type       string `json:"type" jsonschema:"The kind of failure, e.g. test_failure, lint_error, build_error, tool_error."`
	Message    string `json:"message" jsonschema:"The error text."`
	Code       string `json:"code,omitempty" jsonschema:"Optional error code, e.g. ECONNRESET or ENOENT."`
	StatusCode int    `json:"status_code,omitempty" jsonschema:"Optional HTTP status, 100-599."`
	Session    string `json:"session,omitempty" jsonschema:"Optional session (conversation) the failure belongs to."`
	Agent      string `json:"agent,omitempty" jsonschema:"Optional name of the agent."`
	Provider   string `json:"provider,omitempty" jsonschema:"Optional provider or service that failed."`
	Model      string `json:"model,omitempty" jsonschema:"Optional model."`
	Workspace  string `json:"workspace,omitempty" jsonschema:"Optional workspace id."`
	Project    string `json:"project,omitempty" jsonschema:"Optional project (default: the server's)."`
}

type scarRecordOut struct {
	Recorded bool           `json:"recorded"`
	ID       string         `json:"id"`
	Incident store.Incident `json:"incident"`
	Notice   string         `json:"notice"`
}

func (t *mcpTools) scarRecord(ctx context.Context, c mcpCaller, in scarRecordIn) (scarRecordOut, *wire.Error) {
	inc, aerr := t.a.recordIncident(ctx, c.key, &incidentIn{
		Workspace: cmp.Or(in.Workspace, c.workspace), Project: cmp.Or(in.Project, c.project),
		Session: cmp.Or(in.Session, c.session), Type: in.Type, Agent: in.Agent, Provider: in.Provider,
		Model: in.Model, StatusCode: statusCode{status: in.StatusCode}, Code: in.Code, Message: in.Message,
	})
	if aerr != nil {
		return scarRecordOut{}, aerr
	}
	return scarRecordOut{Recorded: true, ID: inc.ID, Incident: mcpIncident(*inc), Notice: mcpNotice}, nil
}

type scarGuardIn struct {
	Session   string `json:"session,omitempty" jsonschema:"Optional session: its tool failures count too."`
	Workspace string `json:"workspace,omitempty" jsonschema:"Optional workspace id."`
	Project   string `json:"project,omitempty" jsonschema:"Optional project (default: the server's)."`
}

type scarGuardOut struct {
	// Patterns are the guard's entries: the failures that repeated.
	Patterns       []guard.Entry `json:"patterns"`
	Block          string        `json:"block"`
	ActivePatterns []patternView `json:"active_patterns"`
	MinRepeats     int           `json:"min_repeats"`
	Window         string        `json:"window"`
	Notice         string        `json:"notice"`
}

func (t *mcpTools) scarGuard(ctx context.Context, c mcpCaller, in scarGuardIn) (scarGuardOut, *wire.Error) {
	session := cmp.Or(in.Session, c.session)
	if session != "" {
		if err := tenant.ValidName(session); err != nil {
			return scarGuardOut{}, wire.BadRequest("session: " + err.Error())
		}
	}
	v, aerr := t.a.previewGuard(ctx, c.key, cmp.Or(in.Workspace, c.workspace), cmp.Or(in.Project, c.project), session)
	if aerr != nil {
		return scarGuardOut{}, aerr
	}
	p := t.a.activePatterns()
	return scarGuardOut{Patterns: mcpEntries(v.Patterns), Block: v.Block, ActivePatterns: p.Patterns, MinRepeats: p.MinRepeats, Window: p.Window, Notice: mcpNotice}, nil
}

type scarFixesIn struct {
	Error      string `json:"error" jsonschema:"The error text."`
	Type       string `json:"type,omitempty" jsonschema:"Optional kind of failure (incident type), e.g. tool_error."`
	StatusCode int    `json:"status_code,omitempty" jsonschema:"Optional HTTP status."`
	Workspace  string `json:"workspace,omitempty" jsonschema:"Optional workspace id."`
	Project    string `json:"project,omitempty" jsonschema:"Optional project."`
}

// fixView is one fix instruction for an error.
type fixView struct {
	Pattern string `json:"pattern"`
	Fix     string `json:"fix"`
	Source  string `json:"source"` // "pattern": the guard pattern's instruction
}

// learnedView is one learned fix of an error, and why it applies.
type learnedView struct {
	store.Fix
	// Match is "fingerprint" (the same error), "error" (the error is
	// found in the failure the fix ended, an agent's wrapper around it)
	// or "pattern" (the same guard pattern).
	Match string `json:"match"`
}

// fixesOf returns the learned fixes of tenant tn that apply to an error
// (see memory.MatchFixesOf), with the guard pattern the error matches
// (ok false: none).
func (a *API) fixesOf(ctx context.Context, tn tenant.Tenant, errText, typ string, status int) ([]learnedView, string, bool, *wire.Error) {
	// The error as an incident's message would be stored (redacted,
	// capped), so its fingerprint is the one its incidents and fixes get.
	text := memory.StoredMessage(errText)
	label, ok := a.memory.Guard().Classify(typ, status, text)
	sctx, cancel := a.memoryStoreCtx(ctx)
	defer cancel()
	limit := a.opts.FixesLimit
	if limit <= 0 {
		limit = 10000
	}
	fixes, err := a.store.ListFixes(sctx, store.FixQuery{Workspace: tn.Workspace, Project: tn.Project, Limit: limit})
	if err != nil {
		return nil, "", false, a.storeAPIError(ctx, "list_fixes", err)
	}
	learned := []learnedView{}
	for _, m := range memory.MatchFixesOf(fixes, label, guard.Fingerprint(text), text) {
		learned = append(learned, learnedView{Fix: m.Fix, Match: m.Match})
	}
	return learned, label, ok, nil
}

type scarFixesOut struct {
	// Learned holds the fixes that ended this failure before in the
	// project (see matchFixes).
	Learned []learnedView `json:"learned"`
	Fixes   []fixView     `json:"fixes"`
	Note    string        `json:"note"`
	Notice  string        `json:"notice"`
}

const fixesNote = "learned: what ended this failure before in this project (the same error first, then failures that hold it, then the same guard pattern), " +
	"most recent first; fixes: the fix instruction of the guard pattern this error matches."

func (t *mcpTools) scarFixes(ctx context.Context, c mcpCaller, in scarFixesIn) (scarFixesOut, *wire.Error) {
	tn, aerr := t.a.tenants.Scoped(c.key, cmp.Or(in.Workspace, c.workspace), cmp.Or(in.Project, c.project), false)
	if aerr != nil {
		return scarFixesOut{}, aerr
	}
	if strings.TrimSpace(in.Error) == "" {
		return scarFixesOut{}, wire.BadRequest("error: required, the error text")
	}
	out := scarFixesOut{Learned: []learnedView{}, Fixes: []fixView{}, Note: fixesNote, Notice: mcpNotice}
	learned, label, ok, aerr := t.a.fixesOf(ctx, tn, in.Error, in.Type, in.StatusCode)
	if aerr != nil {
		return scarFixesOut{}, aerr
	}
	for _, l := range learned {
		l.Fix = mcpFix(l.Fix)
		out.Learned = append(out.Learned, l)
	}
	if !ok {
		return out, nil
	}
	for _, p := range t.a.memory.Guard().Patterns() {
		if p.Name == label {
			out.Fixes = append(out.Fixes, fixView{Pattern: p.Name, Fix: p.Fix, Source: "pattern"})
			break
		}
	}
	return out, nil
}
