// Package backend holds what the store's backends (store/bolt,
// store/postgres) do alike around their own database work: validating
// records (store.ErrInvalid), cleaning their text and the names queries
// give, applying the list limits, preparing batches, ordering incident
// groups. It is not part of the store's contract; a change here changes
// both backends at once.
//
// It imports store and store/internal/stored, and must not import bbolt,
// pgx nor any other scarproxy package.
package backend

import (
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/internal/stored"
)

// Defaults of the limits both backends apply (the cap is store.MaxLimit).
const (
	defaultIncidentLimit = 100  // IncidentQuery.Limit when 0
	defaultChangeLimit   = 1000 // SolutionChanges' limit when <= 0
)

// IncidentLimit applies IncidentQuery.Limit's default and cap.
func IncidentLimit(n int) int {
	switch {
	case n <= 0:
		return defaultIncidentLimit
	case n > store.MaxLimit:
		return store.MaxLimit
	}
	return n
}

// ChangeLimit applies SolutionChanges' default and cap.
func ChangeLimit(n int) int {
	switch {
	case n <= 0:
		return defaultChangeLimit
	case n > store.MaxLimit:
		return store.MaxLimit
	}
	return n
}

// validSolution returns an error wrapping store.ErrInvalid for a solution
// missing a required field or whose confidence is NaN or infinite.
func validSolution(s *store.Solution) error {
	switch {
	case s == nil:
		return fmt.Errorf("%w: nil solution", store.ErrInvalid)
	case s.Workspace == "":
		return fmt.Errorf("%w: solution without workspace", store.ErrInvalid)
	case s.Key == "":
		return fmt.Errorf("%w: solution without key", store.ErrInvalid)
	case s.Goal == "":
		return fmt.Errorf("%w: solution without goal", store.ErrInvalid)
	case math.IsNaN(s.Confidence) || math.IsInf(s.Confidence, 0):
		return fmt.Errorf("%w: solution confidence is not a number", store.ErrInvalid)
	}
	return nil
}

// PrepareEmbedding returns the names and the embedding SetSolutionEmbedding
// stores: workspace, id and goal cleaned, the vector copied. It returns an
// error wrapping store.ErrInvalid for an embedding without model or
// values, with more than store.MaxEmbeddingDims values, or with a NaN or
// infinite one.
func PrepareEmbedding(workspace, id, goal string, e store.Embedding) (string, string, string, store.Embedding, error) {
	switch {
	case e.Model == "":
		return "", "", "", e, fmt.Errorf("%w: embedding without model", store.ErrInvalid)
	case len(e.Vector) == 0:
		return "", "", "", e, fmt.Errorf("%w: embedding without values", store.ErrInvalid)
	case len(e.Vector) > store.MaxEmbeddingDims:
		return "", "", "", e, fmt.Errorf("%w: embedding of %d dimensions, more than %d", store.ErrInvalid, len(e.Vector), store.MaxEmbeddingDims)
	}
	for _, v := range e.Vector {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			return "", "", "", e, fmt.Errorf("%w: embedding value is not a number", store.ErrInvalid)
		}
	}
	e = store.Embedding{Model: stored.Text(e.Model), Vector: slices.Clone(e.Vector)}
	return stored.Text(workspace), stored.Text(id), stored.Text(goal), e, nil
}

// FixLimit applies FixQuery.Limit's default and cap (those of incidents).
func FixLimit(n int) int { return IncidentLimit(n) }

// validFix returns an error wrapping store.ErrInvalid for a fix missing a
// required field or with a negative failure count.
func validFix(f *store.Fix) error {
	switch {
	case f == nil:
		return fmt.Errorf("%w: nil fix", store.ErrInvalid)
	case f.Workspace == "":
		return fmt.Errorf("%w: fix without workspace", store.ErrInvalid)
	case f.Project == "":
		return fmt.Errorf("%w: fix without project", store.ErrInvalid)
	case f.Key == "":
		return fmt.Errorf("%w: fix without key", store.ErrInvalid)
	case f.Tool == "":
		return fmt.Errorf("%w: fix without tool", store.ErrInvalid)
	case f.Failures < 0:
		return fmt.Errorf("%w: fix with a negative failure count", store.ErrInvalid)
	}
	return nil
}

// cleanSolution cleans every text field of s, and gives it its own copy
// of its Wrong mark in stored form.
func cleanSolution(s *store.Solution) {
	for _, f := range []*string{&s.ID, &s.Workspace, &s.Project, &s.Key, &s.Goal, &s.Approach,
		&s.Outcome, &s.Source} {
		*f = stored.Text(*f)
	}
	s.Wrong = PrepareWrong(s.Wrong)
}

// cleanFix cleans every text field of f, and gives it its own copy of its
// Wrong mark in stored form.
func cleanFix(f *store.Fix) {
	for _, p := range []*string{&f.ID, &f.Workspace, &f.Project, &f.Key, &f.Pattern, &f.Fingerprint,
		&f.Tool, &f.Failure, &f.Call, &f.Explanation, &f.Session} {
		*p = stored.Text(*p)
	}
	f.Wrong = PrepareWrong(f.Wrong)
}

// MaxWrongNote is the longest note of a Wrong mark the backends keep, in
// bytes; a longer one is cut at a character boundary.
const MaxWrongNote = 1000

// PrepareWrong returns a copy of w in the form both backends store it
// (time in stored form, note cleaned and capped), or nil for nil.
func PrepareWrong(w *store.Wrong) *store.Wrong {
	if w == nil {
		return nil
	}
	note := stored.Text(w.Note)
	if len(note) > MaxWrongNote {
		cut := MaxWrongNote
		for cut > 0 && !utf8.RuneStart(note[cut]) {
			cut--
		}
		note = note[:cut]
	}
	return &store.Wrong{At: stored.Time(w.At), Note: note}
}

// KeepFixMark gives rec, a fix about to replace old, old's Wrong mark
// when rec carries none and its call is old's: a mark judges a call, and
// stays until another call is learned for the same failure.
func KeepFixMark(rec, old *store.Fix) {
	if rec.Wrong == nil && old.Wrong != nil && rec.Call == old.Call {
		rec.Wrong = PrepareWrong(old.Wrong)
	}
}

// KeepSolutionMark gives rec, a solution about to replace old, old's
// Wrong mark when rec carries none and its approach is old's.
func KeepSolutionMark(rec, old *store.Solution) {
	if rec.Wrong == nil && old.Wrong != nil && rec.Approach == old.Approach {
		rec.Wrong = PrepareWrong(old.Wrong)
	}
}

// PrepareSolutions returns copies of sols in the form PutSolutions stores
// them, their text cleaned. It returns an error wrapping store.ErrInvalid,
// and no copies, when one of them is not valid (see validSolution).
func PrepareSolutions(sols []*store.Solution) ([]store.Solution, error) {
	recs := make([]store.Solution, len(sols))
	for i, s := range sols {
		if err := validSolution(s); err != nil {
			return nil, err
		}
		recs[i] = *s
		recs[i].Embedding = nil // only SetSolutionEmbedding sets it
		cleanSolution(&recs[i])
	}
	return recs, nil
}

// PrepareFix returns a copy of f with its text cleaned, the record PutFix
// stores. It returns an error wrapping store.ErrInvalid when f misses a
// required field.
func PrepareFix(f *store.Fix) (store.Fix, error) {
	if err := validFix(f); err != nil {
		return store.Fix{}, err
	}
	rec := *f
	cleanFix(&rec)
	return rec, nil
}

// PrepareIncident returns a copy of inc prepared as store.PrepareIncident
// prepares it, timed by now when inc has no Time.
func PrepareIncident(inc *store.Incident, now func() time.Time) (store.Incident, error) {
	if inc == nil {
		return store.Incident{}, store.PrepareIncident(nil, time.Time{})
	}
	rec := *inc
	var t time.Time
	if rec.Time.IsZero() {
		t = now()
	}
	err := store.PrepareIncident(&rec, t)
	return rec, err
}
