package recall

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/guard/quoted"
)

// Markers of the recall block. Each is a whole line of the block.
const (
	BlockStart = "### RECALL: Similar Task Found in Memory"
	BlockEnd   = "### END RECALL"
)

const blockAdvice = "Consider this approach before starting from scratch."

// Caps, in runes, of the stored text shown in a recall block.
const (
	maxBlockGoal     = 300
	maxBlockApproach = 600
	maxBlockOutcome  = 300
)

// Block renders matches as the recall block injected into the system
// message, or "" when there are none. Under its first line the block says
// that quoted text is data ([quoted.Notice]); with several matches it holds
// each match's lines, separated by a blank line: five, or six when the
// match says why it was recalled (a "Why:" line after "Similarity:", naming
// the action and the object the goals share; see [Reason]). The block ends with a
// newline and one blank line, so a caller prepends it to the system message
// as is; [Strip] removes both.
//
// Stored text (goal, approach, outcome) is shown only through
// [quoted.Text]: one line, capped (goal 300, approach 600, outcome 300
// runes), quoted, with instruction-like text taken out, so it can neither
// end the block early, add lines, nor pass for an instruction. Text that
// cannot be shown is replaced by [quoted.Withheld]; of an approach, the
// list of tools an auto-captured one starts with is still shown.
// Percentages are rounded half away from zero: the same matches always
// give the same bytes.
func Block(matches []Match) string {
	if len(matches) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(BlockStart)
	b.WriteByte('\n')
	b.WriteString(quoted.Notice)
	b.WriteByte('\n')
	for i, m := range matches {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("Similarity: ")
		b.WriteString(percent(m.Similarity))
		if w := why(m.Why); w != "" {
			b.WriteString("\nWhy: ")
			b.WriteString(w)
		}
		b.WriteString("\nPrior Goal: ")
		b.WriteString(quote(m.Solution.Goal, maxBlockGoal))
		b.WriteString("\nHow it was solved: ")
		b.WriteString(approachText(m.Solution.Approach))
		b.WriteString("\nOutcome: ")
		b.WriteString(quote(m.Solution.Outcome, maxBlockOutcome))
		b.WriteString("\nConfidence: ")
		b.WriteString(percent(m.Solution.Confidence))
		b.WriteByte('\n')
	}
	b.WriteString(blockAdvice)
	b.WriteByte('\n')
	b.WriteString(BlockEnd)
	b.WriteString("\n\n")
	return b.String()
}

// Cap, in runes, of each part of a Why line.
const maxBlockWhy = 80

// why renders a match's reason for its "Why:" line: `same action "x",
// same object "y z"`, or "" when it has neither. The words are the stored
// goal's, sanitised and quoted.
func why(r Reason) string {
	var parts []string
	// The words are the stored goal's: quoted as the goal is, left out
	// when they cannot be shown.
	if a, ok := quoted.Text(r.Action, maxBlockWhy); ok && a != "" {
		parts = append(parts, "same action "+a)
	}
	if o, ok := quoted.Text(r.Object, maxBlockWhy); ok && o != "" {
		parts = append(parts, "same object "+o)
	}
	return strings.Join(parts, ", ")
}

// percent renders a fraction in [0,1] as a whole percentage; values outside
// are clamped and NaN reads as 0.
func percent(f float64) string {
	if !(f > 0) {
		f = 0
	}
	f = min(f, 1)
	return strconv.Itoa(int(math.Round(f*100))) + "%"
}

// toolsPrefix opens an auto-captured approach, before the tools it used
// (see AutoSolution).
const toolsPrefix = "Tools: "

// quote is quoted.Text's text.
func quote(s string, max int) string {
	q, _ := quoted.Text(s, max)
	return q
}

// approachText quotes an approach; when it cannot be shown, the tools an
// auto-captured approach lists ("Tools: read_file -> run_tests.") are, if
// they can.
func approachText(a string) string {
	q, ok := quoted.Text(a, maxBlockApproach)
	if ok || !strings.HasPrefix(a, toolsPrefix) {
		return q
	}
	tools := a
	if i := strings.Index(a, ". "); i >= 0 {
		tools = a[:i+1]
	}
	if t, ok := quoted.Text(tools, maxBlockApproach); ok {
		return t
	}
	return q
}

// capRunes cuts s to at most n runes, the last being "…" when it cuts.
func capRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, c := 0, 0
	for j := range s {
		if c == n-1 {
			i = j
			break
		}
		c++
	}
	return strings.TrimRightFunc(s[:i], unicode.IsSpace) + "…"
}

// Strip removes every recall block from text: each line equal to
// [BlockStart] through the next line equal to [BlockEnd] (a trailing "\r"
// and spaces ignored), with one blank line right after it. A start line with
// no end line after it is left alone. Strip(Block(m)+x) == x, and Strip is
// idempotent.
func Strip(text string) string {
	if !strings.Contains(text, BlockStart) {
		return text
	}
	var b strings.Builder
	rest := text
	for {
		start := findLine(rest, BlockStart)
		if start < 0 {
			break
		}
		endAt := -1 // index just past the end line
		for i := start; i < len(rest); {
			line, next := lineAt(rest, i)
			if i > start && trimLine(line) == BlockEnd {
				endAt = next
				break
			}
			i = next
		}
		if endAt < 0 {
			break
		}
		b.WriteString(rest[:start])
		rest = rest[endAt:]
		if line, next := lineAt(rest, 0); next > len(line) && (line == "" || line == "\r") {
			rest = rest[next:]
		}
	}
	if b.Len() == 0 {
		return rest
	}
	b.WriteString(rest)
	return b.String()
}

// findLine returns the index of the first line of s equal to want (trailing
// "\r" and spaces ignored), or -1.
func findLine(s, want string) int {
	for i := 0; i < len(s); {
		line, next := lineAt(s, i)
		if trimLine(line) == want {
			return i
		}
		i = next
	}
	return -1
}

// lineAt returns the line starting at i (without its newline) and the index
// just past its newline (or len(s)).
func lineAt(s string, i int) (string, int) {
	j := strings.IndexByte(s[i:], '\n')
	if j < 0 {
		return s[i:], len(s)
	}
	return s[i : i+j], i + j + 1
}

func trimLine(l string) string {
	return strings.TrimRight(l, " \t\r")
}
