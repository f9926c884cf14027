package guard

import (
	"strconv"
	"strings"
)

// Loops. A conversation's tool calls, in order, are its steps; the loop
// detector looks at the latest one and asks whether it repeats what came
// before without progress. Escalation has three levels: the guard entry
// (LevelGuard), the STOP block (LevelStop, at Config.StopAfter repeats)
// and, when Config.HardStop is on, a turn sent with tools forbidden
// (LevelHardStop, at Config.HardStopAfter repeats).

// Loop kinds.
const (
	// LoopFailing: the same call (tool and arguments) failed again.
	LoopFailing = "repeated_failure"
	// LoopNoProgress: the same call returned the same result again.
	LoopNoProgress = "no_progress"
	// LoopAlternating: two calls alternate (A, B, A, B), each returning
	// what it returned before.
	LoopAlternating = "alternating"
	// LoopUnknownTool: a call of a tool the request does not define.
	LoopUnknownTool = "unknown_tool"
)

// Escalation levels.
const (
	LevelNone     = 0
	LevelGuard    = 1 // a guard entry
	LevelStop     = 2 // the STOP block
	LevelHardStop = 3 // the STOP block, and the turn sent with tools forbidden
)

// LevelName names a level as the X-Scar-Loop header, metrics and stored
// loop incidents do: "", "guard", "stop", "hard-stop".
func LevelName(level int) string {
	switch level {
	case LevelGuard:
		return "guard"
	case LevelStop:
		return "stop"
	case LevelHardStop:
		return "hard-stop"
	}
	return ""
}

// Defaults of the escalation settings.
const (
	DefaultStopAfter = 4
	hardStopMargin   = 2 // HardStopAfter's default: StopAfter plus this
)

// Step is one tool call of a conversation and its result.
type Step struct {
	Tool    string
	Args    string // the call's arguments, normalised (equal calls have equal Args)
	Result  uint64 // a hash of the result's content: equal results, equal hashes
	Failed  bool
	Unknown bool   // the request defines tools and none of them is Tool
	Output  string // the start of the result's text, for the STOP block (which redacts it)
}

func (s *Step) sameCall(o *Step) bool { return s.Tool == o.Tool && s.Args == o.Args }

// Loop is the loop the latest step is part of.
type Loop struct {
	Kind  string // Loop* constant; "" when none
	Count int    // how many times the call repeated (cycles for LoopAlternating)
	Level int    // Level* constant
	// Calls are the repeated calls: one, or two for LoopAlternating.
	Calls []Step

	key string // Key, set by DetectLoop
}

// Key names the loop within its conversation: its kind and calls.
func (l Loop) Key() string {
	if l.key != "" || l.Kind == "" {
		return l.key
	}
	return l.makeKey()
}

func (l Loop) makeKey() string {
	var b strings.Builder
	b.WriteString(l.Kind)
	for _, c := range l.Calls {
		b.WriteString("|")
		b.WriteString(c.Tool)
		b.WriteString("(")
		b.WriteString(c.Args)
		b.WriteString(")")
	}
	return b.String()
}

// DetectLoop finds the loop the latest of steps (oldest first) is part of,
// and its level. Each kind has its own count:
//
//   - LoopFailing: the calls equal to the latest one that failed, since a
//     call of the same tool last succeeded with other arguments (a fix);
//   - LoopNoProgress: the calls equal to the latest one that returned the
//     same result, since one returned another;
//   - LoopAlternating: the cycles of two calls alternating at the end, each
//     returning what it returned before;
//   - LoopUnknownTool: the calls of the latest step's undefined tool.
//
// A loop reaches LevelGuard at MinRepeats (MinRepeats+1 for calls that
// succeed with the same result: reading a file twice is common),
// LevelStop at StopAfter and LevelHardStop at HardStopAfter when HardStop
// is on. The highest level wins, then the highest count.
func (g *Guard) DetectLoop(steps []Step) Loop {
	n := len(steps)
	if n == 0 {
		return Loop{}
	}
	last := &steps[n-1]
	var best Loop
	consider := func(l Loop, first int) {
		l.Level = g.level(l.Count, first)
		if l.Level > best.Level || l.Level == best.Level && l.Level > 0 && l.Count > best.Count {
			best = l
		}
	}

	// Two calls alternating (before the same call again, which they also
	// are: on a tie the first kind considered wins).
	if n >= 4 && !steps[n-2].sameCall(last) {
		run := 2
		for i := n - 3; i >= 0; i-- {
			s, t := &steps[i], &steps[i+2]
			if !s.sameCall(t) || s.Result != t.Result {
				break
			}
			run++
		}
		if run >= 4 {
			consider(Loop{Kind: LoopAlternating, Count: run / 2, Calls: []Step{steps[n-2], *last}}, g.cfg.MinRepeats)
		}
	}

	// The same call again.
	same := 0
	for i := n - 1; i >= 0; i-- {
		s := &steps[i]
		if s.sameCall(last) {
			if last.Failed && !s.Failed || !last.Failed && s.Result != last.Result {
				break // it worked, or returned something else: progress
			}
			same++
		} else if last.Failed && s.Tool == last.Tool && !s.Failed {
			break // the tool worked with other arguments since
		}
	}
	if last.Failed {
		consider(Loop{Kind: LoopFailing, Count: same, Calls: []Step{*last}}, g.cfg.MinRepeats)
	} else {
		consider(Loop{Kind: LoopNoProgress, Count: same, Calls: []Step{*last}}, g.cfg.MinRepeats+1)
	}

	// A tool that does not exist.
	if last.Unknown {
		unknown := 0
		for i := range steps {
			if steps[i].Unknown && steps[i].Tool == last.Tool {
				unknown++
			}
		}
		consider(Loop{Kind: LoopUnknownTool, Count: unknown, Calls: []Step{*last}}, g.cfg.MinRepeats)
	}
	if best.Level == LevelNone {
		return Loop{}
	}
	best.key = best.makeKey()
	return best
}

// level is the level count repeats reach; first is LevelGuard's threshold.
func (g *Guard) level(count, first int) int {
	switch {
	case g.cfg.HardStop && count >= g.cfg.hardStopAfter():
		return LevelHardStop
	case count >= g.cfg.stopAfter():
		return LevelStop
	case count >= first:
		return LevelGuard
	}
	return LevelNone
}

// Loop entry labels.
const (
	labelNoProgress  = "NO PROGRESS LOOP"
	labelAlternating = "ALTERNATING LOOP"
	labelUnknownTool = "UNKNOWN TOOL"
)

// LoopEntry returns the guard entry of a loop, for the kinds the failure
// entries do not already show (a call that keeps failing is shown by its
// error's entry), and false for the others.
func LoopEntry(l Loop) (Entry, bool) {
	if l.Level == LevelNone || len(l.Calls) == 0 {
		return Entry{}, false
	}
	c := &l.Calls[0]
	switch l.Kind {
	case LoopNoProgress:
		return Entry{Pattern: labelNoProgress, Count: l.Count, Call: callText(c),
			Hint: "This call returned the same result every time. You already have its result: use it, or change the call."}, true
	case LoopAlternating:
		return Entry{Pattern: labelAlternating, Count: l.Count, Call: callText(c) + " / " + callText(&l.Calls[1]),
			Hint: "These two calls keep alternating with the same results. Neither changes anything: stop and change approach."}, true
	case LoopUnknownTool:
		return Entry{Pattern: labelUnknownTool, Count: l.Count, Call: callText(c),
			Hint: "This tool is not among the tools you were given. Use only the tools defined in this request."}, true
	}
	return Entry{}, false
}

// Caps, in runes, on the quoted parts of a call.
const (
	maxCallArgsRunes = 200
	maxOutputRunes   = 200
)

// callText shows a call: its tool's name, then its arguments quoted;
// arguments that cannot be shown are left out, and so is a name that reads
// as an instruction.
func callText(s *Step) string {
	name := toolName(s.Tool)
	switch {
	case name != "":
	case Sanitize(s.Tool, maxLabelRunes) == "":
		name = "(unnamed tool)"
	default:
		name = "(a tool whose name is not shown)"
	}
	if args := quoteOrOmit(s.Args, maxCallArgsRunes); args != "" {
		return name + " " + args
	}
	return name
}

// STOP block markers. Both start with MarkerOpen, which [Sanitize] makes
// impossible in any text that goes into a block.
const (
	StopStart = "### !!! STOP — RECURSIVE ERROR LOOP !!!"
	StopEnd   = "### !!! END STOP !!!"
)

// StopBlock renders the STOP block of a loop at LevelStop or above, or
// returns "" below. Like [Block] it ends with a blank line, ready to open a
// system message, and [Strip] removes it.
func StopBlock(l Loop) string {
	if l.Level < LevelStop || len(l.Calls) == 0 {
		return ""
	}
	return StopBlockWith(l, StopCalls(l.Calls))
}

// StopCalls renders the lines of a STOP block that show its calls and
// their results. They stay the same while a loop goes on and only its
// count grows: a caller that keeps them passes them to [StopBlockWith]
// instead of quoting the calls again.
func StopCalls(calls []Step) string {
	var b strings.Builder
	for i := range calls {
		c := &calls[i]
		b.WriteString("Repeated call: ")
		b.WriteString(callText(c))
		b.WriteString("\n")
		if out := Quote(Redact(c.Output), maxOutputRunes); out != "" {
			b.WriteString("  Its result: ")
			b.WriteString(out)
			b.WriteString("\n")
		}
	}
	return b.String()
}

// StopBlockWith is [StopBlock] with the lines of the loop's calls given:
// calls is StopCalls(l.Calls).
func StopBlockWith(l Loop, calls string) string {
	if l.Level < LevelStop || len(l.Calls) == 0 {
		return ""
	}
	n := strconv.Itoa(l.Count)
	var b strings.Builder
	b.Grow(len(StopStart) + len(QuoteNotice) + len(calls) + 400)
	b.WriteString(StopStart)
	b.WriteString("\nYou are in a recursive error loop: ")
	switch l.Kind {
	case LoopFailing:
		b.WriteString("you made the same tool call " + n + " times and it failed every time.")
	case LoopNoProgress:
		b.WriteString("you made the same tool call " + n + " times and it returned the same result every time.")
	case LoopAlternating:
		b.WriteString("you alternated between the same two tool calls " + n + " times and their results never changed.")
	case LoopUnknownTool:
		b.WriteString("you called a tool that does not exist " + n + " times.")
	default:
		b.WriteString("the same tool calls keep repeating (" + n + " times).")
	}
	b.WriteString("\n")
	b.WriteString(QuoteNotice)
	b.WriteString("\n")
	b.WriteString(calls)
	b.WriteString("Do not make this call again. Read the result above, find the root cause, and change approach; " +
		"if you cannot, stop and explain the problem to the user instead of calling tools.\n")
	if l.Level >= LevelHardStop {
		b.WriteString("Tools are disabled for this turn: answer in words.\n")
	}
	b.WriteString(StopEnd)
	b.WriteString("\n\n")
	return b.String()
}
