package memoryapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/ui"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// The dashboard (package ui) reads and changes memory through
// dashSource, with the memory API's rules: the admin token (or an open
// proxy) reaches every workspace, a gateway key its own workspace and
// projects (tenant.Policy), and every store call is bounded
// by StoreTimeout.

// guardPreview returns the exact text of the blocks the next request of a
// conversation ("" for none) of a tenant would get at now, in the order
// they would open its system text (the STOP block when its loop reached
// that level, then the guard block with its learned fixes); "" when it
// would get none. The recall block depends on the request's task and is
// not included.
func (a *API) guardPreview(ctx context.Context, workspace, project, conversation string, now time.Time) (string, error) {
	_, text, _, err := a.memory.Preview(ctx, workspace, project, conversation, now)
	if err != nil {
		return "", err
	}
	return text, nil
}

// maxConversationTurns caps the failures of one conversation the
// dashboard replays (the newest ones).
const maxConversationTurns = 500

// dashSource implements ui.Source for a Server.
type dashSource struct{ a *API }

var _ ui.Source = dashSource{}

func (d dashSource) Open() bool { return d.a.tenants.Open() }

func (d dashSource) Login(token string) (ui.Principal, bool) {
	h := http.Header{"Authorization": {"Bearer " + token}}
	k, ok := d.a.tenants.Authorize(h)
	if !ok || token == "" {
		return ui.Principal{}, false
	}
	if k == nil {
		return ui.Principal{Admin: true}, true
	}
	sum := sha256.Sum256([]byte(token))
	return ui.Principal{KeySHA256: hex.EncodeToString(sum[:]), Workspace: k.Workspace}, true
}

func (d dashSource) Refresh(p ui.Principal) (ui.Principal, bool) {
	if p.Admin {
		return p, d.a.opts.AdminToken != ""
	}
	k := d.keyOf(p)
	if k == nil {
		return ui.Principal{}, false
	}
	p.Workspace = k.Workspace
	return p, true
}

// keyOf returns the gateway key of a principal, nil for the admin (or
// for a key no longer configured: callers check Refresh first).
func (d dashSource) keyOf(p ui.Principal) *tenant.Key {
	if p.Admin || !d.a.tenants.Keys() {
		return nil
	}
	return d.a.tenants.BySHA256(p.KeySHA256)
}

// scope returns the key a non-admin principal acts with, or an error
// when it has none any more.
func (d dashSource) scope(p ui.Principal) (*tenant.Key, error) {
	k := d.keyOf(p)
	if k == nil && !p.Admin {
		return nil, fmt.Errorf("%w: this gateway key is no longer configured", ui.ErrForbidden)
	}
	return k, nil
}

// uiError maps a memory API error to the dashboard's.
func uiError(aerr *wire.Error) error {
	switch aerr.Status {
	case http.StatusForbidden, http.StatusUnauthorized:
		return fmt.Errorf("%w: %s", ui.ErrForbidden, aerr.Message)
	case http.StatusNotFound:
		return ui.ErrNotFound
	case http.StatusBadRequest:
		return fmt.Errorf("%w: %s", ui.ErrBadInput, aerr.Message)
	}
	return fmt.Errorf("proxy: %s", aerr.Message)
}

func (d dashSource) Tenant(p ui.Principal, workspace, project string) (string, string, error) {
	k, err := d.scope(p)
	if err != nil {
		return "", "", err
	}
	t, aerr := d.a.tenants.Scoped(k, workspace, project, false)
	if aerr != nil {
		return "", "", uiError(aerr)
	}
	return t.Workspace, t.Project, nil
}

// maxPickerTenants caps the tenants the dashboard's picker offers.
const maxPickerTenants = 500

func (d dashSource) Tenants(ctx context.Context, p ui.Principal) ([]store.TenantRef, error) {
	k, err := d.scope(p)
	if err != nil {
		return nil, err
	}
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	refs, err := d.a.tenantsOf(sctx, k, maxPickerTenants)
	if err != nil {
		d.a.memory.StoreFailed(ctx, "list_tenants", err)
		return nil, err
	}
	return refs, nil
}

// pattern classifies an incident for the dashboard: loops are "LOOP",
// failures no pattern knows guard.RepeatedPattern.
func (d dashSource) pattern(typ string, status int, message string) string {
	if typ == store.TypeLoop {
		return "LOOP"
	}
	if p, ok := d.a.memory.Guard().Classify(typ, status, message); ok {
		return p
	}
	return guard.RepeatedPattern
}

func (d dashSource) Groups(ctx context.Context, workspace, project string, since, until time.Time) ([]ui.Group, error) {
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	gs, err := d.a.store.IncidentGroups(sctx, store.GroupQuery{Workspace: workspace, Project: project, Since: since, Until: until})
	if err != nil {
		d.a.memory.StoreFailed(ctx, "incident_groups", err)
		return nil, err
	}
	out := make([]ui.Group, len(gs))
	for i, g := range gs {
		out[i] = ui.Group{IncidentGroup: g, Pattern: d.pattern(g.Type, g.StatusCode, g.Sample)}
	}
	return out, nil
}

func (d dashSource) Incidents(ctx context.Context, f store.IncidentFilter) (store.IncidentPage, []string, error) {
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	page, err := d.a.store.SearchIncidents(sctx, f)
	if errors.Is(err, store.ErrInvalid) {
		return store.IncidentPage{}, nil, fmt.Errorf("%w: that page link is not valid; start from the first page", ui.ErrBadInput)
	}
	if err != nil {
		d.a.memory.StoreFailed(ctx, "search_incidents", err)
		return store.IncidentPage{}, nil, err
	}
	pats := make([]string, len(page.Incidents))
	for i, inc := range page.Incidents {
		pats[i] = d.pattern(inc.Type, inc.StatusCode, inc.Message)
	}
	return page, pats, nil
}

// Conversation replays the guard over the conversation's own failures:
// after each one, the block the request path makes of it and those before
// it, at its time, learned fixes included (memory.Replay).
func (d dashSource) Conversation(ctx context.Context, workspace, project, session string) ([]ui.Turn, error) {
	if err := tenant.ValidName(session); err != nil {
		return nil, fmt.Errorf("%w: conversation: %v", ui.ErrBadInput, err)
	}
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	incs, err := d.a.store.ListIncidents(sctx, store.IncidentQuery{Workspace: workspace, Project: project, Session: session, Limit: maxConversationTurns})
	if err != nil {
		d.a.memory.StoreFailed(ctx, "list_incidents", err)
		return nil, err
	}
	slices.Reverse(incs)
	blocks, err := d.a.memory.Replay(sctx, workspace, project, incs)
	if err != nil {
		d.a.memory.StoreFailed(ctx, "list_fixes", err)
		return nil, err
	}
	turns := make([]ui.Turn, len(incs))
	for i, inc := range incs {
		turns[i] = ui.Turn{Incident: inc, Pattern: d.pattern(inc.Type, inc.StatusCode, inc.Message), Guard: blocks[i]}
	}
	return turns, nil
}

func (d dashSource) GuardPreview(ctx context.Context, workspace, project, conversation string) (string, error) {
	if conversation != "" {
		if err := tenant.ValidName(conversation); err != nil {
			return "", fmt.Errorf("%w: conversation: %v", ui.ErrBadInput, err)
		}
	}
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	text, err := d.a.guardPreview(sctx, workspace, project, conversation, d.a.memory.Now())
	if err != nil {
		d.a.memory.StoreFailed(ctx, "list_incidents", err)
		return "", err
	}
	return text, nil
}

func (d dashSource) Version(ctx context.Context, workspace, project string) (int64, error) {
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	return d.a.store.IncidentVersion(sctx, workspace, project)
}

func (d dashSource) Solutions(ctx context.Context, p ui.Principal, workspace string) ([]store.Solution, error) {
	k, err := d.scope(p)
	if err != nil {
		return nil, err
	}
	ws, aerr := d.a.tenants.Workspace(k, workspace)
	if aerr != nil {
		return nil, uiError(aerr)
	}
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	sols, err := d.a.store.ListSolutions(sctx, ws)
	if err != nil {
		d.a.memory.StoreFailed(ctx, "list_solutions", err)
		return nil, err
	}
	visible := sols[:0]
	for _, sol := range sols {
		if sol.Project == "" || tenant.ProjectScope(k, sol.Project) == nil {
			visible = append(visible, sol)
		}
	}
	return visible, nil
}

// SearchSolutions returns the five most similar solutions, those under
// the threshold included, and the threshold.
func (d dashSource) SearchSolutions(ctx context.Context, p ui.Principal, workspace, project, goal string) ([]recall.Match, float64, error) {
	k, err := d.scope(p)
	if err != nil {
		return nil, 0, err
	}
	v, aerr := d.a.searchRecall(ctx, k, recallQuery{Workspace: workspace, Project: project, Goal: goal, K: 5, IncludeBelow: true})
	if aerr != nil {
		return nil, 0, uiError(aerr)
	}
	return append(v.Matches, v.Below...), v.MinSimilarity, nil
}

// solution returns a solution p may change.
func (d dashSource) solution(ctx context.Context, k *tenant.Key, workspace, id string) (store.Solution, error) {
	ws, aerr := d.a.tenants.Workspace(k, workspace)
	if aerr != nil {
		return store.Solution{}, uiError(aerr)
	}
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	sol, err := d.a.store.GetSolution(sctx, ws, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Solution{}, ui.ErrNotFound
	}
	if err != nil {
		d.a.memory.StoreFailed(ctx, "get_solution", err)
		return store.Solution{}, err
	}
	if aerr := tenant.ProjectScope(k, sol.Project); aerr != nil {
		return store.Solution{}, uiError(aerr)
	}
	return sol, nil
}

// SaveSolution stores a solution as the memory API's POST does (checked,
// redacted, verified); an edit that changes the goal (and so the key)
// replaces the old record.
func (d dashSource) SaveSolution(ctx context.Context, p ui.Principal, in store.Solution) (store.Solution, error) {
	k, err := d.scope(p)
	if err != nil {
		return store.Solution{}, err
	}
	var old store.Solution
	if in.ID != "" {
		if old, err = d.solution(ctx, k, in.Workspace, in.ID); err != nil {
			return store.Solution{}, err
		}
	}
	sol, _, aerr := d.a.storeSolution(ctx, k, store.Solution{Workspace: in.Workspace, Project: in.Project,
		Goal: in.Goal, Approach: in.Approach, Outcome: in.Outcome, Confidence: in.Confidence})
	if aerr != nil {
		return store.Solution{}, uiError(aerr)
	}
	if old.ID != "" && old.ID != sol.ID {
		sctx, cancel := d.a.memoryStoreCtx(ctx)
		defer cancel()
		if err := d.a.store.DeleteSolution(sctx, old.Workspace, old.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			d.a.memory.StoreFailed(ctx, "delete_solution", err)
			return store.Solution{}, err
		}
		if err := d.a.memory.SyncIndexWithin(sctx); err != nil {
			d.a.log.Warn("recall index sync after delete failed", "err", err)
		}
	}
	return sol, nil
}

func (d dashSource) VerifySolution(ctx context.Context, p ui.Principal, workspace, id string) error {
	k, err := d.scope(p)
	if err != nil {
		return err
	}
	sol, err := d.solution(ctx, k, workspace, id)
	if err != nil {
		return err
	}
	sol.Verified, sol.Updated = true, d.a.memory.Now()
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	if err := d.a.memory.PutSolutions(sctx, &sol); err != nil {
		d.a.memory.StoreFailed(ctx, "put_solution", err)
		return err
	}
	if err := d.a.memory.SyncIndexWithin(sctx); err != nil {
		d.a.log.Warn("recall index sync after write failed", "err", err)
	}
	return nil
}

func (d dashSource) DeleteSolution(ctx context.Context, p ui.Principal, workspace, id string) error {
	k, err := d.scope(p)
	if err != nil {
		return err
	}
	sol, err := d.solution(ctx, k, workspace, id)
	if err != nil {
		return err
	}
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	err = d.a.store.DeleteSolution(sctx, sol.Workspace, sol.ID)
	if errors.Is(err, store.ErrNotFound) {
		return ui.ErrNotFound
	}
	if err != nil {
		d.a.memory.StoreFailed(ctx, "delete_solution", err)
		return err
	}
	if err := d.a.memory.SyncIndexWithin(sctx); err != nil {
		d.a.log.Warn("recall index sync after delete failed", "err", err)
	}
	return nil
}

func (d dashSource) MarkSolution(ctx context.Context, p ui.Principal, workspace, id string, wrong bool, note string) error {
	k, err := d.scope(p)
	if err != nil {
		return err
	}
	sol, err := d.solution(ctx, k, workspace, id)
	if err != nil {
		return err
	}
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	_, err = d.a.memory.MarkSolution(sctx, sol.Workspace, sol.ID, d.a.memory.WrongMark(wrong, note))
	if errors.Is(err, store.ErrNotFound) {
		return ui.ErrNotFound
	}
	if err != nil {
		d.a.memory.StoreFailed(ctx, "mark_solution", err)
	}
	return err
}

func (d dashSource) MarkFix(ctx context.Context, workspace, project, id string, wrong bool, note string) error {
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	_, err := d.a.memory.MarkFix(sctx, workspace, project, id, d.a.memory.WrongMark(wrong, note))
	if errors.Is(err, store.ErrNotFound) {
		return ui.ErrNotFound
	}
	if err != nil {
		d.a.memory.StoreFailed(ctx, "mark_fix", err)
	}
	return err
}

func (d dashSource) Conversations(ctx context.Context, workspace, project string, ids []string) (map[string]store.Conversation, error) {
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	labels, err := d.a.store.GetConversations(sctx, workspace, project, ids)
	if err != nil {
		d.a.memory.StoreFailed(ctx, "get_conversations", err)
	}
	return labels, err
}

// maxFixesListed caps the learned fixes the dashboard lists.
const maxFixesListed = 1000

func (d dashSource) Fixes(ctx context.Context, workspace, project string) ([]store.Fix, error) {
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	fixes, err := d.a.store.ListFixes(sctx, store.FixQuery{Workspace: workspace, Project: project, Limit: maxFixesListed})
	if err != nil {
		d.a.memory.StoreFailed(ctx, "list_fixes", err)
		return nil, err
	}
	return fixes, nil
}

func (d dashSource) Usage(ctx context.Context, q store.UsageQuery) ([]store.Usage, error) {
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	recs, err := d.a.store.ListUsage(sctx, q)
	if err != nil {
		d.a.memory.StoreFailed(ctx, "list_usage", err)
		return nil, err
	}
	return recs, nil
}

func (d dashSource) DeleteFix(ctx context.Context, workspace, project, id string) error {
	sctx, cancel := d.a.memoryStoreCtx(ctx)
	defer cancel()
	err := d.a.store.DeleteFix(sctx, workspace, project, id)
	if errors.Is(err, store.ErrNotFound) {
		return ui.ErrNotFound
	}
	if err != nil {
		d.a.memory.StoreFailed(ctx, "delete_fix", err)
	}
	return err
}
