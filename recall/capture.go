package recall

import (
	"cmp"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/store"
)

// Caps, in runes, of the text of an auto-captured solution.
const (
	maxAutoGoal    = 500 // the goal is the first user message
	maxAutoExcerpt = 200 // excerpt of the final answer in the approach
	maxToolSteps   = 12  // tool steps listed in the approach
	maxToolName    = 64
)

// Confidence of auto-captured solutions.
const (
	autoConfidence        = 0.8 // with no tool failure
	autoConfidencePenalty = 0.1 // per tool failure
	autoConfidenceFloor   = 0.3
)

// Conversation is what the proxy saw of a finished conversation.
type Conversation struct {
	Workspace, Project string
	// Key is the ConversationKey of its first messages.
	Key string
	// Goal is the user's task (see TaskFinder).
	Goal string
	// Tools are the names of the tools used, in order, repeats included.
	Tools []string
	// Recovered counts, per tool, the failed results of it that a later
	// call of the same tool overcame. The proxy captures a conversation
	// only when the latest result of every tool succeeded, so every
	// failure of it was overcome.
	Recovered map[string]int
	// FinalAnswer is the text of the assistant's final answer.
	FinalAnswer string
}

// AutoSolution builds the solution to store for a finished conversation:
// the goal is c.Goal (whitespace folded, capped at 500 runes); the approach
// lists the tools used in order, consecutive repeats counted
// ("read_file -> run_tests x3 -> write_file"), and an excerpt of the final
// answer (200 runes); the outcome says how it ended and which tool
// failures it recovered from ("recovered from 2 failures of run_shell");
// confidence is 0.8 less 0.1 per tool failure, at least 0.3. Source is auto, Verified false, Key c.Key, Created and
// Updated now. ID is left for the store to assign.
func AutoSolution(c Conversation, now time.Time) store.Solution {
	failures := 0
	for _, n := range c.Recovered {
		failures += max(n, 0)
	}
	conf := max(autoConfidence-autoConfidencePenalty*float64(failures), autoConfidenceFloor)
	conf = math.Round(conf*100) / 100

	calls := 0
	for _, t := range c.Tools {
		if strings.TrimSpace(t) != "" {
			calls++
		}
	}
	approach := "Tools: " + toolSummary(c.Tools) + "."
	if ans := capRunes(joinFields(c.FinalAnswer, " "), maxAutoExcerpt); ans != "" {
		approach += " Final answer: " + ans
	}
	outcome := "Completed with a final answer after " + plural(calls, "tool call")
	if failures == 0 {
		outcome += "; no tool failures."
	} else {
		outcome += "; recovered from " + recoveredSummary(c.Recovered) + "."
	}
	return store.Solution{
		Workspace:  c.Workspace,
		Project:    c.Project,
		Key:        c.Key,
		Goal:       capRunes(joinFields(c.Goal, " "), maxAutoGoal),
		Approach:   approach,
		Outcome:    outcome,
		Confidence: conf,
		Source:     store.SourceAuto,
		Verified:   false,
		Created:    now,
		Updated:    now,
	}
}

// toolSummary renders tool names in order, consecutive repeats counted,
// at most maxToolSteps steps.
func toolSummary(tools []string) string {
	type step struct {
		name string
		n    int
	}
	var steps []step
	for _, t := range tools {
		t = capRunes(joinFields(t, "_"), maxToolName)
		if t == "" {
			continue
		}
		if len(steps) > 0 && steps[len(steps)-1].name == t {
			steps[len(steps)-1].n++
			continue
		}
		steps = append(steps, step{t, 1})
	}
	if len(steps) == 0 {
		return "none"
	}
	parts := make([]string, 0, min(len(steps), maxToolSteps)+1)
	for i, s := range steps {
		if i == maxToolSteps {
			parts = append(parts, "… (+"+strconv.Itoa(len(steps)-maxToolSteps)+" more steps)")
			break
		}
		if s.n > 1 {
			parts = append(parts, s.name+" x"+strconv.Itoa(s.n))
		} else {
			parts = append(parts, s.name)
		}
	}
	return strings.Join(parts, " -> ")
}

// recoveredSummary names the failures overcome, per tool, most first:
// "2 failures of run_shell and 1 of read_file".
func recoveredSummary(rec map[string]int) string {
	type tool struct {
		name string
		n    int
	}
	var tools []tool
	for name, n := range rec {
		if n > 0 {
			name = capRunes(joinFields(name, "_"), maxToolName)
			if name == "" {
				name = "a tool"
			}
			tools = append(tools, tool{name, n})
		}
	}
	slices.SortFunc(tools, func(a, b tool) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.name, b.name)) })
	var parts []string
	for i, t := range tools {
		if i == 0 {
			parts = append(parts, plural(t.n, "failure")+" of "+t.name)
		} else {
			parts = append(parts, strconv.Itoa(t.n)+" of "+t.name)
		}
	}
	switch len(parts) {
	case 0:
		return "no failures"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// joinFields returns strings.Join(strings.Fields(s), sep), and s itself,
// without building anything, when that is what it would return: a tool
// name without white space, or a text whose white space is already single
// spaces between words (with sep " ").
func joinFields(s, sep string) string {
	if sep == " " && singleSpaced(s) || sep != " " && !strings.ContainsFunc(s, unicode.IsSpace) {
		return s
	}
	return strings.Join(strings.Fields(s), sep)
}

// singleSpaced reports whether the only white space of s is single ' '
// between other characters.
func singleSpaced(s string) bool {
	prevSpace := true // at the start, a space would be leading
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if unicode.IsSpace(r) {
			if r != ' ' || prevSpace {
				return false
			}
			prevSpace = true
		} else {
			prevSpace = false
		}
		i += size
	}
	return !prevSpace || s == ""
}

// failureReport matches what an agent's final answer says when the task
// did not succeed: it could not, was unable to, failed to, gave up, still
// fails. Read in the answer's first and last sentences.
var failureReport = regexp.MustCompile(`(?i)\b(?:(?:i|we)(?:'ve| have)? (?:was |were |am |are )?(?:unable|not able|could ?n[o']t|cannot|can't|did ?n[o']t manage|failed)\b|(?:failed|unable|was not able|were not able) to (?:fix|complete|resolve|finish|run|build|install|get|make|pass|apply|create|find)\b|gave up\b|giving up\b|(?:still|keeps?) (?:fail(?:s|ing)?|broken|erroring|crash(?:es|ing)?)\b|(?:was|is) not successful\b|without success\b|(?:did|does) not succeed\b)`)

// reportSpan is how much of the start and of the end of a final answer
// ReportsFailure reads: where an agent says how the task ended.
const reportSpan = 600

// ReportsFailure reports whether a final answer says the task failed
// ("I was unable to fix…", "the build still fails", "gave up after…"):
// such a conversation is no solution, whatever its tools last returned.
func ReportsFailure(answer string) bool {
	if len(answer) > 2*reportSpan {
		answer = answer[:reportSpan] + "\n" + answer[len(answer)-reportSpan:]
	}
	return mayReportFailure(answer) && failureReport.MatchString(answer)
}

// reportWords are words one of which every failure report failureReport
// matches holds, in lower case: most final answers hold none, and a
// search for them costs a small part of the pattern's.
var reportWords = []string{
	"unable", "not able", "could", "cannot", "can't", "manage", "fail", "gave up", "giving up",
	"broken", "erroring", "crash", "succe",
}

// mayReportFailure reports whether answer holds one of reportWords, in any
// case. The pattern's (?i) also takes the Kelvin sign for k and the long
// s for s: an answer holding either is left to the pattern.
func mayReportFailure(answer string) bool {
	if strings.Contains(answer, "\u212a") || strings.Contains(answer, "\u017f") {
		return true
	}
	lower := strings.ToLower(answer)
	for _, w := range reportWords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}
