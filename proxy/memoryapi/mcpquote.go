package memoryapi

import (
	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/guard/quoted"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// An MCP tool's result is read by a model as a block is: the stored prose
// in it (goals, approaches, outcomes, error messages, calls, notes, keys
// made of them) goes through the quoting path that blocks use
// ([quoted.Plain]): one line, capped, with what reads like an instruction
// to a model taken out, [quoted.Withheld] for text that cannot be shown.
// The JSON keeps its fields; each result that carries stored prose also
// says, in its notice field, that the prose is data. Tool names go
// through [quoted.Name]: "" when one reads as an instruction.
//
// The memory API (/scar/v1) returns stored text as stored: it is read by
// people and scripts (the dashboard, exports, imports, the mark-wrong
// actions, which compare what they were shown with what is stored).
//
// The caps are those of the blocks where the blocks have one (a
// solution's goal, approach and outcome as the recall block shows them),
// wider where a tool's caller asks for one record (an error message, a
// call).
const (
	mcpGoalRunes     = 300
	mcpApproachRunes = 600
	mcpOutcomeRunes  = 300
	mcpMessageRunes  = 600
	mcpCallRunes     = 600
	mcpNoteRunes     = 300
	mcpLabelRunes    = 120
)

// mcpNotice is the notice field of the results that carry stored prose.
const mcpNotice = quoted.Notice

// mcpProse returns stored prose as an MCP result shows it.
func mcpProse(s string, max int) string {
	if s == "" {
		return ""
	}
	p, _ := quoted.Plain(s, max)
	return p
}

// mcpName returns a tool's name as an MCP result shows it.
func mcpName(s string) string {
	n, _ := quoted.Name(s, mcpLabelRunes)
	return n
}

// mcpWrong returns a copy of a mark of wrong with its note quoted.
func mcpWrong(w *store.Wrong) *store.Wrong {
	if w == nil {
		return nil
	}
	c := *w
	c.Note = mcpProse(c.Note, mcpNoteRunes)
	return &c
}

// mcpSolution returns a copy of a solution with its prose quoted.
func mcpSolution(s store.Solution) store.Solution {
	s.Key = mcpProse(s.Key, mcpGoalRunes)
	s.Goal = mcpProse(s.Goal, mcpGoalRunes)
	s.Approach = mcpProse(s.Approach, mcpApproachRunes)
	s.Outcome = mcpProse(s.Outcome, mcpOutcomeRunes)
	s.Wrong = mcpWrong(s.Wrong)
	return s
}

// mcpMatches returns a copy of matches with their solutions quoted: the
// matches may be the recall cache's own.
func mcpMatches(ms []recall.Match) []recall.Match {
	if ms == nil {
		return nil
	}
	out := make([]recall.Match, len(ms))
	for i, m := range ms {
		m.Solution = mcpSolution(m.Solution)
		m.Why.Action = mcpProse(m.Why.Action, mcpLabelRunes)
		m.Why.Object = mcpProse(m.Why.Object, mcpLabelRunes)
		out[i] = m
	}
	return out
}

// mcpIncident returns a copy of an incident with its prose quoted.
func mcpIncident(inc store.Incident) store.Incident {
	inc.Message = mcpProse(inc.Message, mcpMessageRunes)
	inc.Code = mcpProse(inc.Code, mcpLabelRunes)
	inc.Agent = mcpProse(inc.Agent, mcpLabelRunes)
	inc.Provider = mcpProse(inc.Provider, mcpLabelRunes)
	inc.Model = mcpProse(inc.Model, mcpLabelRunes)
	inc.Type = mcpProse(inc.Type, mcpLabelRunes)
	return inc
}

// mcpEntries returns a copy of guard entries with their stored parts
// quoted (the pattern's label and fix text are the configuration's).
func mcpEntries(es []guard.Entry) []guard.Entry {
	if es == nil {
		return nil
	}
	out := make([]guard.Entry, len(es))
	for i, e := range es {
		e.Example = mcpProse(e.Example, mcpMessageRunes)
		e.Call = mcpProse(e.Call, mcpCallRunes)
		e.Provider = mcpProse(e.Provider, mcpLabelRunes)
		if e.Tools != nil {
			tools := make([]string, 0, len(e.Tools))
			for _, t := range e.Tools {
				if n := mcpName(t); n != "" {
					tools = append(tools, n)
				}
			}
			e.Tools = tools
		}
		if e.Fixed != nil {
			f := *e.Fixed
			f.Tool = mcpName(f.Tool)
			f.Call = mcpProse(f.Call, mcpCallRunes)
			f.Note = mcpProse(f.Note, mcpNoteRunes)
			e.Fixed = &f
		}
		out[i] = e
	}
	return out
}

// mcpFix returns a copy of a learned fix with its prose quoted.
func mcpFix(f store.Fix) store.Fix {
	f.Key = mcpProse(f.Key, mcpMessageRunes)
	f.Tool = mcpName(f.Tool)
	f.Failure = mcpProse(f.Failure, mcpMessageRunes)
	f.Call = mcpProse(f.Call, mcpCallRunes)
	f.Explanation = mcpProse(f.Explanation, mcpNoteRunes)
	f.Wrong = mcpWrong(f.Wrong)
	return f
}
