package memory

import (
	"context"

	"github.com/scarproxy/scarproxy/store"
)

// A person may mark a learned fix or a solution wrong (store.Wrong): it
// stays stored, listed with its mark for audit, and is never shown to an
// agent again. The guard and fix search skip a marked fix (MatchFixes);
// recall drops a marked solution from its index (recall.Index.Put).

// maxWrongNote caps the note of a mark, in bytes after redaction.
const maxWrongNote = 500

// WrongMark returns the mark a person gives now with note (redacted and
// capped), or nil when wrong is false: the argument MarkFix and
// MarkSolution take.
func (m *Memory) WrongMark(wrong bool, note string) *store.Wrong {
	if !wrong {
		return nil
	}
	return &store.Wrong{At: m.Now(), Note: redactCapped(note, maxWrongNote)}
}

// MarkFix sets (or, with nil, clears) the mark of one of the tenant's
// fixes. The guard follows at once: the store moves the tenant's incident
// version, which every replica's guard cache checks.
func (m *Memory) MarkFix(ctx context.Context, workspace, project, id string, wrong *store.Wrong) (store.Fix, error) {
	return m.store.MarkFix(ctx, workspace, project, id, wrong)
}

// MarkSolution sets (or, with nil, clears) the mark of one of the
// workspace's solutions, then brings this replica's recall index up to
// date within ctx; other replicas follow the change feed.
func (m *Memory) MarkSolution(ctx context.Context, workspace, id string, wrong *store.Wrong) (store.Solution, error) {
	s, err := m.store.MarkSolution(ctx, workspace, id, wrong)
	if err != nil {
		return s, err
	}
	if err := m.SyncIndexWithin(ctx); err != nil {
		m.log.Warn("recall index sync after a mark failed", "err", err)
	}
	return s, nil
}
