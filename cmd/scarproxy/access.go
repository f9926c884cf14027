package main

import (
	"context"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// memoryAccess is what the store commands do with the memory: on the
// store of the configuration ([storeAccess]) or through a running proxy's
// memory API ([apiAccess], --url). An empty workspace or project means the
// default of whichever decides: the configuration's, or the proxy's.
type memoryAccess interface {
	// AddSolution stores a verified solution (the same goal updates it).
	AddSolution(ctx context.Context, s solutionIn) (store.Solution, error)
	ListSolutions(ctx context.Context, workspace string) ([]store.Solution, error)
	DeleteSolution(ctx context.Context, workspace, id string) error
	// MarkSolution marks a solution wrong, with a note, or (wrong
	// false) clears its mark.
	MarkSolution(ctx context.Context, workspace, id string, wrong bool, note string) (store.Solution, error)
	// Recall returns the solutions most similar to q.Goal and the
	// threshold used; q.K 0 means recall.max_results.
	Recall(ctx context.Context, q recall.Query) ([]recall.Match, float64, error)
	ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error)
	// Guard returns the guard of a tenant (see guardShown).
	Guard(ctx context.Context, workspace, project, session string) (guardShown, error)
	ListFixes(ctx context.Context, q store.FixQuery) ([]store.Fix, error)
	DeleteFix(ctx context.Context, workspace, project, id string) error
	// MarkFix marks a learned fix wrong, with a note, or (wrong false)
	// clears its mark.
	MarkFix(ctx context.Context, workspace, project, id string, wrong bool, note string) (store.Fix, error)
	Close() error
}

// solutionIn is a solution given on the command line.
type solutionIn struct {
	Workspace  string  `json:"workspace,omitempty"`
	Project    string  `json:"project,omitempty"`
	Goal       string  `json:"goal"`
	Approach   string  `json:"approach"`
	Outcome    string  `json:"outcome"`
	Confidence float64 `json:"confidence"` // in [0,1], or a percentage up to 100
}

// guardShown is the guard `guard show` prints.
type guardShown struct {
	Patterns []guard.Entry `json:"patterns"`
	Block    string        `json:"block"`
	// Window is the guard's window; Incidents how many incidents in it
	// were read (-1: not known, through the memory API).
	Window    time.Duration `json:"-"`
	Incidents int           `json:"-"`
}

// storeAccess is memoryAccess on the store itself.
type storeAccess struct {
	st  store.Store
	cfg Config
}

var _ memoryAccess = (*storeAccess)(nil)

func (a *storeAccess) Close() error { return a.st.Close() }

func (a *storeAccess) AddSolution(ctx context.Context, in solutionIn) (store.Solution, error) {
	now := time.Now()
	sol := store.Solution{
		Workspace: in.Workspace, Project: in.Project, Key: recall.GoalKey(in.Goal),
		Goal: in.Goal, Approach: in.Approach, Outcome: in.Outcome,
		Confidence: in.Confidence, Source: store.SourceAPI, Verified: true, Created: now, Updated: now,
	}
	_, err := a.st.PutSolutions(ctx, []*store.Solution{&sol}, a.cfg.Retention.SolutionsMaxPerWorkspace)
	return sol, err
}

func (a *storeAccess) ListSolutions(ctx context.Context, workspace string) ([]store.Solution, error) {
	return a.st.ListSolutions(ctx, workspace)
}

func (a *storeAccess) DeleteSolution(ctx context.Context, workspace, id string) error {
	return a.st.DeleteSolution(ctx, workspace, id)
}

func (a *storeAccess) MarkSolution(ctx context.Context, workspace, id string, wrong bool, note string) (store.Solution, error) {
	return a.st.MarkSolution(ctx, workspace, id, wrongMark(wrong, note))
}

func (a *storeAccess) MarkFix(ctx context.Context, workspace, project, id string, wrong bool, note string) (store.Fix, error) {
	return a.st.MarkFix(ctx, workspace, project, id, wrongMark(wrong, note))
}

// wrongMark is the mark the store commands give: now, with the note
// redacted and capped as the memory API stores it; nil to clear.
func wrongMark(wrong bool, note string) *store.Wrong {
	if !wrong {
		return nil
	}
	return &store.Wrong{At: time.Now(), Note: memory.StoredMessage(note)}
}

func (a *storeAccess) Recall(ctx context.Context, q recall.Query) ([]recall.Match, float64, error) {
	ix := recall.NewIndex()
	if _, _, err := ix.Follow(ctx, a.st, 0); err != nil {
		return nil, 0, err
	}
	if q.K == 0 {
		q.K = a.cfg.Recall.MaxResults
	}
	q.MinSimilarity = a.cfg.Recall.MinSimilarity
	return ix.Search(q), q.MinSimilarity, nil
}

func (a *storeAccess) ListIncidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error) {
	return a.st.ListIncidents(ctx, q)
}

// Guard detects the repeated failures among the tenant's incidents in the
// guard's window: those of one session, or of every session.
func (a *storeAccess) Guard(ctx context.Context, workspace, project, session string) (guardShown, error) {
	g, err := guard.New(a.cfg.Guard)
	if err != nil {
		return guardShown{}, err
	}
	now := time.Now()
	incs, err := a.st.ListIncidents(ctx, store.IncidentQuery{
		Workspace: workspace, Project: project, Session: session,
		Since: now.Add(-a.cfg.Guard.Window), Limit: memory.DefaultGuardReadLimit,
	})
	if err != nil {
		return guardShown{}, err
	}
	entries := g.Detect(incs, now)
	return guardShown{Patterns: entries, Block: guard.Block(entries), Window: a.cfg.Guard.Window, Incidents: len(incs)}, nil
}

func (a *storeAccess) ListFixes(ctx context.Context, q store.FixQuery) ([]store.Fix, error) {
	return a.st.ListFixes(ctx, q)
}

func (a *storeAccess) DeleteFix(ctx context.Context, workspace, project, id string) error {
	return a.st.DeleteFix(ctx, workspace, project, id)
}
