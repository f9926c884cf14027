package recall

import (
	"cmp"
	"slices"
	"strings"
)

// The thing done. Two goals can share their whole context and still be two
// tasks: "add gamepad support to the Unity game" and "... to the Godot
// game", "keep the dependencies up to date with Dependabot" and "... with
// Renovate", "add a badge icon to the Qt app" and "add a tray icon menu to
// the Qt app". A goal's context is where the work happens and with what:
// the tools it names (toolTable), the words that say something is made or
// put in place (genericActions: add, create, set up, support), the words
// of almost every task (commonWords) and the generic nouns of where the
// work happens (app, service, project, repository, codebase, CI, pipeline;
// see contextWords). The thing done is the rest: the action and what it
// acts on. Besides the parts of parts.go, two rules judge it:
//
//   - names: a goal that names a thing the vocabulary does not know (a
//     word written with a capital inside a sentence: Dependabot,
//     SonarCloud, Tauri, Godot) and the other goal, which lacks that name,
//     names another thing the first lacks (a name of its own, or a tool of
//     toolTable) are about two tools (see namesConflict); a tool the
//     query names, of a kind the other goal names none of, counts as a
//     name of the query's there, and so do the commands, flags and paths a
//     goal gives ("a /warp command", "the --json flag"; see commandNames).
//     A stored goal's acronyms the vocabulary does not know ("from SES
//     notifications", "over MLLP") count as its names against a name of
//     the query's ("Mailgun", "WebSocket"; see goalAcronyms);
//   - versions: two goals that name one tool in two versions ("ROS 1",
//     "ROS 2"; "Python 2", "Python 3") and in none in common are two
//     tasks (see versions);
//   - the leading phrases: when neither goal is led by a named action
//     ("add", "set up", "make" or a verb the vocabulary does not name), or
//     both by the same one, what they act on is in their leading phrases;
//     when each leading phrase has most of its weight in words the other
//     goal lacks, they act on two things (see otherThing). A word weighs
//     its inverse document frequency over the stored goals of the
//     workspace (as BM25's, with the same prior documents): a word of one
//     goal in a hundred weighs more than a word of one in three, and a
//     word of the query no stored goal holds weighs most. Words of the
//     context weigh nothing;
//   - other features: goals led the same way whose leading phrases share
//     the thing acted on (the head of one of them) and each add a word of
//     their own to it ("an options flow", "a config flow") do two things
//     to one thing (see otherFeature);
//   - other places: goals that make something (add, write, set up) in
//     two places named by "to" phrases that share no word are two tasks
//     (see otherPlace);
//   - other slots: goals led the same way that act on one thing and fill
//     one slot after a preposition (where, by what means, into what,
//     from what, for what) with words the other goal lacks are two tasks
//     (see otherSlot);
//   - what the query is not: a stored goal that holds a word the query
//     names only after "instead of" or "rather than" does what the query
//     does not (see insteadOf).
//
// Two goals led by two named actions are judged by their actions
// (parts.go). An action that moves data (read, write, send, receive,
// upload, download: the flow families of directionTable) is left to the
// other parts: what it moves is named in many ways for one task ("consume
// the order events from the Kafka topic", "receive messages from a Kafka
// topic").

// contextWords are the generic nouns of where a task's work happens: they
// say nothing of what is done there. Words as written; their index terms
// join contextTerms.
var contextWords = []string{
	"app", "application", "apps", "service", "services", "project", "projects",
	"repository", "repo", "codebase", "code", "program", "software", "system",
	"platform", "desktop", "mobile", "web", "frontend", "backend", "game",
	"site", "website", "server", "client", "automatically", "existing",
	"ci", "pipeline", "workflow",
}

// contextTerms holds the index terms of a task's context (see the top of
// this file).
var contextTerms = map[string]bool{}

// initThing fills contextTerms; initVocab calls it once the vocabulary is
// known.
func initThing() {
	for _, w := range contextWords {
		contextTerms[canonical(w)] = true
	}
	for w := range commonTerms {
		if actionKinds[w] != actSpecific {
			contextTerms[w] = true
		}
	}
	for w, k := range actionKinds {
		if k == actGeneric {
			contextTerms[w] = true
		}
	}
	for w := range toolIndex {
		contextTerms[w] = true
	}
}

// goalIDF is the weight of a word that df stored goals hold (see the top
// of this file).
func (s *searcher) goalIDF(df int) float64 {
	return s.idf(df, false)
}

// names returns the names a text gives, lowercased: words written with a
// capital letter that do not start a sentence (Unity, Dependabot,
// SonarCloud, PgBouncer, Qt), and are not acronyms in capitals (CI, API,
// CSV, HTTPS), which name kinds of things more often than one thing, nor
// stopwords, tools of toolTable (toolsFit judges those) or words of the
// context. In
// a text written in title case ("Add Dark Mode To The Settings Page"),
// where a capital says nothing, only words with a capital past their
// first letter count (SonarCloud, PgBouncer, iPhone).
func names(text string) []string {
	if len(text) > maxNameBytes {
		text = text[:maxNameBytes] // a word cut in two is read as it is
	}
	type cand struct {
		w            string
		first, camel bool
	}
	var cands []cand
	titled, lower := 0, 0
	start := true
	i := 0
	for i < len(text) {
		c := text[i]
		if !isNameByte(c) {
			switch c {
			case '.', '!', '?', ':', ';', '\n', '(', '"':
				if i+1 >= len(text) || text[i+1] == ' ' || text[i+1] == '\n' || c == '\n' || c == '(' || c == '"' {
					start = true
				}
			}
			i++
			continue
		}
		j := nameEnd(text, i)
		w := text[i:j]
		first := start
		start = false
		i = j
		if !first && len(w) >= 3 {
			switch {
			case w[0] >= 'A' && w[0] <= 'Z' && !hasUpper(w[1:]) && !isKnownTool(strings.ToLower(w)):
				titled++ // a tool's name is capitalised in any text
			case w[0] >= 'a' && w[0] <= 'z':
				lower++
			}
		}
		if len(w) < 2 || !hasUpper(w) || first && !hasUpper(w[1:]) || isAcronym(w) {
			continue
		}
		cands = append(cands, cand{w: w, first: first, camel: hasUpper(w[1:])})
	}
	titleCase := titled > lower
	var out []string
	for _, c := range cands {
		if len(out) == maxNames {
			break
		}
		if titleCase && !c.camel {
			continue
		}
		lw := strings.ToLower(c.w)
		if isStopword(lw) || isKnownTool(lw) || contextTerms[canonical(lw)] || slices.Contains(out, lw) {
			continue
		}
		out = append(out, lw)
	}
	return commandNames(text, out)
}

// commandNames appends to out the commands, flags and paths a text gives,
// lowercased: a word that starts with "/" or "--" after a space or at the
// start of the text ("a /warp command", "the --json flag", "back up
// /home"). Two tasks on two of them are two tasks, as with names.
func commandNames(text string, out []string) []string {
	for i := 0; i < len(text) && len(out) < maxNames; i++ {
		if i > 0 && text[i-1] != ' ' {
			continue
		}
		j := i
		switch {
		case text[i] == '/':
			j = i + 1
		case strings.HasPrefix(text[i:], "--"):
			j = i + 2
		default:
			continue
		}
		k := j
		for k < len(text) && (isNameByte(text[k]) || text[k] == '/' || text[k] == '-' || text[k] == '_') {
			k++
		}
		if k == j || !isNameByte(text[j]) {
			continue
		}
		w := strings.ToLower(strings.TrimRight(text[i:k], "/-_"))
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
		i = k - 1
	}
	return out
}

// isCommandName reports whether a name of names is a command, a flag or
// a path (see commandNames).
func isCommandName(n string) bool {
	return strings.HasPrefix(n, "/") || strings.HasPrefix(n, "--")
}

// Bounds of names: the bytes of a text read (a goal is read up to
// maxGoalRunes runes; its names in the first sentences), and the names
// kept.
const (
	maxNameBytes = 2000
	maxNames     = 8
)

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func hasUpper(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] >= 'A' && w[i] <= 'Z' {
			return true
		}
	}
	return false
}

// goalAcronyms returns the acronyms a stored goal gives that the
// vocabulary does not know (see acronymName), lowercased: "SES", "MQTT",
// "OFX", "MLLP". A stored goal names its tools, formats and protocols
// plainly ("from SES notifications", "over MLLP"); a query's acronym is as
// often a nickname of what the stored goal spells out ("MV3" for Manifest
// V3, "JDBC connections" for a connection pool), so only a stored goal's
// count (see namesConflict).
func goalAcronyms(text string) []string {
	if len(text) > maxNameBytes {
		text = text[:maxNameBytes]
	}
	var out []string
	for i := 0; i < len(text) && len(out) < maxNames; {
		if !isNameByte(text[i]) {
			i++
			continue
		}
		j := nameEnd(text, i)
		w := text[i:j]
		i = j
		if hasUpper(w) && isAcronym(w) && acronymName(w) {
			if lw := strings.ToLower(w); !slices.Contains(out, lw) {
				out = append(out, lw)
			}
		}
	}
	return out
}

// acronymName reports whether the acronym w names a thing of its own: at
// least three letters or digits (a plural s aside), and not a word the
// vocabulary knows (a tool of toolTable, a word of a synonym group, a
// common word or a word of the context): "SES", "OFX", "MQTT", "MLLP",
// not "CI", "UI", "CSV" or "DLQ".
func acronymName(w string) bool {
	lw := strings.ToLower(w)
	base := strings.ToLower(strings.TrimSuffix(w, "s"))
	if len(base) < 3 || wholeWords[lw] || wholeWords[base] || isKnownTool(lw) || isKnownTool(base) {
		return false
	}
	if _, ok := synonyms[stemWord(lw)]; ok {
		return false
	}
	t := canonical(lw)
	return !commonTerms[t] && !contextTerms[t]
}

// isAcronym reports whether w is written in capitals and digits, with
// perhaps a plural s (CI, APIs, CSV, SFTP, HTTPS).
func isAcronym(w string) bool {
	w = strings.TrimSuffix(w, "s")
	for i := 0; i < len(w); i++ {
		if w[i] >= 'a' && w[i] <= 'z' {
			return false
		}
	}
	return true
}

// isKnownTool reports whether the word, or each part of it split the way
// the index splits it, is a tool of toolTable.
func isKnownTool(lw string) bool {
	_, ok := toolIndex[canonical(lw)]
	return ok
}

// containsFold reports whether s holds sub, ASCII letters compared
// without case.
func containsFold(s, sub string) bool {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		k := 0
		for k < n && lowerASCII(s[i+k]) == sub[k] {
			k++
		}
		if k == n {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// namesConflict reports whether the query gives a name d's goal and
// approach do not hold while d's goal gives a name, or names a tool, that
// the query does not: the same task with two tools the vocabulary does
// not know ("with Dependabot", "with Renovate"), or with one it does not
// know and one it knows ("in Terraform Cloud", "in an S3 backend").
//
// With tools set, a tool the query names counts as one of its names when
// d names no tool of its categories anywhere, in its goal or its
// approach: toolsFit does not judge a tool the other side is silent on
// ("plot the simulation with Matplotlib" against "speed up the NumPy
// simulation with Numba"). Semantic recall leaves it out (conflicts): a
// vector can tell that the other side says the tool in other words
// ("spreadsheets" for a CSV file).
func (s *searcher) namesConflict(d *doc, tools bool) bool {
	qOnly, qName := false, false // qName: a name of a thing, not a command
	for _, n := range s.names {
		if !containsFold(d.sol.Goal, n) && !containsFold(d.sol.Approach, n) {
			qOnly = true
			qName = qName || !isCommandName(n)
		}
	}
	if !qOnly && tools {
		qOnly = s.toolOnly(d)
	}
	if !qOnly {
		return false
	}
	for _, n := range d.names {
		if !containsFold(s.q.Goal, n) {
			return true
		}
	}
	if qName {
		// d's acronyms (see goalAcronyms) against a name of the query's:
		// "with WebSocket ping timeouts" against "with an MQTT last will".
		// A tool the query names is judged against d's tools alone: an
		// acronym of d's may be a kind of thing ("the REST API") that
		// the tool is one of; and a command, flag or path ("GET
		// /api/me/export") says where, not with what.
		for _, n := range d.acronyms {
			if !containsFold(s.q.Goal, n) {
				return true
			}
		}
	}
	for _, t := range d.tools {
		if t.role&(toolApproach|toolImplied) != 0 {
			continue
		}
		if !slices.ContainsFunc(s.tools, func(u toolUse) bool { return u.tool == t.tool }) {
			return true
		}
	}
	return false
}

// leadGap weighs the content words of the two leading phrases (what the
// action acts on), context left out, and those of them the other goal
// lacks: the query's that d holds nowhere, in its goal or its approach (q,
// of qTot), d's that the query lacks (g, of gTot).
func (s *searcher) leadGap(d *doc) (q, qTot, g, gTot float64) {
	for _, o := range s.objs {
		if o.flags&leadObject == 0 || o.ctx {
			continue
		}
		qTot += o.w
		if o.id == noTerm || findTerm(d.terms, o.id) < 0 {
			q += o.w
		}
	}
	for _, dt := range d.terms {
		if dt.lead&leadObject == 0 || dt.tfG == 0 {
			continue
		}
		t := &s.ws.terms[dt.id]
		if t.context {
			continue
		}
		w := s.goalIDF(int(t.goalDF))
		gTot += w
		if _, ok := slices.BinarySearchFunc(s.ids, dt.id, func(q qid, id uint32) int { return cmp.Compare(q.id, id) }); !ok {
			g += w
		}
	}
	return q, qTot, g, gTot
}

// otherThingShare is the share of a leading phrase's weight (see
// leadGap) that, unmatched on both sides, makes two goals two things.
const otherThingShare = 0.6

// otherThing reports whether the query and d, neither led by a named
// action or both by the same one (not one that moves data), act on two
// different things: each leading phrase has at least otherThingShare of
// its weight in words the other goal lacks ("add a badge icon to the Qt
// app" and "add a tray icon menu to the Qt app", "scan the Python
// dependencies for vulnerabilities" and "scan the Docker images for
// vulnerabilities", "run the test suite in a pre-push hook" and "run the
// linters in a pre-commit hook").
func (s *searcher) otherThing(d *doc) bool {
	if s.kind == actSpecific || d.kind == actSpecific {
		if s.verb == noTerm || s.verb != d.verb || families(s.dir)&flowFamilies != 0 || families(d.dir)&flowFamilies != 0 {
			return false
		}
	}
	q, qTot, g, gTot := s.leadGap(d)
	return qTot > 0 && gTot > 0 && q >= otherThingShare*qTot && g >= otherThingShare*gTot
}

// otherFeature reports whether the query and d, led the same way (both by
// a word that says something is made, both by no named action, or both by
// the same action the vocabulary names), do two things to one thing: their
// leading phrases share a word outside the context, the head of one of
// them (the phrase's last word: "flow" in "an options flow"), and each has
// a word outside the context that the other goal lacks (what is done to
// it). "Add an options flow to the integration" and "add a config flow to
// the integration", "make the toast notifications dismissible" and "make
// the toast notifications announced", "make the chart zoomable" and "make
// the chart resize" are other features of one thing: the shared word is
// where the feature lives, not the feature. After a light verb the thing
// made is said after the head ("make the chart zoomable"), so any shared
// word counts there; after a verb, a shared word that is no head is a
// modifier, and the heads then say the thing in two ways ("encode order
// objects", "serialize the order structs"). For the query the word must
// be missing from d's approach too (a rewording often says the feature in
// the words of the approach), and a word cut short from the other's
// ("temp" for "temporary") is no word of its own. A verb the vocabulary
// does not name leaves the phrase unread: it may be a word of another
// language, whose phrases put the head first. When unsure, nothing is
// shown: a rewording that adds a word of its own before the shared head
// and drops one of the stored goal's is lost ("a plugin rule" for "a
// custom rule").
func (s *searcher) otherFeature(d *doc) bool {
	light := !s.verbSet && d.verb == noTerm
	sameLead := light || s.kind == actGeneric && d.kind == actGeneric ||
		s.verb != noTerm && s.verb == d.verb && s.kind != actNone
	if !sameLead {
		return false
	}
	shared := false
	var own [maxLeadWords]string
	qOwn := own[:0]
	for _, o := range s.objs {
		if o.flags&leadObject == 0 || o.ctx && (o.id == noTerm || !featureWord(o.term)) {
			continue
		}
		j := -1
		if o.id != noTerm {
			j = findTerm(d.terms, o.id)
		}
		switch {
		case j < 0:
			if len(qOwn) < len(own) {
				qOwn = append(qOwn, o.term)
			}
		case d.terms[j].lead&leadObject != 0 && d.terms[j].tfG > 0 && (light || o.id == s.head || o.id == d.head):
			shared = true
		}
	}
	if !shared || len(qOwn) == 0 {
		return false
	}
	var short uint8 // the query's own words that shorten one of d's
	dOwn := false
	for _, dt := range d.terms {
		t := &s.ws.terms[dt.id]
		if dt.lead&leadObject == 0 || dt.tfG == 0 || t.context && !featureWord(t.word) {
			continue
		}
		if _, ok := slices.BinarySearchFunc(s.ids, dt.id, func(q qid, id uint32) int { return cmp.Compare(q.id, id) }); ok {
			continue
		}
		abbr := false
		for i, w := range qOwn {
			if shortens(w, t.word) {
				short |= 1 << i
				abbr = true
			}
		}
		dOwn = dOwn || !abbr
	}
	return dOwn && int(short) != 1<<len(qOwn)-1
}

// otherPlace reports whether the query and d, both led by a word that
// says something is made ("add", "write", "set up"), put it in two
// places: each names where in a "to" phrase, with words outside the
// context, and neither goal holds a word of the other's ("add constant
// folding to the query planner" and "... to the compiler's optimizer",
// "add drag and drop reordering to the list" and "... to the form"). The
// same thing made for two places is two tasks; a goal that names no place
// fits any.
func (s *searcher) otherPlace(d *doc) bool {
	if s.kind != actGeneric || d.kind != actGeneric {
		return false
	}
	qTo := false
	for _, o := range s.objs {
		if o.flags&leadTo == 0 || o.ctx {
			continue
		}
		if o.id != noTerm && findTerm(d.terms, o.id) >= 0 {
			return false
		}
		qTo = true
	}
	if !qTo {
		return false
	}
	dTo := false
	for _, dt := range d.terms {
		if dt.lead&leadTo == 0 || dt.tfG == 0 || s.ws.terms[dt.id].context {
			continue
		}
		if _, ok := slices.BinarySearchFunc(s.ids, dt.id, func(q qid, id uint32) int { return cmp.Compare(q.id, id) }); ok {
			return false
		}
		dTo = true
	}
	return dTo
}

// shortens reports whether one of two words is the other cut short, at
// three letters or more ("temp" and "temporary", "dir" and "directory",
// "repo" and "repository"): one word written two ways.
func shortens(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return len(a) >= 3 && strings.HasPrefix(b, a)
}

// featureWord reports whether a word of the context, past the verb of a
// leading phrase, still says which feature it is: a word of an action
// that only makes something, used as a noun ("a config flow", "a setup
// wizard").
func featureWord(term string) bool {
	return actionKinds[term] == actGeneric
}

// toolOnly reports whether the query names a tool (not one only implied)
// of a category d names no tool of, in its goal or its approach. Client
// and server are left out: "browser", "frontend" and "backend" say where,
// not with what; and so are the tools whose names are common words (see
// wordTools).
func (s *searcher) toolOnly(d *doc) bool {
	var dc uint32
	for _, t := range d.tools {
		dc |= toolTable[t.tool].cats
	}
	for _, t := range s.tools {
		if c := toolTable[t.tool].cats; t.role&toolImplied == 0 && c != catSide && c&dc == 0 && !wordTools[toolTable[t.tool].name] {
			return true
		}
	}
	return false
}

// versions returns the versions of tools a text names, lowercased, each as
// the name and its number ("ros 2", "python 3", "manifest 3" for Manifest
// V3): a word that is a tool of toolTable or written with a capital (see
// below), followed by a space and a number of at most three digits, bare
// or after a "v". Two tasks on two versions of one tool are two tasks
// ("publish odometry from the ROS 1 node" is not "... from the ROS 2
// node"). At most maxVersions, from the first maxNameBytes bytes.
func versions(text string) []string {
	if len(text) > maxNameBytes {
		text = text[:maxNameBytes]
	}
	var out []string
	prev := ""
	i := 0
	for i < len(text) && len(out) < maxVersions {
		if !isNameByte(text[i]) {
			if text[i] != ' ' {
				prev = ""
			}
			i++
			continue
		}
		j := i
		for j < len(text) && isNameByte(text[j]) {
			j++
		}
		w := text[i:j]
		if prev != "" {
			if n, ok := versionNumber(w); ok {
				v := prev + " " + n
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
				prev = ""
				i = j
				continue
			}
		}
		prev = ""
		// A capital counts past the text's first word, or past a word's
		// first letter (ROS, PyQt): the first word of a task is mostly
		// its verb ("Retry 3 times").
		named := hasUpper(w[:1]) && (i > 0 || hasUpper(w[1:]))
		if lw := strings.ToLower(w); len(w) >= 2 && !isStopword(lw) && (named || isKnownTool(lw)) {
			if _, isNum := versionNumber(w); !isNum {
				prev = lw
			}
		}
		i = j
	}
	return out
}

// maxVersions bounds the versions read from one text.
const maxVersions = 4

// versionNumber returns the number of a version written as w: one to
// three digits, perhaps after a "v" ("2", "12", "v3").
func versionNumber(w string) (string, bool) {
	d := strings.TrimPrefix(strings.TrimPrefix(w, "v"), "V")
	if len(d) == 0 || len(d) > 3 {
		return "", false
	}
	for k := 0; k < len(d); k++ {
		if d[k] < '0' || d[k] > '9' {
			return "", false
		}
	}
	return d, true
}

// versionsConflict reports whether q and d name one tool in versions
// that have none in common: "Python 2" against "Python 3", not "from
// Python 2 to Python 3" against "to Python 3" (the direction rules judge
// that one).
func versionsConflict(q, d []string) bool {
	for _, v := range q {
		if slices.Contains(d, v) {
			continue
		}
		name := v[:strings.LastIndexByte(v, ' ')+1]
		other, common := false, false
		for _, u := range d {
			if strings.HasPrefix(u, name) {
				other = true
				common = common || slices.Contains(q, u)
			}
		}
		if other && !common {
			return true
		}
	}
	return false
}

// wordTools are the tools whose names are also common English words ("a
// black background", "react to changes", "the vault contract", "make the
// output prettier"): toolOnly does not take them for a name of the task.
var wordTools = map[string]bool{
	"black": true, "express": true, "spring": true, "rails": true, "react": true,
	"flutter": true, "prettier": true, "stripe": true, "swift": true, "rust": true,
	"bun": true, "flask": true, "mocha": true, "jest": true, "parcel": true,
	"rollup": true, "sentry": true, "vault": true, "doppler": true, "airflow": true,
	"excel": true, "windows": true, "apple": true, "slack": true, "discord": true,
	"eclipse": true, "sublime": true, "leaflet": true, "prefect": true,
}

// insteadOf reports whether d's goal does what the query says it is not:
// it holds a word the query names only after "instead of" or "rather
// than", other than as d's verb or its source ("publish the budget
// dataset to Socrata instead of CKAN" against "... to the open data
// portal (CKAN)", "make the parser stop at the first error instead of
// recovering" against "make the parser recover from syntax errors").
func (s *searcher) insteadOf(d *doc) bool {
	for _, id := range s.instead {
		if id == d.verb || id == d.verb2 {
			continue
		}
		if j := findTerm(d.terms, id); j >= 0 && d.terms[j].tfG > 0 && d.terms[j].lead&leadFrom == 0 {
			return true
		}
	}
	return false
}

// otherSlot reports whether the query and d, led the same way (see
// otherFeature) and acting on one thing (their leading phrases share a
// word outside the context), fill one slot in two ways: both have a
// phrase after a preposition of one kind (where: "in", "on"; by what
// means: "over", "via"; into what: "to"; from what; for what; see
// slotWords) with a word outside the context, and no word of the query's
// phrases of that kind is anywhere in d's goal, nor any of d's in the
// query, words of the context included ("export the FreeCAD model to
// STL" and "... to STEP", "receive HL7 v2 messages over HTTPS" and "...
// over MLLP", "run the linters in CI on every pull request" and "... in a
// Git pre-commit hook"). The same
// action on the same thing in another place, by other means or into
// another thing is another task; a goal that leaves a slot empty fits
// any way of filling it ("parse the CSV exports in the billing service"
// and "parse the CSV exports with retries").
func (s *searcher) otherSlot(d *doc) bool {
	if len(s.slots) == 0 || len(d.slots) == 0 {
		return false
	}
	light := !s.verbSet && d.verb == noTerm
	sameLead := light || s.kind == actGeneric && d.kind == actGeneric ||
		s.verb != noTerm && s.verb == d.verb
	if !sameLead {
		return false
	}
	shared := false
	for _, o := range s.objs {
		if o.flags&leadObject == 0 || o.ctx || o.id == noTerm {
			continue
		}
		if j := findTerm(d.terms, o.id); j >= 0 && d.terms[j].lead&leadObject != 0 {
			shared = true
			break
		}
	}
	if !shared {
		return false
	}
	content := func(id uint32) bool { return id == noTerm || !s.ws.terms[id].context }
	var qFilled, dFilled, met uint32 // bits by slot
	for _, st := range s.slots {
		if content(st.id) {
			qFilled |= 1 << st.slot
		}
		if st.id != noTerm {
			if j := findTerm(d.terms, st.id); j >= 0 && d.terms[j].tfG > 0 {
				met |= 1 << st.slot
			}
		}
	}
	for _, st := range d.slots {
		if content(st.id) {
			dFilled |= 1 << st.slot
		}
		if _, ok := slices.BinarySearchFunc(s.ids, st.id, func(q qid, id uint32) int { return cmp.Compare(q.id, id) }); ok {
			met |= 1 << st.slot
		}
	}
	return qFilled&dFilled&^met != 0
}

// nameEnd returns where the word that starts at text[i] (a name byte)
// ends: name bytes, and single hyphens or underscores between them.
func nameEnd(text string, i int) int {
	j := i
	for j < len(text) && (isNameByte(text[j]) || (text[j] == '-' || text[j] == '_') && j+1 < len(text) && isNameByte(text[j+1])) {
		j++
	}
	return j
}
