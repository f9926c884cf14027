package recall

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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

// forbidden are the marker texts stored text may never carry into a block
// (the recall markers and the guard block's marker), matched ignoring ASCII
// case.
var forbidden = []string{"### end recall", "### recall", "### !!!"}

// Block renders matches as the recall block injected into the system
// message, or "" when there are none. With several matches the block holds
// each match's lines, separated by a blank line: five, or six when the
// match says why it was recalled (a "Why:" line after "Similarity:", naming
// the action and the object the goals share; see [Reason]). The block ends with a
// newline and one blank line, so a caller prepends it to the system message
// as is; [Strip] removes both.
//
// Stored text is sanitised (one line, control characters and block markers
// removed, capped: goal 300, approach 600, outcome 300 runes), so it cannot
// end the block early or add lines. Percentages are rounded half away from
// zero: the same matches always give the same bytes.
func Block(matches []Match) string {
	if len(matches) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(BlockStart)
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
		b.WriteString(sanitize(m.Solution.Goal, maxBlockGoal))
		b.WriteString("\nHow it was solved: ")
		b.WriteString(sanitize(m.Solution.Approach, maxBlockApproach))
		b.WriteString("\nOutcome: ")
		b.WriteString(sanitize(m.Solution.Outcome, maxBlockOutcome))
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
	if a := sanitize(r.Action, maxBlockWhy); a != "" {
		parts = append(parts, `same action "`+strings.ReplaceAll(a, `"`, "")+`"`)
	}
	if o := sanitize(r.Object, maxBlockWhy); o != "" {
		parts = append(parts, `same object "`+strings.ReplaceAll(o, `"`, "")+`"`)
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

// sanitize makes stored text safe to place on one line of a block: invalid
// UTF-8, control and format characters are removed (line breaks become
// spaces), block markers are removed, runs of '#' shrink to one, whitespace
// is folded and the result capped at maxRunes runes (ending in "…" when cut).
func sanitize(s string, maxRunes int) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\u2028' || r == '\u2029' || unicode.IsControl(r):
			return ' '
		case unicode.Is(unicode.Cf, r):
			return -1
		}
		return r
	}, s)
	for {
		i, n := findForbidden(s)
		if i < 0 {
			break
		}
		s = s[:i] + " " + s[i+n:]
	}
	if strings.Contains(s, "##") {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] == '#' && i > 0 && s[i-1] == '#' {
				continue
			}
			b.WriteByte(s[i])
		}
		s = b.String()
	}
	s = strings.Join(strings.Fields(s), " ")
	return capRunes(s, maxRunes)
}

// findForbidden returns the index and length of the first marker in s,
// ignoring ASCII case, or -1.
func findForbidden(s string) (int, int) {
	low := asciiLower(s)
	best, n := -1, 0
	for _, f := range forbidden {
		if i := strings.Index(low, f); i >= 0 && (best < 0 || i < best) {
			best, n = i, len(f)
		}
	}
	return best, n
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
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
