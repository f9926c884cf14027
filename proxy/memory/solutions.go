package memory

// Writes of solutions and learned fixes within their caps.

import (
	"context"

	"github.com/scarproxy/scarproxy/store"
)

// PutSolutions stores sols in one transaction (store.Store.PutSolutions)
// within the solutions cap (RetentionSolutionsMaxPerWorkspace): a
// workspace that grows past it loses its least recently updated
// unverified solutions in the same transaction, so neither the store nor
// any replica's recall index ever holds more. Every write of a solution
// goes through it, or keeps no cap.
func (m *Memory) PutSolutions(ctx context.Context, sols ...*store.Solution) error {
	n, err := m.store.PutSolutions(ctx, sols, m.opts.RetentionSolutionsMaxPerWorkspace)
	if err != nil {
		return err
	}
	if n > 0 {
		m.log.DebugContext(ctx, "solutions over the cap removed", "count", n, "cap", m.opts.RetentionSolutionsMaxPerWorkspace)
	}
	return nil
}

// PutFixes stores fixes in one transaction (store.Store.PutFixes) within
// the fixes cap (RetentionFixesMaxPerProject): a project that grows past
// it loses its least recently updated fixes in the same transaction.
func (m *Memory) PutFixes(ctx context.Context, fixes ...*store.Fix) error {
	n, err := m.store.PutFixes(ctx, fixes, m.opts.RetentionFixesMaxPerProject)
	if err != nil {
		return err
	}
	if n > 0 {
		m.log.DebugContext(ctx, "fixes over the cap removed", "count", n, "cap", m.opts.RetentionFixesMaxPerProject)
	}
	return nil
}
