package recall

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The parts of a task. Two goals that share most of their words can still
// be two tasks: "migrate from MySQL to PostgreSQL" and back, "back up the
// database" and "restore it from the backup", "write the date utility" and
// "write tests for it", a Python CLI and a Rust one. A solution is recalled
// only when its parts are compatible with the query's:
//
//   - the action: two goals led by different named actions (vocab.go's
//     specificActions, after synonyms) are different tasks; a goal led by a
//     named action matches a goal that makes something (add, write, set
//     up...) only when that goal's leading phrase names the action ("enable
//     gzip compression" for "compress the responses with gzip"); a light
//     verb ("make the build faster") names none. A query led by a named
//     action matches a stored goal led by none (a light verb, or a verb
//     the vocabulary does not name) only when the stored goal holds the
//     action's word: "monitor the replication lag of the read replica" is
//     not "route the read queries to the read replica". The reverse is
//     not asked: a stored goal says its task plainly, a reworded query
//     often leads with any verb ("turn XML documents into JSON", "let
//     users download the report"). Opposite directions are direction.go's;
//   - the object: each goal's leading phrase (its action when it names
//     one, and the words it acts on) shares a word with the other goal;
//   - the source and the target: the words of a "from" phrase that are not
//     in the "to" phrase, and the reverse, are not swapped between the goals
//     ("from Python 2 to Python 3" against "from 3 to 2") more than they are
//     shared; after "replace" or "swap" the object is the source and a
//     "with", "by" or "for" phrase the target; after "convert" (and the
//     words of its group) or "translate" with no "from" phrase, the object
//     is the source ("convert XML files to JSON");
//   - what the action is done to: the words of the phrases after the
//     leading one, and the words of a flow family in the leading phrase
//     past its verb, do not lean to opposite sides of a family of
//     directionTable ("add retries to the webhook sender" and "... to the
//     webhook receiver", "a progress bar for the download" and "show the
//     upload progress");
//   - the qualifiers of the object: where both goals name a kind of the
//     thing in one category (a resource, serial or parallel, a model's
//     task...), it is the same kind (see qualifiers.go);
//   - the outcome: the goals do not name opposite paths ("when the payment
//     fails", "when it succeeds"; see outcomeWords); a repair names none
//     (its failure and its aim are one task). A query done when something
//     fails (a failure in its "when" or "if" clause: "email the owner when
//     the sync fails") is the failure path, not the task of a stored goal
//     that names no outcome ("sync the rows to the CRM");
//   - the tools: in each category of toolTable (language, framework,
//     database, CI service, format, hosted service...), the tools the two
//     goals name are not disjoint, and a tool a goal names as its source or
//     target is named by the other whenever the other names a tool of that
//     category. A tool stands for the tools it implies when a goal names
//     none of their category: a framework, a linter or a runtime its
//     language, a framework its side (React the client, Django the
//     server), object storage its cloud (see implyTools); a stored goal
//     that names no tool of a category is judged by the tools its approach
//     names.
//
//   - the thing done: the names of tools the vocabulary does not know,
//     the leading phrases of goals that only say something is made,
//     another feature of the thing both act on, another way to fill one
//     slot, and what the query says it is not (see thing.go).
//
// Anything else is not known and does not count against a match: a goal
// that names no tool is compatible with every tool.

// mismatchFactor scales the similarity of a solution whose task parts do
// not fit the query's, as oppositeFactor does for opposite actions: 1
// becomes 0.3, below the default threshold.
const mismatchFactor = 0.3

// Roles of a tool in a text.
const (
	toolFrom     uint8 = 1 << iota // named in a "from" phrase
	toolTo                         // named in a "to" phrase
	toolApproach                   // named by the approach, not the goal
	toolImplied                    // implied by a tool the goal names (see implyTools)
)

// toolUse is one tool named by a text: its index in toolTable and its
// roles.
type toolUse struct {
	tool uint8
	role uint8
}

// addTool records term if it names a tool, in the role the lead scanner
// gives the word.
func (a *analyzed) addTool(term string, role uint16) {
	i, ok := toolIndex[term]
	if !ok {
		return
	}
	var r uint8
	if role&leadFrom != 0 {
		r |= toolFrom
	}
	if role&leadTo != 0 {
		r |= toolTo
	}
	for j := range a.tools {
		if a.tools[j].tool == i {
			a.tools[j].role |= r
			return
		}
	}
	a.tools = append(a.tools, toolUse{tool: i, role: r})
}

// implyTools adds the tools the tools a text names imply, each when the
// text names no tool of its categories: the language of a framework, a
// runtime, a linter; the side of a framework or a runtime that runs on
// one side only; the cloud of a storage service.
func (a *analyzed) implyTools() {
	var named uint32
	for _, t := range a.tools {
		named |= toolTable[t.tool].cats
	}
	n := len(a.tools)
	imply := func(name string) {
		i, ok := toolIndex[canonical(name)]
		if !ok || named&toolTable[i].cats != 0 {
			return
		}
		for _, t := range a.tools {
			if t.tool == i {
				return
			}
		}
		a.tools = append(a.tools, toolUse{tool: i, role: toolImplied})
	}
	for _, x := range a.implied {
		imply(x)
	}
	for _, t := range a.tools[:n] {
		if l := toolTable[t.tool].lang; l != "" {
			imply(l)
		}
		for _, x := range impliedTools[toolTable[t.tool].name] {
			imply(x)
		}
	}
}

// writtenImplies are the tools a word implies as written, where its
// index term says less: Node.js is JavaScript on the server.
var writtenImplies = map[string]string{"node": "server", "nodejs": "server"}

// impliedTools are the tools a tool implies besides its language (see
// implyTools), by canonical term.
var impliedTools = map[string][]string{
	"react": {"client"}, "vue": {"client"}, "angular": {"client"}, "svelte": {"client"},
	"bun": {"server"}, "express": {"server"}, "django": {"server"},
	"flask": {"server"}, "fastapi": {"server"}, "rails": {"server"}, "spring": {"server"},
	"laravel": {"server"}, "celery": {"server"}, "reactnative": {"client"}, "flutter": {"client"},
	"esp32": {"firmware"}, "esp8266": {"firmware"}, "stm32": {"firmware"}, "nrf52": {"firmware"},
	"arduino": {"firmware"},
	"s3":      {"aws"}, "gcs": {"gcp"}, "azureblob": {"azure"},
	"postgis": {"postgresql"}, "timescaledb": {"postgresql"}, "awsbatch": {"aws"},
}

// docTools returns the tools of a stored solution: those of its goal, and
// those of its approach marked toolApproach.
func docTools(goal, approach []toolUse) []toolUse {
	if len(goal)+len(approach) == 0 {
		return nil
	}
	out := make([]toolUse, 0, len(goal)+len(approach))
	out = append(out, goal...)
	for _, t := range approach {
		out = append(out, toolUse{tool: t.tool, role: toolApproach | t.role&toolImplied})
	}
	return out
}

// toolsFit reports whether the tools of a query (q) and of a stored goal
// (d) are compatible (see the top of this file).
func toolsFit(q, d []toolUse) bool {
	if len(q) == 0 || len(d) == 0 {
		return true
	}
	var qc, dc, dgoal uint32
	for _, t := range q {
		qc |= toolTable[t.tool].cats
	}
	for _, t := range d {
		if t.role&toolApproach == 0 {
			dgoal |= toolTable[t.tool].cats
		}
	}
	for _, t := range d {
		if t.role&toolApproach == 0 || dgoal&toolTable[t.tool].cats == 0 {
			dc |= toolTable[t.tool].cats
		}
	}
	// named reports whether the side's tools of category c hold tool.
	named := func(side []toolUse, goalCats, c uint32, tool uint8) bool {
		for _, t := range side {
			if t.tool == tool && (t.role&toolApproach == 0 || goalCats&c == 0) {
				return true
			}
		}
		return false
	}
	for c := uint32(1); c != 0 && c <= qc&dc; c <<= 1 {
		if qc&dc&c == 0 {
			continue
		}
		shared := false
		for _, t := range q {
			if toolTable[t.tool].cats&c == 0 {
				continue
			}
			in := named(d, dgoal, c, t.tool)
			shared = shared || in
			if !in && t.role&(toolFrom|toolTo) != 0 {
				return false // "to PostgreSQL" where the other names MySQL alone
			}
		}
		if !shared {
			return false
		}
		for _, t := range d {
			if toolTable[t.tool].cats&c == 0 || t.role&(toolFrom|toolTo) == 0 || t.role&toolApproach != 0 {
				continue
			}
			if !named(q, qc, c, t.tool) {
				return false
			}
		}
	}
	return true
}

// fits reports whether d's task parts are compatible with the query's
// (see the top of this file).
func (s *searcher) fits(d *doc) bool {
	// The action.
	switch {
	case s.kind == actSpecific && d.kind == actSpecific:
		if !sameAction(s.verb, s.verb2, d.verb, d.verb2) && !s.exportsAsConverts(d) {
			return false
		}
	case s.kind == actSpecific && d.kind == actGeneric:
		if !d.leads(s.verb) {
			return false
		}
	case s.kind == actGeneric && d.kind == actSpecific:
		if !s.leads(d.verb) {
			return false
		}
	case s.kind == actSpecific && d.kind == actNone:
		if !d.holdsTerm(s.verb) && !d.holdsTerm(s.verb2) {
			return false
		}
	}
	// The object, both ways.
	if !s.leadMeets(d) || !d.leadMeets(s) {
		return false
	}
	if s.reversed(d) || s.otherPath(d) || opposedFamilies(s.tailDir, d.tailDir) != 0 || !qualsFit(s.quals, d.quals) {
		return false
	}
	if !toolsFit(s.tools, d.tools) || s.namesConflict(d, true) || versionsConflict(s.versions, d.versions) {
		return false
	}
	return !s.otherThing(d) && !s.otherFeature(d) && !s.otherPlace(d) && !s.otherSlot(d) && !s.insteadOf(d)
}

// conflicts reports whether d is a different task from the query's
// whatever its words or its vector say: a main action opposite to the
// query's, source and target swapped, or tools that do not meet. It
// leaves out what only words can judge (the same action or object said
// in the same words), which a vector judges by meaning: semantic
// recall's candidates pass this test, not [searcher.fits].
func (s *searcher) conflicts(d *doc) bool {
	return s.opposes(d) || s.reversed(d) || s.otherPath(d) || opposedFamilies(s.tailDir, d.tailDir) != 0 ||
		!qualsFit(s.quals, d.quals) || !toolsFit(s.tools, d.tools) || s.namesConflict(d, false) ||
		versionsConflict(s.versions, d.versions)
}

// Outcomes: the path of a task, when its goal names one ("when the
// payment fails", "a success toast"). The success path and the failure
// path are two tasks.
const (
	outcomeSuccess uint8 = 1 << iota
	outcomeFailure
)

// outcomeWords name an outcome, as written. Nouns and adjectives count,
// and the verbs in the forms that state what happened; "pass" and
// "complete" in other forms are actions ("pass the token", "complete the
// form").
var outcomeWords = map[string]uint8{
	"succeed": outcomeSuccess, "succeeds": outcomeSuccess, "succeeded": outcomeSuccess,
	"succeeding": outcomeSuccess, "success": outcomeSuccess, "successes": outcomeSuccess,
	"successful": outcomeSuccess, "successfully": outcomeSuccess, "passes": outcomeSuccess,
	"completes": outcomeSuccess, "completed": outcomeSuccess, "approved": outcomeSuccess,
	"fail": outcomeFailure, "fails": outcomeFailure, "failed": outcomeFailure,
	"failing": outcomeFailure, "failure": outcomeFailure, "failures": outcomeFailure,
	"error": outcomeFailure, "errors": outcomeFailure, "declined": outcomeFailure,
	"rejected": outcomeFailure, "crashes": outcomeFailure, "crashed": outcomeFailure,
	"declines": outcomeFailure, "rejects": outcomeFailure, "crash": outcomeFailure,
	"unsuccessful": outcomeFailure, "unsuccessfully": outcomeFailure,
}

// otherPath reports whether the query and d name opposite outcomes, each
// one alone: "notify when the deploy succeeds" and "notify when the
// deploy fails".
func (s *searcher) otherPath(d *doc) bool {
	both := outcomeSuccess | outcomeFailure
	if s.onFailure && d.outcome == 0 {
		return true
	}
	return s.outcome != 0 && d.outcome != 0 && s.outcome != both && d.outcome != both && s.outcome != d.outcome
}

// sameAction reports whether two goals, led by the verbs a (and a2 joined
// to it) and b (and b2), share one.
func sameAction(a, a2, b, b2 uint32) bool {
	for _, x := range [2]uint32{a, a2} {
		if x != noTerm && (x == b || x == b2) {
			return true
		}
	}
	return false
}

// exportsAsConverts reports whether one of the query and d exports and the
// other converts, each to a format: "export the model to ONNX" and
// "convert the model to ONNX" are one task.
func (s *searcher) exportsAsConverts(d *doc) bool {
	exp, conv := s.ws.dict[exportTerm], s.ws.dict[convertTerm]
	if !(s.verb == exp && d.verb == conv || s.verb == conv && d.verb == exp) {
		return false
	}
	toFormat := func(tools []toolUse) bool {
		return slices.ContainsFunc(tools, func(t toolUse) bool {
			return t.role&toolTo != 0 && t.role&toolApproach == 0 && toolTable[t.tool].cats&catFormat != 0
		})
	}
	return toFormat(s.tools) && toFormat(d.tools)
}

// exportTerm and convertTerm are the index terms of "export" and
// "convert"; initVocab sets them.
var exportTerm, convertTerm string

// holdsTerm reports whether d's goal holds the term id.
func (d *doc) holdsTerm(id uint32) bool {
	if id == noTerm {
		return false
	}
	j := findTerm(d.terms, id)
	return j >= 0 && d.terms[j].tfG > 0
}

// leads reports whether the query's leading phrase, past its verb, holds
// the term id.
func (s *searcher) leads(id uint32) bool {
	if id == noTerm {
		return false
	}
	for _, o := range s.objs {
		if o.id == id && o.flags&leadObject != 0 {
			return true
		}
	}
	return false
}

// leads reports whether d's leading phrase, past its verb, holds the term
// id.
func (d *doc) leads(id uint32) bool {
	if id == noTerm {
		return false
	}
	j := findTerm(d.terms, id)
	return j >= 0 && d.terms[j].lead&leadObject != 0
}

// leadMeets reports whether the query's leading phrase (its words, and
// its verb unless it only says that something is made) shares a term
// with d's goal. A query whose leading phrase says nothing else is judged
// by all its words.
func (s *searcher) leadMeets(d *doc) bool {
	inGoal := func(id uint32) bool {
		if id == noTerm {
			return false
		}
		j := findTerm(d.terms, id)
		return j >= 0 && d.terms[j].tfG > 0
	}
	any := false
	if s.kind != actGeneric && s.verbSet {
		any = true
		if inGoal(s.verb) {
			return true
		}
	}
	for _, o := range s.objs {
		if o.flags&leadObject == 0 {
			continue
		}
		any = true
		if inGoal(o.id) {
			return true
		}
	}
	if any {
		return false
	}
	for _, q := range s.ids {
		if inGoal(q.id) {
			return true
		}
	}
	return false
}

// leadMeets reports whether d's leading phrase shares a term with the
// query (see searcher.leadMeets).
func (d *doc) leadMeets(s *searcher) bool {
	inQuery := func(id uint32) bool {
		_, ok := slices.BinarySearchFunc(s.ids, id, func(q qid, id uint32) int { return cmp.Compare(q.id, id) })
		return ok
	}
	any := false
	if d.kind != actGeneric && d.verb != noTerm {
		any = true
		if inQuery(d.verb) {
			return true
		}
	}
	for _, dt := range d.terms {
		if dt.lead&leadObject == 0 {
			continue
		}
		any = true
		if inQuery(dt.id) {
			return true
		}
	}
	if any {
		return false
	}
	for _, dt := range d.terms {
		if dt.tfG > 0 && inQuery(dt.id) {
			return true
		}
	}
	return false
}

// reversed reports whether d goes the other way: more words only in the
// query's "from" phrase are only in d's "to" phrase, or the reverse, than
// words are on the same side of both ("convert XML files to JSON" and
// "convert JSON files to XML" share the source "files" but swap XML and
// JSON).
func (s *searcher) reversed(d *doc) bool {
	var bufs [4][maxTailWords + maxLeadWords]uint32
	qf, qt, df, dt := bufs[0][:0], bufs[1][:0], bufs[2][:0], bufs[3][:0]
	for _, o := range s.objs {
		if o.id == noTerm {
			continue
		}
		if o.flags&leadFrom != 0 {
			qf = append(qf, o.id)
		}
		if o.flags&leadTo != 0 {
			qt = append(qt, o.id)
		}
	}
	if len(qf) == 0 && len(qt) == 0 {
		return false
	}
	for _, t := range d.terms {
		if t.lead&leadFrom != 0 {
			df = append(df, t.id)
		}
		if t.lead&leadTo != 0 {
			dt = append(dt, t.id)
		}
	}
	// A word counts on a side only when the other side lacks it: "from
	// Python 2 to Python 3" goes from 2 to 3.
	meetsOnly := func(a, notA, c, notC []uint32) int {
		n := 0
		for _, x := range a {
			if !slices.Contains(notA, x) && slices.Contains(c, x) && !slices.Contains(notC, x) {
				n++
			}
		}
		return n
	}
	same := meetsOnly(qf, qt, df, dt) + meetsOnly(qt, qf, dt, df)
	return meetsOnly(qf, qt, dt, df)+meetsOnly(qt, qf, df, dt) > same
}

// Reason says why a solution was recalled: the action and the object its
// goal shares with the query, in the stored goal's own words (lowercase).
// The object is the words of the stored goal's leading phrase that the
// query holds or, when there are none, its other words the query holds.
type Reason struct {
	Action string `json:"action,omitempty"`
	Object string `json:"object,omitempty"`
}

// reason returns the reason d matches the query.
func (s *searcher) reason(d *doc) Reason {
	action := ""
	switch {
	case d.verb != noTerm && d.verb == s.verb && d.kind != actNone:
		action = s.ws.terms[d.verb].word
	case s.kind == actSpecific && d.leads(s.verb):
		action = s.ws.terms[s.verb].word
	case d.kind == actSpecific && s.leads(d.verb):
		action = s.ws.terms[d.verb].word
	}
	inQuery := func(id uint32) bool {
		_, ok := slices.BinarySearchFunc(s.ids, id, func(q qid, id uint32) int { return cmp.Compare(q.id, id) })
		return ok
	}
	var buf [maxReasonTerms]string
	want := buf[:0]
	add := func(w string) {
		if len(want) < maxReasonTerms && !slices.Contains(want, w) {
			want = append(want, w)
		}
	}
	if action != "" {
		add(action)
	}
	objects := len(want)
	for _, dt := range d.terms {
		if w := s.ws.terms[dt.id].word; dt.lead&leadObject != 0 && w != action && inQuery(dt.id) {
			add(w)
		}
	}
	if len(want) == objects {
		// The leading phrases share the action alone ("cache the
		// results of the pricing function", "memoize the pricing
		// function"): the object is in the words after it.
		for _, dt := range d.terms {
			if w := s.ws.terms[dt.id].word; dt.tfG > 0 && w != action && actionKinds[w] != actGeneric && inQuery(dt.id) {
				add(w)
			}
		}
	}
	if len(want) == 0 {
		return Reason{}
	}
	var r Reason
	var obj strings.Builder
	var seen uint32
	all := uint32(1)<<len(want) - 1
	surfaceWords(d.sol.Goal, func(term, text string) bool {
		i := slices.Index(want, term)
		if i < 0 || seen&(1<<i) != 0 {
			return true
		}
		seen |= 1 << i
		if term == action {
			r.Action = text
		} else {
			if obj.Len() > 0 {
				obj.WriteByte(' ')
			}
			obj.WriteString(text)
		}
		return seen != all
	})
	r.Object = obj.String()
	return r
}

// maxReasonTerms bounds the words of a Reason.
const maxReasonTerms = 16

// surfaceWords calls fn, in text order, with the index term and the
// lowercase text of each word (or two-word phrase) of goal that analyze
// indexes, until fn returns false.
func surfaceWords(goal string, fn func(term, text string) bool) {
	var prev, prevStem string
	stopped := false
	single := func(text, stem string) {
		if stopped || isStopword(text) || utf8.RuneCountInString(text) == 1 && !unicode.IsDigit([]rune(text)[0]) {
			return
		}
		if c, ok := synonym(stem); ok {
			stem = c
		}
		stopped = !fn(stem, text)
	}
	splitWords(goal, maxGoalRunes, func(t string, cjk bool) {
		if stopped {
			return
		}
		stem := t
		if !cjk {
			stem = stemWord(t)
		}
		if prev != "" {
			if c, ok := phrases[[2]string{prevStem, stem}]; ok && !cjk {
				stopped = !fn(c, prev+" "+t)
				prev = ""
				return
			}
			single(prev, prevStem)
		}
		if cjk {
			prev = ""
			single(t, t)
			return
		}
		prev, prevStem = t, stem
	})
	if prev != "" {
		single(prev, prevStem)
	}
}
