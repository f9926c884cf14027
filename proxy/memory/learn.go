package memory

import (
	"slices"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/tenant"
	"github.com/scarproxy/scarproxy/proxy/wire"
	"github.com/scarproxy/scarproxy/store"
)

// Learning fixes. When a tool that failed repeatedly in a conversation
// succeeds, the successful call (and what the assistant wrote beside it)
// is remembered as the fix of each failure of that tool that had made a
// guard entry. A later failure with the same fingerprint, or of the same
// named pattern with the same tool, in any conversation of the project,
// shows it in its guard entry: "Last time this was fixed by: ...".

// learnFixes stores the fixes shown by the request's fresh tool results
// (indexes into info.ToolResults new to the conversation) and reports
// whether it stored any. A fix already stored as it is is not written
// again.
func (m *Memory) learnFixes(budget *storeBudget, t tenant.Tenant, w *guardWindow, info *wire.Info, tallies []wire.ToolTally, fresh []int, now time.Time) bool {
	if t.Session == "" || len(fresh) == 0 {
		return false
	}
	stored := false
	done := map[string]bool{} // tools handled: the first success of each counts
	for _, i := range fresh {
		tr := &info.ToolResults[i]
		if tr.Failed || tr.Name == "" || done[tr.Name] {
			continue
		}
		done[tr.Name] = true
		fixes := m.fixesShownBy(t, w, tr, tallies, now)
		if len(fixes) == 0 {
			continue
		}
		ptrs := make([]*store.Fix, len(fixes))
		for j := range fixes {
			ptrs[j] = &fixes[j]
		}
		if err := m.PutFixes(budget.context(), ptrs...); err != nil {
			m.StoreFailed(budget.parent, "put_fix", err)
			return stored
		}
		stored = true
		for _, f := range fixes {
			m.log.InfoContext(budget.parent, "fix learned", "workspace", t.Workspace, "project", t.Project, "session", t.Session,
				"tool", tr.Name, "pattern", f.Pattern, "failures", f.Failures)
		}
	}
	return stored
}

// fixesShownBy returns the fixes a successful result tr of a tool shows
// (one the API marks as a success, or whose content shows one: see
// guard.ToolSucceeded), ready to store: one for each repeated failure of the tool in the
// conversation (in w), unless known as it is.
func (m *Memory) fixesShownBy(t tenant.Tenant, w *guardWindow, tr *wire.ToolResult, tallies []wire.ToolTally, now time.Time) []store.Fix {
	minRepeats := m.Guard().MinRepeats()
	// The conversation's results say whether the tool failed often enough
	// to have made an entry; most successes end here.
	j := slices.IndexFunc(tallies, func(tt wire.ToolTally) bool { return tt.Name == tr.Name })
	if j < 0 || tallies[j].Failures < minRepeats {
		return nil
	}
	// A success re-sent, or another after no new failure: judged already.
	k := convRef{t.Workspace, t.Project, t.Session}
	if m.loops.lookedFor(k, tr.Name, tallies[j].Failures, false) {
		return nil
	}
	// Only a call known to have succeeded is a fix: a failure the rules
	// missed (an output with no exit status) must not be taught as one.
	if !tr.OK && !succeeded(tr) {
		m.log.Debug("no fix learned: the call's result shows no success", "workspace", t.Workspace, "project", t.Project, "session", t.Session, "tool", tr.Name)
		return nil
	}
	// Once per conversation and count of failures on this replica: the
	// same success re-sent, or another success after no new failure, has
	// nothing new to teach.
	if m.loops.lookedFor(k, tr.Name, tallies[j].Failures, true) {
		return nil
	}
	var failures []store.Incident
	for _, in := range w.incidents {
		if in.Session == t.Session && guard.ToolOf(&in) == tr.Name {
			failures = append(failures, in)
		}
	}
	if len(failures) < minRepeats {
		return nil // nothing repeated
	}
	call, note := wire.CallArgs(tr.Args), wire.NoteText(tr.Note)
	var fixes []store.Fix
	for _, e := range m.Guard().Detect(failures, now) {
		f := store.Fix{
			Workspace: t.Workspace, Project: t.Project, Pattern: e.Pattern, Fingerprint: e.Fingerprint,
			Tool: tr.Name, Failure: e.Example, Call: call, Explanation: note, Failures: e.Count, Session: t.Session,
		}
		if f.Failure == "" {
			f.Failure = newestOf(failures, e).Message
		}
		m.PrepareFix(&f)
		if i := slices.IndexFunc(w.fixes, func(o store.Fix) bool { return o.Key == f.Key }); i >= 0 {
			if o := &w.fixes[i]; o.Call == f.Call && o.Explanation == f.Explanation && o.Failures == f.Failures {
				continue // known as it is
			}
		}
		fixes = append(fixes, f)
	}
	return fixes
}

// newestOf returns the newest of failures that make entry e: those of its
// fingerprint, or else the newest of all.
func newestOf(failures []store.Incident, e guard.Entry) store.Incident {
	best := -1
	for i := range failures {
		if e.Fingerprint != "" && failures[i].Fingerprint != e.Fingerprint {
			continue
		}
		if best < 0 || failures[i].Time.After(failures[best].Time) {
			best = i
		}
	}
	if best < 0 {
		best = 0
	}
	return failures[best]
}

// withFixes keeps, of entries (every group, DetectAll), those that
// repeated and those a learned fix applies to, each with its fix: the
// newest fix of the same fingerprint, else of the same named pattern and
// one of the entry's tools.
func (m *Memory) withFixes(entries []guard.Entry, fixes []store.Fix) []guard.Entry {
	minRepeats := m.Guard().MinRepeats()
	out := entries[:0]
	for _, e := range entries {
		if e.Provider == "" && len(e.Tools) > 0 && len(fixes) > 0 {
			for _, f := range MatchFixes(fixes, e.Pattern, e.Fingerprint) {
				if f.Fingerprint == e.Fingerprint && e.Fingerprint != "" || slices.Contains(e.Tools, f.Tool) {
					e.Fixed = &guard.Fixed{Tool: f.Tool, Call: f.Call, Note: f.Explanation}
					break
				}
			}
		}
		if e.Count >= minRepeats || e.Fixed != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// succeeded reports whether a tool result is known to have succeeded by
// what it says (guard.ToolSucceeded), or, for a shell call that only
// printed files, by not saying it failed (guard.ShellReadFailed).
func succeeded(tr *wire.ToolResult) bool {
	if failed, read := guard.ShellReadFailed(wire.CallCommand(tr.Args), tr.Text()); read {
		return !failed
	}
	return guard.ToolSucceeded(tr.Text())
}
