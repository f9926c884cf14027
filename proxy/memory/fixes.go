package memory

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/store"
)

// Learned fixes: what ended a repeated failure (store.Fix), keyed by the
// failure they fixed, and found again for a failure of any conversation of
// the project.

// Caps on the stored text of a fix (bytes, after redaction).
const (
	maxFixFailure     = maxIncidentMessage // the failure's example, as an incident's message
	MaxFixCall        = 2000               // the successful call's arguments
	maxFixExplanation = 1000               // the assistant's note with that call
)

// fixKey is the dedupe key of the fix of a failure of tool: per named
// pattern ("p:TOOL|PATTERN") when the failure matched one, else per
// fingerprint of its message ("f:TOOL|FINGERPRINT"). A failure that
// matched no pattern is never keyed on guard.RepeatedPattern alone, which
// would lump every unknown error of the tool together.
func fixKey(pattern, fingerprint, tool string) string {
	if pattern != "" && pattern != guard.RepeatedPattern {
		return "p:" + tool + "|" + pattern
	}
	return "f:" + tool + "|" + fingerprint
}

// MatchFixes returns the fixes that apply to a failure of the given
// pattern and fingerprint: first those learned for the same fingerprint
// (when fingerprint is not empty), then those learned for the same named
// pattern (never on guard.RepeatedPattern alone), each group most recently
// updated first (the same Updated: higher ID first), each fix once. A
// fix a person marked wrong (store.Fix.Wrong) never applies.
func MatchFixes(fixes []store.Fix, pattern, fingerprint string) []store.Fix {
	named := pattern != "" && pattern != guard.RepeatedPattern
	var byFP, byPattern []store.Fix
	seen := make(map[string]bool)
	for _, f := range fixes {
		if seen[f.ID] || f.Wrong != nil {
			continue
		}
		seen[f.ID] = true
		switch {
		case fingerprint != "" && f.Fingerprint == fingerprint:
			byFP = append(byFP, f)
		case named && f.Pattern == pattern:
			byPattern = append(byPattern, f)
		}
	}
	slices.SortStableFunc(byFP, newestFirst)
	slices.SortStableFunc(byPattern, newestFirst)
	return slices.Concat(byFP, byPattern)
}

// newestFirst orders fixes most recently updated first (the same
// Updated: higher ID first).
func newestFirst(a, b store.Fix) int {
	if c := b.Updated.Compare(a.Updated); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

// minErrorTemplate is the shortest error template matched inside a fix's
// failure: shorter ones ("Error: <STR>") say too little.
const minErrorTemplate = 16

// Fix matches, from the best: the same error, the error found inside the
// failure a fix ended, the same guard pattern.
const (
	MatchFingerprint = "fingerprint"
	MatchError       = "error"
	MatchPattern     = "pattern"
)

// FixMatch is a fix that applies to an error, and how.
type FixMatch struct {
	store.Fix
	Match string // MatchFingerprint, MatchError or MatchPattern
}

// MatchFixesOf returns the fixes that apply to an error as a person or an
// agent gives it, which need not be worded as the proxy stored it: the
// same fingerprint first, then the fixes whose failure holds the error
// (its template: numbers, paths and ids masked), so that the plain error
// line finds a fix learned from an agent's wrapped output ("Bash: Exit
// code 1" and then the error); then those of the same named pattern.
// Each group most recently updated first, each fix once; a fix marked
// wrong never applies.
func MatchFixesOf(fixes []store.Fix, pattern, fingerprint, text string) []FixMatch {
	var out []FixMatch
	taken := map[string]bool{}
	for _, f := range MatchFixes(fixes, "", fingerprint) {
		out, taken[f.ID] = append(out, FixMatch{f, MatchFingerprint}), true
	}
	if tpl := strings.TrimSpace(guard.Template(text)); len(tpl) >= minErrorTemplate {
		var inside []store.Fix
		for _, f := range fixes {
			if !taken[f.ID] && f.Wrong == nil && strings.Contains(guard.Template(f.Failure), tpl) {
				inside = append(inside, f)
			}
		}
		slices.SortStableFunc(inside, newestFirst)
		for _, f := range inside {
			if !taken[f.ID] {
				out, taken[f.ID] = append(out, FixMatch{f, MatchError}), true
			}
		}
	}
	for _, f := range MatchFixes(fixes, pattern, "") {
		if !taken[f.ID] {
			out, taken[f.ID] = append(out, FixMatch{f, MatchPattern}), true
		}
	}
	return out
}

// PrepareFix makes f ready to store: its failure, call and explanation
// redacted and capped; when not set, its Pattern classified from the
// failure as a tool error (guard.RepeatedPattern when no pattern
// matches), its Fingerprint that of the failure as stored (as an
// incident's), and its Key derived by fixKey.
func (m *Memory) PrepareFix(f *store.Fix) {
	f.Failure = redactCapped(f.Failure, maxFixFailure)
	f.Call = redactCapped(f.Call, MaxFixCall)
	f.Explanation = redactCapped(f.Explanation, maxFixExplanation)
	if f.Pattern == "" {
		f.Pattern = guard.RepeatedPattern
		if label, ok := m.Guard().Classify(store.TypeToolError, 0, f.Failure); ok {
			f.Pattern = label
		}
	}
	if f.Fingerprint == "" && f.Failure != "" {
		f.Fingerprint = guard.Fingerprint(f.Failure)
	}
	if f.Key == "" {
		f.Key = fixKey(f.Pattern, f.Fingerprint, f.Tool)
	}
}

// redactCapped returns s with its secrets redacted, cut to at most max
// bytes on a rune boundary (an ellipsis marks the cut), as valid UTF-8.
func redactCapped(s string, max int) string {
	s = guard.Redact(s)
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// StoredMessage is what an incident stores of a failure's message: redacted,
// capped and valid UTF-8; its fingerprint (guard.Fingerprint) is the one the
// failure's incidents and fixes get.
func StoredMessage(message string) string { return redactCapped(message, maxIncidentMessage) }
