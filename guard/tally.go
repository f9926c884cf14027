package guard

import (
	"cmp"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/scarproxy/scarproxy/guard/quoted"
	"github.com/scarproxy/scarproxy/store"
)

// Tally counts incidents the way [Guard.Detect] groups them, one incident
// at a time: adding or removing one costs a classification (cached) and a
// few map operations, whatever the number counted. Its entries are those
// Detect returns for the incidents it counts, so a caller that follows a
// stream of incidents (a guard window gaining new failures and losing its
// oldest) keeps its guard up to date without running Detect over all of
// them again.
//
// A Tally keeps pointers to the incidents it counts (each group's newest
// gives the entry its example): they must not change while it counts
// them. It does not look at their time: the caller counts only incidents
// inside the window. A Tally is not safe for concurrent modification;
// one that is no longer modified may be read (Entries, Clone)
// concurrently.
type Tally struct {
	g        *Guard
	counts   []int                 // per pattern, failures in no provider's scope
	patTools map[int32][]toolCount // per pattern, the tools of its tool failures
	scoped   map[scopedPattern]int // per pattern and provider, provider failures
	groups   map[string]tallyGroup // per fingerprint (and provider), unmatched failures
	stale    int                   // groups whose newest member is unknown (Renew)
	shared   uint8                 // the fields (own*) still the base's (Derive): copied before t first changes them
}

// The fields of a Tally, as bits of Tally.shared.
const (
	ownCounts uint8 = 1 << iota
	ownPatTools
	ownScoped
	ownGroups
)

// own makes field f of t t's own before t changes it.
func (t *Tally) own(f uint8) {
	if t.shared&f == 0 {
		return
	}
	t.shared &^= f
	switch f {
	case ownCounts:
		t.counts = slices.Clone(t.counts)
	case ownPatTools:
		t.patTools = maps.Clone(t.patTools)
	case ownScoped:
		t.scoped = maps.Clone(t.scoped)
	case ownGroups:
		t.groups = maps.Clone(t.groups)
	}
}

// tallyGroup is one fingerprint group of a Tally. Its tools slice is never
// modified in place: clones share it.
type tallyGroup struct {
	count    int
	newest   *store.Incident // nil: unknown, after its newest was removed
	example  string          // of newest
	provider string
	fp       string
	tools    []toolCount
	renewing bool // its newest is being found again (Renew)
}

// toolCount is how many of a group's failures came from one tool.
type toolCount struct {
	name string
	n    int
}

// NewTally returns an empty Tally of g's patterns.
func (g *Guard) NewTally() *Tally {
	return &Tally{g: g, counts: make([]int, len(g.patterns))}
}

// Add counts inc, which must stay unchanged while it is counted.
// Incidents of type [store.TypeLoop] are not failures: they are ignored.
func (t *Tally) Add(inc *store.Incident) {
	if inc.Type != store.TypeLoop {
		t.add(inc, t.g.lookup(inc.Type, inc.StatusCode, inc.Message), ToolOf(inc), 1)
	}
}

// Remove stops counting inc, which was added before. When inc may have
// been its group's newest member, the group's example is unknown until
// [Tally.Renew].
func (t *Tally) Remove(inc *store.Incident) {
	if inc.Type != store.TypeLoop {
		t.add(inc, t.g.lookup(inc.Type, inc.StatusCode, inc.Message), ToolOf(inc), -1)
	}
}

// Class is an incident's classification for counting ([Guard.ClassOf]):
// a caller that tallies the same incidents again and again (a
// conversation's own failures, on each of its turns) keeps it beside the
// incident and adds the incident with [Tally.AddClassed], without
// classifying it again.
type Class struct {
	m    memo
	tool string
}

// ClassOf classifies inc for counting by a Tally of g.
func (g *Guard) ClassOf(inc *store.Incident) Class {
	if inc.Type == store.TypeLoop {
		return Class{}
	}
	return Class{m: g.lookup(inc.Type, inc.StatusCode, inc.Message), tool: ToolOf(inc)}
}

// Tool returns the tool of the classified incident ([ToolOf]).
func (c Class) Tool() string { return c.tool }

// AddClassed counts inc, of class c (from the Guard of t, for inc or an
// identical copy of it), as [Tally.Add] does.
func (t *Tally) AddClassed(inc *store.Incident, c Class) {
	if inc.Type != store.TypeLoop {
		t.add(inc, c.m, c.tool, 1)
	}
}

// Stale reports whether a removal left a group without a known newest
// member: [Tally.Renew] must run before [Tally.Entries].
func (t *Tally) Stale() bool { return t.stale > 0 }

// Renew finds the newest member of every stale group among counted,
// which yields every incident the Tally counts (in any order).
func (t *Tally) Renew(counted iter.Seq[*store.Incident]) {
	if t.stale == 0 {
		return
	}
	t.own(ownGroups)
	for inc := range counted {
		if inc.Type == store.TypeLoop {
			continue
		}
		m := t.g.lookup(inc.Type, inc.StatusCode, inc.Message)
		if m.pat >= 0 {
			continue
		}
		key, _ := groupKey(inc, m)
		gr, ok := t.groups[key]
		if !ok || gr.count == 0 {
			continue
		}
		if gr.newest == nil || gr.renewing && newer(inc, gr.newest) {
			if gr.newest == nil {
				t.stale--
			}
			gr.newest, gr.example, gr.renewing = inc, m.ex, true
			t.groups[key] = gr
		}
	}
	for k, gr := range t.groups {
		if gr.renewing {
			gr.renewing = false
			t.groups[k] = gr
		}
	}
}

// Clone returns a copy of t that changes independently of it.
func (t *Tally) Clone() *Tally {
	return &Tally{g: t.g, counts: slices.Clone(t.counts), patTools: maps.Clone(t.patTools),
		scoped: maps.Clone(t.scoped), groups: maps.Clone(t.groups), stale: t.stale}
}

// Derive returns a Tally that starts as t and changes independently of
// it, for a t that no longer changes (a window's, once published; readers
// may still read it): what the new Tally does not change it shares with
// t, and each part is copied when the new Tally first changes it. A
// window that follows another with one failure more copies the part that
// failure counts in, not every map (in a storm, the provider failures'
// few entries instead of every fingerprint group of the window).
func (t *Tally) Derive() *Tally {
	return &Tally{g: t.g, counts: t.counts, patTools: t.patTools, scoped: t.scoped, groups: t.groups, stale: t.stale,
		shared: ownCounts | ownPatTools | ownScoped | ownGroups}
}

// groupKey returns the fingerprint group an unmatched incident belongs to
// and the group's fingerprint ("" for failures without text).
func groupKey(inc *store.Incident, m memo) (key, fp string) {
	if inc.Message == "" {
		// Without text only the source tells empty failures apart.
		key = "empty:" + inc.Type + ":" + strconv.Itoa(inc.StatusCode)
	} else {
		fp = cmp.Or(inc.Fingerprint, m.fp)
		key = fp
	}
	if sc := scope(inc); sc != "" {
		key = sc + "\x00" + key
	}
	return key, fp
}

// add counts inc (classified as m, of tool) d more times, d being 1 or -1.
func (t *Tally) add(inc *store.Incident, m memo, tool string, d int) {
	sc := scope(inc)
	if m.pat >= 0 {
		if sc != "" {
			t.own(ownScoped)
			k := scopedPattern{int(m.pat), sc}
			if n := t.scoped[k] + d; n > 0 {
				if t.scoped == nil {
					t.scoped = make(map[scopedPattern]int)
				}
				t.scoped[k] = n
			} else {
				delete(t.scoped, k)
			}
			return
		}
		t.own(ownCounts)
		t.counts[m.pat] = max(0, t.counts[m.pat]+d)
		if tool != "" {
			t.own(ownPatTools)
			if t.patTools == nil {
				t.patTools = make(map[int32][]toolCount)
			}
			if tc := countTool(t.patTools[m.pat], tool, d); len(tc) > 0 {
				t.patTools[m.pat] = tc
			} else {
				delete(t.patTools, m.pat)
			}
		}
		return
	}
	key, fp := groupKey(inc, m)
	gr, ok := t.groups[key]
	t.own(ownGroups)
	switch {
	case d > 0 && !ok:
		gr = tallyGroup{newest: inc, example: m.ex, provider: sc, fp: fp}
	case d > 0:
		if gr.newest != nil && newer(inc, gr.newest) {
			gr.newest, gr.example = inc, m.ex
		}
	case !ok:
		return // never counted
	case gr.count <= 1:
		if gr.newest == nil {
			t.stale--
		}
		delete(t.groups, key)
		return
	case gr.newest != nil && !newer(gr.newest, inc):
		// It may have been the newest: which member is now is unknown.
		gr.newest, gr.example = nil, ""
		t.stale++
	}
	gr.count += d
	if tool != "" {
		gr.tools = countTool(gr.tools, tool, d)
	}
	if t.groups == nil {
		t.groups = make(map[string]tallyGroup)
	}
	t.groups[key] = gr
}

// countTool returns tools (sorted by name) with name counted d more
// times, as a new slice: tools itself is shared and never modified.
func countTool(tools []toolCount, name string, d int) []toolCount {
	i, found := slices.BinarySearchFunc(tools, name, func(c toolCount, name string) int { return strings.Compare(c.name, name) })
	switch {
	case found && tools[i].n+d <= 0:
		return slices.Delete(slices.Clone(tools), i, i+1)
	case found:
		out := slices.Clone(tools)
		out[i].n += d
		return out
	case d > 0:
		return slices.Insert(slices.Clone(tools), i, toolCount{name, d})
	}
	return tools
}

func toolNames(tools []toolCount) []string {
	if len(tools) == 0 {
		return nil
	}
	out := make([]string, len(tools))
	for i, c := range tools {
		out[i] = c.name
	}
	return out
}

// Entries returns the groups counted at least minRepeats times (at least
// once), as [Guard.Detect] orders them. A stale Tally (see
// [Tally.Stale]) must be renewed first: a stale group's entry has no
// example.
func (t *Tally) Entries(minRepeats int) []Entry {
	minRepeats = max(minRepeats, 1)
	var out []Entry
	for i, n := range t.counts {
		if n >= minRepeats {
			p := &t.g.patterns[i]
			out = append(out, Entry{Pattern: p.name, Count: n, Hint: p.fix, Tools: toolNames(t.patTools[int32(i)])})
		}
	}
	for sp, n := range t.scoped {
		if n >= minRepeats {
			p := &t.g.patterns[sp.pat]
			out = append(out, Entry{Pattern: p.name, Count: n, Hint: p.fix, Provider: sp.provider})
		}
	}
	for _, gr := range t.groups {
		if gr.count >= minRepeats {
			out = append(out, Entry{Pattern: RepeatedPattern, Count: gr.count, Hint: repeatedFix, Example: gr.example,
				Provider: gr.provider, Fingerprint: gr.fp, Tools: toolNames(gr.tools)})
		}
	}
	slices.SortFunc(out, compareEntries)
	return out
}

// compareEntries orders entries as [Tally.Entries] returns them: by
// count (highest first), then label, provider and example.
func compareEntries(a, b Entry) int {
	return cmp.Or(
		cmp.Compare(b.Count, a.Count),
		strings.Compare(a.Pattern, b.Pattern),
		strings.Compare(a.Provider, b.Provider),
		strings.Compare(a.Example, b.Example),
	)
}

// MergeEntries returns, in a new slice, the entries of two Tallies of
// one Guard that count no group in common, as one Tally counting both
// would return them. Tallies of provider failures that all name their
// provider and of incidents that are not provider failures count no
// group in common.
func MergeEntries(a, b []Entry) []Entry {
	out := make([]Entry, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if compareEntries(b[0], a[0]) < 0 {
			out, b = append(out, b[0]), b[1:]
		} else {
			out, a = append(out, a[0]), a[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...)
}

// example is the sanitised, redacted text an entry shows of an incident:
// its message, or its type and status when the message shows nothing.
func example(typ string, status int, message string) string {
	if ex := quoted.LineKeepingHidden(Redact(message), maxExampleRunes); ex != "" { // Quote judges the hidden characters
		return ex
	}
	ex := Sanitize(typ, maxExampleRunes)
	if ex == "" {
		ex = "error"
	}
	if status != 0 {
		ex += " (status " + strconv.Itoa(status) + ")"
	}
	return ex
}
