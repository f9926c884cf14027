package recall

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// A quality set (testdata/quality/*.json) holds stored solutions and
// queries labelled "reworded" (the same task in other words: its solution
// must come first), "confusable" (shares words with a solution but is
// another task) or "unrelated"; confusable and unrelated queries must
// recall nothing.
type qualitySet struct {
	Solutions []struct{ ID, Goal, Approach string } `json:"solutions"`
	Queries   []struct {
		Q, Kind, ID string
	} `json:"queries"`
}

const (
	kindReworded   = "reworded"
	kindConfusable = "confusable"
	kindUnrelated  = "unrelated"
)

func loadQualitySet(t testing.TB, name string) (*qualitySet, *Index) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "quality", name))
	if err != nil {
		t.Fatal(err)
	}
	var set qualitySet
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ix := NewIndex()
	ids := map[string]bool{}
	for i := range set.Solutions {
		id := set.Solutions[i].ID
		if ids[id] {
			t.Fatalf("%s: solution %s twice", name, id)
		}
		ids[id] = true
		ix.Put(set.solution(i))
	}
	for _, q := range set.Queries {
		switch q.Kind {
		case kindReworded, kindConfusable:
			if !ids[q.ID] {
				t.Fatalf("%s: query %q names unknown solution %q", name, q.Q, q.ID)
			}
		case kindUnrelated:
		default:
			t.Fatalf("%s: query %q of unknown kind %q", name, q.Q, q.Kind)
		}
	}
	return &set, ix
}

// qualityFigures are the counts of one run of a set at one threshold.
type qualityFigures struct {
	reworded, found         int // reworded queries; their solution first
	confusable, confRejects int // confusable queries; recalled nothing
	unrelated, unrelRejects int // unrelated queries; recalled nothing
	misses, falses          []string
}

func (f qualityFigures) negatives() int    { return f.confusable + f.unrelated }
func (f qualityFigures) falseRecalls() int { return f.negatives() - f.confRejects - f.unrelRejects }

func (f qualityFigures) String() string {
	return fmt.Sprintf("reworded found %d/%d, same words different task rejected %d/%d, unrelated rejected %d/%d, false recalls %d of %d",
		f.found, f.reworded, f.confRejects, f.confusable, f.unrelRejects, f.unrelated, f.falseRecalls(), f.negatives())
}

// solution is the set's i-th solution as the store holds it, in
// workspace "w".
func (set *qualitySet) solution(i int) store.Solution {
	s := set.Solutions[i]
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	return store.Solution{
		ID: s.ID, Workspace: "w", Key: GoalKey(s.Goal), Goal: s.Goal, Approach: s.Approach,
		Outcome: "Done.", Confidence: 0.9, Source: store.SourceAPI, Verified: true, Created: base, Updated: base,
	}
}

func runQualitySet(set *qualitySet, ix *Index, minSim float64) qualityFigures {
	return scoreQueries(set, func(goal string) []Match {
		return ix.Search(Query{Workspace: "w", Goal: goal, K: 1, MinSimilarity: minSim})
	})
}

// scoreQueries counts what search, which returns the matches of a query's
// text, best first, finds for each query of set.
func scoreQueries(set *qualitySet, search func(goal string) []Match) qualityFigures {
	var f qualityFigures
	for _, q := range set.Queries {
		ms := search(q.Q)
		got := "none"
		if len(ms) > 0 {
			got = fmt.Sprintf("%s %.2f", ms[0].Solution.ID, ms[0].Similarity)
		}
		switch q.Kind {
		case kindReworded:
			f.reworded++
			if len(ms) > 0 && ms[0].Solution.ID == q.ID {
				f.found++
			} else {
				f.misses = append(f.misses, fmt.Sprintf("%q (%s) -> %s", q.Q, q.ID, got))
			}
		case kindConfusable, kindUnrelated:
			if q.Kind == kindConfusable {
				f.confusable++
			} else {
				f.unrelated++
			}
			if len(ms) == 0 {
				if q.Kind == kindConfusable {
					f.confRejects++
				} else {
					f.unrelRejects++
				}
			} else {
				f.falses = append(f.falses, fmt.Sprintf("%s %q -> %s", q.Kind, q.Q, got))
			}
		}
	}
	return f
}

// meetsBar reports whether figures meet issue 28's bar: false recalls for
// at most 1 in 20 of the queries that should recall nothing, at least half
// of the reworded tasks found.
func (f qualityFigures) meetsBar() bool {
	return f.falseRecalls()*20 <= f.negatives() && f.found*2 >= f.reworded
}

// measureSet runs a set at the default threshold and logs its figures,
// its misses and its false recalls.
func measureSet(t *testing.T, file, label string) qualityFigures {
	t.Helper()
	set, ix := loadQualitySet(t, file)
	f := runQualitySet(set, ix, DefaultMinSimilarity)
	t.Logf("%s at %.2f: %s", label, DefaultMinSimilarity, f)
	for _, m := range f.misses {
		t.Logf("missed: %s", m)
	}
	for _, m := range f.falses {
		t.Logf("false recall: %s", m)
	}
	return f
}

// checkBar fails t when f is below issue 28's bar.
func checkBar(t *testing.T, label string, f qualityFigures) {
	t.Helper()
	if !f.meetsBar() {
		t.Errorf("%s figures below the bar (false recalls <= 1 in 20, reworded found >= half): %s", label, f)
	}
}

// TestQualityHeldOut reports and checks the held-out figures at the
// default threshold. The held-out set is never tuned on: when it fails,
// fix the rules on the tune set and measure again. Its last two false
// recalls (a deploy that succeeds, a webhook receiver) showed that the
// outcome and the direction of what a task acts on were missing from the
// parts of a task; they were added since: it is held out from the
// vocabulary, not from those two rules.
func TestQualityHeldOut(t *testing.T) {
	checkBar(t, "held-out", measureSet(t, "heldout.json", "held-out"))
}

// TestQualityTune reports the tune set's figures at thresholds around the
// default: the threshold is chosen on this set.
func TestQualityTune(t *testing.T) {
	set, ix := loadQualitySet(t, "tune.json")
	for _, th := range []float64{0.25, 0.3, 0.35, 0.4, 0.45, 0.5} {
		t.Logf("tune at %.2f: %s", th, runQualitySet(set, ix, th))
	}
	checkBar(t, "tune", measureSet(t, "tune.json", "tune"))
}

// TestQualityIssueTitles reports the second held-out set, made of issue
// and pull request titles of other repositories, and checks that at least
// half of its reworded tasks are found. It does not meet the false-recall
// bar yet (see BENCHMARKS.md: a cache in a tool the vocabulary does not
// know, a title that shares "endpoint" and names no action), and two rules
// were changed after its first measurement (substitutions; a light verb's
// own word): it is held out from the vocabulary, no longer from those.
func TestQualityIssueTitles(t *testing.T) {
	f := measureSet(t, "heldout-issues.json", "issue titles")
	if f.found*2 < f.reworded {
		t.Errorf("fewer than half of the reworded tasks found: %s", f)
	}
}

// TestQualityHeldOut3 reports and checks the third held-out set, written
// from question, issue and CHANGELOG titles before its author read the
// rules (testdata/quality/README.md). Its first measure was far below the
// bar: reworded found 19/48, same words different task rejected 42/59,
// unrelated rejected 22/22, false recalls 17 of 81. Rules were then
// changed from the misses of every set, this one included (the outcome,
// the direction of what a task acts on, the source of a conversion, tools
// that imply tools, more tool categories and named actions, acronyms and
// other words of the vocabulary): it is tune data for those since, and its
// figure after them (25/48 found, 3 of 81 false recalls) is no held-out
// figure. The fifth round's rules (qualifiers of the object, conflicting
// actions, new tool categories) were written from the misses of this set
// and the fourth: it is tune data for them too (25/48, 3 of 81 after),
// and for the sixth round's (thing.go; 25/48, 3 of 81 after). Before the
// tenth round it gave 25/48 found and 0 of 81 false recalls; WordNet's
// equivalences (wordnet.go) found one more, a store for a shop (26/48, 0
// of 81).
func TestQualityHeldOut3(t *testing.T) {
	checkBar(t, "third set", measureSet(t, "heldout3.json", "third set"))
}

// TestQualityHeldOut4 reports and checks the fourth held-out set, written
// from issue and pull request titles and system and database
// administration pages before its author read the rules
// (testdata/quality/README.md). Its first measure, before any rule was
// changed from it, was below the bar: reworded found 20/43, same words
// different task rejected 44/62, unrelated rejected 22/22, false recalls
// 18 of 84 (another tool or platform for the same action and object,
// another qualifier of the object, the opposite action such as creating
// what the solution refreshes or rolling back what it applies). The fifth
// round's rules (qualifiers.go, conflicting actions, tool categories for
// boards, ML frameworks, model formats, secret stores and service
// managers, the vocabulary of its misses) were written from its misses
// and the third set's: it is tune data since, and its figure after them
// (31/43 found, 4 of 84 false recalls) is no held-out figure. The sixth
// round's rules were checked on it too: 29/43 found, 3 of 84 after them
// (a reduced power draw against a board put to sleep, failing jobs sent
// to Sentry against failures reported there: a named action against a
// stored goal led by a verb the vocabulary does not name).
func TestQualityHeldOut4(t *testing.T) {
	f := measureSet(t, "heldout4.json", "fourth set")
	if f.reworded != 43 || f.negatives() != 84 {
		t.Fatalf("the set changed (%d reworded, %d negatives): measure it again and restate its figures", f.reworded, f.negatives())
	}
	checkBar(t, "fourth set", f)
}

// measureBounded measures a set of the given size and fails when it finds
// fewer rewordings than found or makes more false recalls than falses:
// the figures it was last stated at (its first measure, or the figure
// after the round that tuned on it).
func measureBounded(t *testing.T, file, label string, reworded, negatives, found, falses int) {
	t.Helper()
	f := measureSet(t, file, label)
	if f.reworded != reworded || f.negatives() != negatives {
		t.Fatalf("the set changed (%d reworded, %d negatives): measure it again and restate its figures", f.reworded, f.negatives())
	}
	if f.found < found || f.falseRecalls() > falses {
		t.Errorf("%s worse than its stated figures (%d found, %d false recalls): %s", label, found, falses, f)
	}
}

// TestQualityHeldOut5 reports the fifth set, written from CHANGELOG
// entries, issue and pull request titles and tool documentation without
// reading the rules, and committed before any measure of it
// (testdata/quality/README.md); the fifth round's rules were written
// without seeing it. Its one measure as a held-out set, the first clean
// figure since the first held-out set, was far below the bar: reworded
// found 18/53, same words different task rejected 71/102, unrelated
// rejected 22/22, false recalls 31 of 124. Most false recalls shared the
// platform and the kind of work and differed in the thing done ("add
// gamepad support to the Unity game" recalled the Godot game's, Dependabot
// recalled Renovate). The sixth round's rules (thing.go: names, the
// leading phrases; a named action against a goal that names none; the
// vocabulary, directions and qualifiers of its misses) were written from
// its misses: it is tune data since, like the third and fourth sets, and
// its figure after them (18/53 found, 9 of 124 false recalls) is no
// held-out figure. The seventh round's rules found four more of its
// rewordings (22/53, 9 of 124 false recalls), the eighth round's rule
// (otherFeature) two fewer false recalls (22/53, 7 of 124), the ninth
// round's (acronyms of a stored goal, "instead of", a task done on a
// failure, another way to fill one slot) one fewer (22/53, 6 of 124). It
// fails when the figures get worse than that.
func TestQualityHeldOut5(t *testing.T) {
	measureBounded(t, "heldout5.json", "fifth set", 53, 124, 22, 6)
}

// TestQualityHeldOut6 reports the sixth set, written from issue and pull
// request titles and CHANGELOG entries of fields the other sets barely
// touch, without reading the rules, while the sixth round changed them,
// and committed before any measure of it (testdata/quality/README.md). Its
// one measure as a held-out set, after the sixth round: reworded found
// 28/96, same words different task rejected 152/192, unrelated rejected
// 28/28, false recalls 40 of 220 (18%), below the bar on both halves. The
// rules before the sixth round, run on it at the same time: 31/96 found,
// 69 of 220 false recalls. The seventh round's rules (spelling.go; the
// acronyms, nicknames and tool kinds of vocab.go; a tool against a name,
// versions, moving and exporting) were written from its misses and false
// recalls: it is tune data since, like the third, fourth and fifth sets,
// and its figure after them (34/96 found, 21 of 220 false recalls) is no
// held-out figure. The eighth round's rules (otherFeature, otherPlace,
// question words) left 34/96 found, 16 of 220 false recalls; the ninth
// round's 34/96, 13 of 220; the tenth round's (WordNet's equivalences,
// "shops" for a "store") 35/96, 13 of 220. It fails when the figures get
// worse than that.
func TestQualityHeldOut6(t *testing.T) {
	measureBounded(t, "heldout6.json", "sixth set", 96, 220, 35, 13)
}

// TestQualityHeldOut7 reports the seventh set, written from issue and pull
// request titles, manual pages and how-to titles of fields no other set
// touches (accounting, storefronts, mail deliverability, privacy, VPNs,
// printing, IoT fleets...), without reading the rules, while the seventh
// round changed them, and committed before any measure of it
// (testdata/quality/README.md). Its one measure as a held-out set, after
// the seventh round: reworded found 27/98, same words different task
// rejected 127/151, unrelated rejected 28/28, false recalls 24 of 179
// (13%), below the bar on both halves. Run on it at the same time, the
// rules before the seventh round gave the same figures, and the rules
// before the sixth 29/98 found and 36 of 179 false recalls: the sixth
// round (the thing done against the context) carried to it, the seventh
// (the sixth set's vocabulary and kinds) did not. The eighth round's
// rules (otherFeature and otherPlace in thing.go, question words) were
// chosen on it and the other tune sets: it is tune data since, and its
// figure after them (27/98 found, 20 of 179 false recalls) is no held-out
// figure. The ninth round's rules left 27/98 found, 15 of 179 false
// recalls. It fails when the figures get worse than that.
func TestQualityHeldOut7(t *testing.T) {
	measureBounded(t, "heldout7.json", "seventh set", 98, 179, 27, 15)
}

// TestQualityHeldOut8 reports the eighth set, written from issue and pull
// request titles of fields no other set touches (audio plugins, CAD and 3D
// printing, office add-ins, GIS, civic and legal tech, healthcare
// interoperability, education platforms, game engines, vehicle buses...),
// without reading the rules, while the eighth round changed them, and
// committed before any measure of it (testdata/quality/README.md). Its one
// measure, after the eighth round: reworded found 12/91, same words
// different task rejected 129/148, unrelated rejected 28/28, false
// recalls 19 of 176 (11%). Run on it at the same time, the rules before
// the eighth round gave the same figures, and the rules before the sixth
// 13/91 found and 39 of 176 false recalls: as on the seventh set, the
// sixth round carried and the later ones did not. The ninth round's rules
// (acronyms of a stored goal, "instead of", a task done on a failure,
// another way to fill one slot; thing.go) were chosen on the false
// recalls of this set and the sixth and seventh together: it is tune data
// since, like the third to seventh, and its figure after them (12/91
// found, 11 of 176 false recalls) is no held-out figure. It fails when
// the figures get worse than that.
func TestQualityHeldOut8(t *testing.T) {
	measureBounded(t, "heldout8.json", "eighth set", 91, 176, 12, 11)
}

// TestQualityHeldOut9 reports the ninth set, written from commit messages
// and issue titles of fields no other set touches (package managers,
// algorithmic trading, eBPF tracing, EV charging, logistics, telephony,
// fitness wearables, library catalogues, hotel booking), without reading
// the rules, while the ninth round changed them, and committed before any
// measure of it (testdata/quality/README.md). Its one measure as a
// held-out set, after the ninth round: reworded found 17/96, same words
// different task rejected 113/145, unrelated rejected 28/28, false
// recalls 32 of 173 (18%). Run on it at the same time, the rules before
// the ninth round gave 17/96 found and 38 of 173 false recalls, and the
// rules before the sixth 18/96 and 61 of 173: the sixth and the ninth
// rounds carried to it, both on false recalls. The tenth round's
// vocabulary (wordnet.go) was chosen on it and the other tune sets
// together: it is tune data since, like the third to eighth, and fails
// when its figures get worse than they were stated after that round.
func TestQualityHeldOut9(t *testing.T) {
	measureBounded(t, "heldout9.json", "ninth set", 96, 173, 17, 32)
}

// TestQualityHeldOut10 reports the tenth set, written from issue and pull
// request titles and documentation pages of fields no other set touches
// (ad tech, feature flags, CRM integrations, helpdesks, payroll, event
// ticketing, photo libraries, cheminformatics, weather data, real-estate
// listings, container registries, farm management), without reading the
// rules, while the tenth round changed them, and committed before any
// measure of it (testdata/quality/README.md). Its one measure, after the
// tenth round: reworded found 15/96, same words different task rejected
// 121/150, unrelated rejected 28/28, false recalls 29 of 178 (16%). Run
// on it at the same time, the ninth round's rules gave the same figures
// (WordNet's equivalences found nothing more), the eighth round's 15/96
// and 34 of 178, and the rules before the sixth 19/96 and 51 of 178. It
// is report-only, and fails when its figures get worse than that measure.
func TestQualityHeldOut10(t *testing.T) {
	measureBounded(t, "heldout10.json", "tenth set", 96, 178, 15, 29)
}

// TestQualityHeldOut11 reports the eleventh set, written without reading
// the rules from GitHub issue and pull request titles of fields no other
// set named (testdata/quality/README.md), committed before any measure.
// Its one measure, with the tenth round's rules: reworded found 21/72,
// same words different task rejected 85/108, unrelated rejected 20/20,
// false recalls 23 of 128. It is report-only, and fails when its figures
// get worse than that measure.
func TestQualityHeldOut11(t *testing.T) {
	measureBounded(t, "heldout11.json", "eleventh set", 72, 128, 21, 23)
}

// tuneSets are the sets the rules and the threshold are chosen on: the
// tune set and the third to ninth sets, each tune data since rules were
// written from its misses or chosen on its figures.
var tuneSets = []string{"tune.json", "heldout3.json", "heldout4.json", "heldout5.json", "heldout6.json", "heldout7.json", "heldout8.json", "heldout9.json"}

// TestQualityTuneCurve reports the trade-off of the threshold on the tune
// sets together: rewordings found against false recalls at thresholds
// around the default (BENCHMARKS.md, "Recall quality"). It fails when the
// default finds fewer rewordings or makes more false recalls than after
// the tenth round, which added the ninth set to them and WordNet's
// equivalences (wordnet.go): 199 of 560 found, 80 false recalls of 1093
// (the rules before it: 197 and 80). Without the ninth set the
// ninth round left 180 of 464 found, 48 false recalls of 920 (the rules
// before it: 180 and 65); without the eighth, the eighth round left 168
// of 373 found, 46 false recalls of 744 (the rules before it: 169 and 60),
// the ninth 168 and 37.
func TestQualityTuneCurve(t *testing.T) {
	type loaded struct {
		set *qualitySet
		ix  *Index
	}
	var sets []loaded
	for _, name := range tuneSets {
		set, ix := loadQualitySet(t, name)
		sets = append(sets, loaded{set, ix})
	}
	sum := func(th float64) (found, reworded, falses, negatives int) {
		for _, l := range sets {
			f := runQualitySet(l.set, l.ix, th)
			found, reworded = found+f.found, reworded+f.reworded
			falses, negatives = falses+f.falseRecalls(), negatives+f.negatives()
		}
		return
	}
	for _, th := range []float64{0.25, 0.3, 0.33, 0.35, 0.36, 0.37, 0.38, 0.4, 0.45, 0.5, 0.55, 0.6} {
		found, reworded, falses, negatives := sum(th)
		t.Logf("tune sets at %.2f: reworded found %d/%d, false recalls %d of %d", th, found, reworded, falses, negatives)
	}
	found, reworded, falses, negatives := sum(DefaultMinSimilarity)
	if reworded != 560 || negatives != 1093 {
		t.Fatalf("the tune sets changed (%d reworded, %d negatives): measure them again and restate the figures", reworded, negatives)
	}
	const chosenFound, chosenFalses = 199, 80
	if found < chosenFound || falses > chosenFalses {
		t.Errorf("tune sets at the default %.2f: %d/%d found, %d false recalls; after the tenth round %d found, %d false recalls",
			DefaultMinSimilarity, found, reworded, falses, chosenFound, chosenFalses)
	}
}
