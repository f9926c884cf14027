package guard

import (
	"slices"
	"strings"
)

// Patterns returns the enabled patterns in the order the Guard tries them
// (configured new patterns first, then the built-ins, overrides applied),
// as configured: regular expressions without the case-insensitive flag the
// Guard adds. The returned slice is a copy.
func (g *Guard) Patterns() []PatternConfig {
	out := make([]PatternConfig, len(g.patterns))
	for i, p := range g.patterns {
		out[i] = PatternConfig{
			Name:        p.name,
			Fix:         p.fix,
			StatusCodes: slices.Clone(p.statuses),
			Types:       slices.Clone(p.types),
		}
		if p.re != nil {
			out[i].Regex = strings.TrimPrefix(p.re.whole.String(), "(?i)")
		}
		if p.exclude != nil {
			out[i].Exclude = strings.TrimPrefix(p.exclude.String(), "(?i)")
		}
	}
	return out
}

// IsBuiltin reports whether name (compared case-insensitively) is the
// name of a built-in pattern.
func IsBuiltin(name string) bool { return builtinIndex(name) >= 0 }
