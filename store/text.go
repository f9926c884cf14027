package store

import (
	"strings"
	"unicode/utf8"
)

// cleanText returns s as both backends store it (see the package doc,
// # Text): U+0000 and each run of bytes that is not UTF-8 become U+FFFD.
func cleanText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// cleanIncident cleans every text field of inc.
func cleanIncident(inc *Incident) {
	for _, f := range []*string{&inc.ID, &inc.Workspace, &inc.Project, &inc.Session, &inc.Agent,
		&inc.Provider, &inc.Model, &inc.Type, &inc.Code, &inc.Message, &inc.Fingerprint} {
		*f = cleanText(*f)
	}
}

// cleanSolution cleans every text field of s.
func cleanSolution(s *Solution) {
	for _, f := range []*string{&s.ID, &s.Workspace, &s.Project, &s.Key, &s.Goal, &s.Approach,
		&s.Outcome, &s.Source} {
		*f = cleanText(*f)
	}
}

// cleanFix cleans every text field of f.
func cleanFix(f *Fix) {
	for _, p := range []*string{&f.ID, &f.Workspace, &f.Project, &f.Key, &f.Pattern, &f.Fingerprint,
		&f.Tool, &f.Failure, &f.Call, &f.Explanation, &f.Session} {
		*p = cleanText(*p)
	}
}
