package recall

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// Analysis limits. Goals are often the first user message of a
// conversation, which may hold pasted logs or code: only the head of a text
// is analysed.
const (
	maxGoalRunes     = 2000 // goal runes tokenised for ranking
	maxApproachRunes = 4000 // approach runes tokenised for ranking
	maxTrigramRunes  = 256  // runes of the normalised goal cut into trigrams
	maxQueryTerms    = 64   // distinct query terms scored
	truncStemRunes   = 5    // non-English words are cut to this many runes
)

// extraStopwords complement the snowball English list with the filler of
// task descriptions ("please", "I need to ...").
var extraStopwords = map[string]bool{
	"please": true, "need": true, "needs": true, "want": true, "wants": true,
	"would": true, "could": true, "let": true, "lets": true, "also": true,
	"via": true, "etc": true, "eg": true, "ie": true, "thing": true,
	"things": true, "something": true, "way": true, "task": true, "try": true,
	"trying": true, "able": true, "new": true, "properly": true,
	"correctly": true, "currently": true, "using": true, "use": true,
	"may": true, "might": true, "must": true, "shall": true, "one": true,
	"us": true, "lot": true, "bit": true, "onto": true,
	// Forms of "go" other than the word itself: their stem is "go", which
	// the vocabulary reads as the language ("MV2 is going away").
	"going": true, "goes": true, "gone": true, "went": true,
}

func isStopword(w string) bool {
	return english.IsStopWord(w) || extraStopwords[w]
}

// synonymGroups map the verbs and nouns of programming tasks to one
// canonical term (the stem of the group's first word). Word forms that the
// stemmer does not bring together are listed explicitly.
var synonymGroups = [][]string{
	{"fetch", "get", "retrieve", "retrieval", "download", "pull", "grab", "obtain", "scrape", "scraping"},
	{"html", "webpage", "website", "site", "homepage", "webpages", "websites"},
	{"delete", "deletion", "remove", "removal", "erase", "drop", "purge", "wipe", "rm", "unlink", "del"},
	{"create", "creation", "make", "add", "generate", "construct", "scaffold", "autogenerate"},
	{"fix", "repair", "resolve", "debug", "patch", "troubleshoot", "solve"},
	{"error", "errors", "exception", "failure", "fail", "bug", "crash", "fault", "panic", "broken"},
	{"test", "spec", "unittest", "unittests", "testcase", "testcases"},
	{"config", "configuration", "configure", "settings", "conf", "cfg", "preferences"},
	{"function", "method", "func", "fn", "procedure", "routine"},
	{"directory", "directories", "folder", "dir"},
	{"run", "execute", "execution", "launch", "invoke", "exec"},
	{"update", "modify", "modification", "change", "edit", "alter", "tweak"},
	{"read", "load", "import", "ingest", "poll"},
	{"write", "save", "persist", "dump"},
	{"find", "search", "locate", "lookup", "grep"},
	{"list", "enumerate", "ls"},
	{"rename", "mv"},
	{"copy", "duplicate", "clone", "cp"},
	{"database", "db"},
	{"repository", "repo"},
	{"authentication", "authenticate", "auth", "login", "signin", "logon", "sso", "oauth"},
	{"convert", "conversion", "transform", "transformation", "migrate", "migration", "porting", "replace", "replacement", "swap", "move"},
	{"documentation", "docs", "doc"},
	{"dependency", "dependencies", "deps", "dep"},
	{"library", "libraries", "lib"},
	{"package", "pkg"},
	{"image", "picture", "photo", "img"},
	{"optimize", "optimise", "optimization", "optimisation", "speedup", "perf", "performance", "faster"},
	{"validate", "validation", "verify", "verification", "check"},
	{"argument", "arg", "args", "parameter", "param", "params"},
	{"environment", "env"},
	{"message", "msg"},
	{"command", "cmd"},
	{"application", "app"},
	{"variable", "var"},
	{"response", "resp", "reply"},
	{"request", "req"},
	{"kubernetes", "k8s"},
	{"javascript", "js", "node", "nodejs"},
	{"typescript", "ts"},
	{"python", "py"},
	{"parse", "parser", "parsing"},
	{"log", "logger", "logging"},
	{"extract", "unzip", "decompress", "unpack"},
	{"compress", "zip"},
	{"url", "uri", "link"},
	{"timeout", "deadline"},
	{"upgrade", "bump"},
	{"big", "large", "huge"},
	{"pullrequest", "pr", "mr"},
}

// synonymPhrases map two-word phrases (by the stems of their words) to a
// canonical term. They are matched before stopwords are dropped, so "speed
// up" and "look up" are seen whole.
var synonymPhrases = [][3]string{
	{"web", "page", "html"},
	{"web", "site", "html"},
	{"home", "page", "html"},
	{"unit", "test", "test"},
	{"look", "up", "find"},
	{"speed", "up", "optimize"},
	{"sign", "in", "authentication"},
	{"pull", "request", "pullrequest"},
	{"merge", "request", "pullrequest"},
	{"time", "out", "timeout"},
	{"clean", "up", "delete"},
}

// commonWords are words of almost every programming task ("write",
// "fix", "file"). A workspace of a few solutions cannot tell that they are
// common, so idf counts each as present in a share of the prior documents
// (see searcher.idf); a large workspace's own counts outweigh the prior.
var commonWords = []string{
	"write", "create", "implement", "build", "fix", "update", "improve",
	"refactor", "run", "handle", "support", "work", "help", "file", "data",
	"code", "function", "script", "application", "project", "program",
	"feature", "issue", "problem", "tool", "value", "type", "simple", "basic",
	"small",
}

var (
	synonyms    = map[string]string{}    // stem -> canonical term
	phrases     = map[[2]string]string{} // stems of two words -> canonical term
	triples     = map[[3]string]string{} // stems of three words -> canonical term
	commonTerms = map[string]bool{}      // index terms of commonWords
)

func init() {
	for _, g := range append(synonymGroups[:len(synonymGroups):len(synonymGroups)], vocabGroups...) {
		canon := stemWord(g[0])
		for _, w := range g {
			synonyms[stemWord(w)] = canon
		}
	}
	for _, p := range append(synonymPhrases[:len(synonymPhrases):len(synonymPhrases)], vocabPhrases...) {
		canon := stemWord(p[2])
		if c, ok := synonyms[canon]; ok {
			canon = c
		}
		phrases[[2]string{stemWord(p[0]), stemWord(p[1])}] = canon
	}
	for _, p := range vocabTriples {
		canon := stemWord(p[3])
		if c, ok := synonyms[canon]; ok {
			canon = c
		}
		triples[[3]string{stemWord(p[0]), stemWord(p[1]), stemWord(p[2])}] = canon
	}
	for _, w := range commonWords {
		t := stemWord(w)
		if c, ok := synonyms[t]; ok {
			t = c
		}
		commonTerms[t] = true
	}
	initVocab()
}

// isCJK reports whether r belongs to a script written without spaces
// between words; such runs are indexed as character bigrams.
func isCJK(r rune) bool {
	return r >= 0x2E80 && unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// splitWords cuts text (at most maxRunes of it) into lowercase words: runs
// of letters, digits and combining marks, split at identifier boundaries
// (parseConfig, HTTPServer, parse_config) and where CJK and other scripts
// meet. fn receives each word and whether it is CJK. A run of ASCII is
// cut by its bytes (splitASCII), any other by its runes (splitRunes), the
// same way.
func splitWords(text string, maxRunes int, fn func(w string, cjk bool)) {
	splitRuns(text, maxRunes, func(run string, ascii bool) {
		if ascii {
			splitASCII(run, fn)
		} else {
			splitRunes([]rune(run), fn)
		}
	})
}

// splitRuns calls fn with each run of word runes in text (at most
// maxRunes of it), and whether the run is all ASCII.
func splitRuns(text string, maxRunes int, fn func(run string, ascii bool)) {
	n, start, ascii, end := 0, -1, true, len(text)
	for i, r := range text {
		if n >= maxRunes {
			end = i
			break
		}
		n++
		if r < utf8.RuneSelf {
			if asciiWord[r] {
				if start < 0 {
					start, ascii = i, true
				}
				continue
			}
		} else if isWordRune(r) {
			if start < 0 {
				start = i
			}
			ascii = false
			continue
		}
		if start >= 0 {
			fn(text[start:i], ascii)
			start = -1
		}
	}
	if start >= 0 {
		fn(text[start:end], ascii)
	}
}

// asciiWord says which ASCII bytes are word runes: letters and digits.
var asciiWord = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	return t
}()

// splitRunes cuts a run of word runes into words (see splitWords).
func splitRunes(run []rune, fn func(w string, cjk bool)) {
	emit := func(rs []rune) {
		if len(rs) == 0 {
			return
		}
		var b strings.Builder
		for _, r := range rs {
			b.WriteRune(unicode.ToLower(r))
		}
		fn(b.String(), isCJK(rs[0]))
	}
	if len(run) > 2 && len(run) <= maxWholeWord && camelCased(run) && wholeWords[strings.ToLower(string(run))] {
		emit(run) // a name of the vocabulary: PostgreSQL, GitHub, JavaScript
		return
	}
	start := 0
	for i := 1; i < len(run); i++ {
		prev, cur := run[i-1], run[i]
		cut := isCJK(prev) != isCJK(cur) ||
			unicode.IsLower(prev) && unicode.IsUpper(cur) ||
			unicode.IsDigit(prev) && unicode.IsUpper(cur) ||
			unicode.IsUpper(prev) && unicode.IsUpper(cur) && i+1 < len(run) && unicode.IsLower(run[i+1])
		if cut {
			emit(run[start:i])
			start = i
		}
	}
	emit(run[start:])
}

// splitASCII is splitRunes for a run of ASCII letters and digits, read
// by its bytes.
func splitASCII(run string, fn func(w string, cjk bool)) {
	emit := func(w string) {
		if w == "" {
			return
		}
		var b strings.Builder
		b.Grow(len(w))
		for i := 0; i < len(w); i++ {
			c := w[i]
			if isUpperASCII(c) {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
		}
		fn(b.String(), false)
	}
	if len(run) > 2 && len(run) <= maxWholeWord && camelCasedASCII(run) {
		var lower [maxWholeWord]byte
		for i := 0; i < len(run); i++ {
			c := run[i]
			if isUpperASCII(c) {
				c += 'a' - 'A'
			}
			lower[i] = c
		}
		if wholeWords[string(lower[:len(run)])] {
			emit(run) // a name of the vocabulary: PostgreSQL, GitHub, JavaScript
			return
		}
	}
	start := 0
	for i := 1; i < len(run); i++ {
		prev, cur := run[i-1], run[i]
		cut := isUpperASCII(cur) && (isLowerASCII(prev) || '0' <= prev && prev <= '9' ||
			isUpperASCII(prev) && i+1 < len(run) && isLowerASCII(run[i+1]))
		if cut {
			emit(run[start:i])
			start = i
		}
	}
	emit(run[start:])
}

func isUpperASCII(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLowerASCII(c byte) bool { return 'a' <= c && c <= 'z' }

// maxWholeWord is the longest word of the vocabulary kept whole when
// written in camel case.
const maxWholeWord = 16

// wholeWords are the words of the vocabulary (vocab.go, the synonym
// groups, the tools) that splitWords keeps whole when they are written in
// camel case: "JavaScript" is one word, not "java" and "script".
var wholeWords = map[string]bool{}

// camelCased reports whether a run of word runes mixes cases past its
// first rune (PostgreSQL, OTel, SQLite): a run splitWords may cut.
func camelCased(run []rune) bool {
	upper, lower := false, false
	for i, r := range run {
		if i > 0 && unicode.IsUpper(r) {
			upper = true
		}
		lower = lower || unicode.IsLower(r)
	}
	return upper && lower
}

// camelCasedASCII is camelCased for a run of ASCII.
func camelCasedASCII(run string) bool {
	upper, lower := false, false
	for i := 0; i < len(run); i++ {
		upper = upper || i > 0 && isUpperASCII(run[i])
		lower = lower || isLowerASCII(run[i])
	}
	return upper && lower
}

// stemWord reduces a lowercase word to its index form: the snowball English
// stem for ASCII words, the first few runes for words of other alphabets (a
// language-neutral truncation stemmer), the word itself when it holds digits.
func stemWord(w string) string {
	ascii, letters := true, true
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		if c < 'a' || c > 'z' {
			letters = false
		}
	}
	if ascii {
		if letters && len(w) > 2 {
			return englishStem(w)
		}
		return w
	}
	n := 0
	for i, r := range w {
		if unicode.IsDigit(r) {
			return w
		}
		if n == truncStemRunes {
			return w[:i]
		}
		n++
	}
	return w
}

// stemCache memoises English stems (the stemmer allocates on every call);
// it stops growing at maxStemCache words.
var (
	stemCache     sync.Map // string -> string
	stemCacheSize atomic.Int64
)

const maxStemCache = 100000

func englishStem(w string) string {
	if s, ok := stemCache.Load(w); ok {
		return s.(string)
	}
	b := americanSpelling(w)
	if v, ok := irregular[w]; ok {
		b = v
	}
	s := english.Stem(b, true)
	if v, ok := agentStems[s]; ok {
		s = v
	}
	if v, ok := spelledOut[w]; ok {
		s = v
	}
	if stemCacheSize.Load() < maxStemCache {
		if _, loaded := stemCache.LoadOrStore(w, s); !loaded {
			stemCacheSize.Add(1)
		}
	}
	return s
}

type word struct {
	text string // lowercase
	stem string
	cjk  bool
}

// analyzed is the index form of a text.
type analyzed struct {
	terms []string // index terms in text order, repeats kept
	norm  string   // lowercase content words joined by spaces (goal only)
	lead  lead     // the main action (goal only)
	tools []toolUse
	// implied are the tools words imply as written (see writtenImplies).
	implied []string
	// instead are the terms of what the text says it is not, after
	// "instead of" or "rather than", that it names nowhere else (see
	// insteadOf in thing.go).
	instead []string
}

// analyze tokenises text into index terms: words are split, lowercased,
// stemmed, stopwords dropped, synonyms and phrases mapped to canonical
// terms; CJK runs become overlapping character bigrams. It also returns
// the content words joined by spaces, the text cut into trigrams, and the
// main action read from the leading phrase.
func analyze(text string, maxRunes int) analyzed {
	var ws []word
	splitWords(text, maxRunes, func(w string, cjk bool) {
		s := w
		if !cjk {
			s = stemWord(w)
		}
		ws = append(ws, word{text: w, stem: s, cjk: cjk})
	})
	var a analyzed
	var ls leadScanner
	// insteadLeft counts the content words still to read after "instead
	// of" or "rather than"; insteadAt is where their terms start.
	insteadLeft, insteadAt := 0, 0
	// condLeft counts the content words still read as a condition after
	// "when" or "if" (see lead.onFailure).
	condLeft := 0
	onFailure := false
	// slot is the slot of the phrase read (see slotWords), 0 outside
	// one; slotLeft counts the content words it may still take.
	var slot uint8
	slotLeft := 0
	var slots []slotTerm
	inSlot := func(term string) {
		if slot != 0 && slotLeft > 0 && len(slots) < maxSlotTerms {
			slots = append(slots, slotTerm{term: term, slot: slot})
			slotLeft--
		}
	}
	var quals uint32
	var norm strings.Builder
	addNorm := func(w string) {
		if norm.Len() > 0 {
			norm.WriteByte(' ')
		}
		norm.WriteString(w)
	}
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if w.cjk {
			ls.cjk()
			addNorm(w.text)
			rs := []rune(w.text)
			if len(rs) == 1 {
				a.terms = append(a.terms, w.text)
				continue
			}
			for j := 0; j+1 < len(rs); j++ {
				a.terms = append(a.terms, string(rs[j:j+2]))
			}
			continue
		}
		if isInstead(ws, i) {
			// "Instead of" and "rather than" end the phrase before them
			// and say nothing of the task: what follows is what the task
			// is not.
			ls.stop(w.text)
			slot = 0
			insteadLeft, insteadAt = maxInsteadWords, len(a.terms)
			i++
			continue
		}
		if x, ok := writtenImplies[w.text]; ok && !slices.Contains(a.implied, x) {
			a.implied = append(a.implied, x)
		}
		// phrase takes the n words from i as the one term c.
		phrase := func(c string, n int) {
			for _, p := range ws[i : i+n] {
				addNorm(p.text)
			}
			a.terms = append(a.terms, c)
			a.addTool(c, ls.role())
			quals = addQual(quals, c, true)
			ls.content(c, c, c)
			inSlot(c)
			i += n - 1
		}
		if i+2 < len(ws) && !ws[i+1].cjk && !ws[i+2].cjk {
			if c, ok := triples[[3]string{w.stem, ws[i+1].stem, ws[i+2].stem}]; ok {
				phrase(c, 3)
				continue
			}
		}
		if i+1 < len(ws) && !ws[i+1].cjk {
			if c, ok := phrases[[2]string{w.stem, ws[i+1].stem}]; ok {
				phrase(c, 2)
				continue
			}
		}
		if isStopword(w.text) || utf8.RuneCountInString(w.text) == 1 && !unicode.IsDigit([]rune(w.text)[0]) || goVerb(ws, i) {
			ls.stop(w.text)
			if g, ok := slotWords[w.text]; ok {
				slot, slotLeft = g, maxSlotWords
			} else if !leadSkip[w.text] {
				slot = 0
			}
			if conditionWords[w.text] {
				condLeft = maxConditionWords
			}
			if insteadLeft > 0 && !leadSkip[w.text] {
				a.instead = append(a.instead, a.terms[insteadAt:]...)
				insteadLeft = 0
			}
			continue
		}
		ls.outcome |= outcomeWords[w.text]
		if condLeft > 0 {
			condLeft--
			onFailure = onFailure || outcomeWords[w.text] == outcomeFailure
		}
		addNorm(w.text)
		term := w.stem
		if c, ok := synonym(w.stem); ok {
			term = c
		}
		a.terms = append(a.terms, term)
		a.addTool(term, ls.role())
		quals = addQual(quals, w.text, false)
		ls.content(w.text, w.stem, term)
		inSlot(term)
		if insteadLeft > 0 {
			if insteadLeft--; insteadLeft == 0 {
				a.instead = append(a.instead, a.terms[insteadAt:]...)
			}
		}
	}
	if insteadLeft > 0 {
		a.instead = append(a.instead, a.terms[insteadAt:]...)
	}
	a.instead = notElsewhere(a.terms, a.instead)
	a.norm = norm.String()
	a.lead = ls.result()
	a.lead.onFailure = onFailure && a.lead.verb != repairVerb
	a.lead.slots = slots
	a.lead.quals = quals
	a.implyTools()
	return a
}

// goVerb reports whether ws[i] is the verb "go" of "go to definition" or
// "go to the settings page", not the Go language: "go" followed by "to"
// and not after "from" ("port the service from Go to Rust").
func goVerb(ws []word, i int) bool {
	return ws[i].text == "go" && i+1 < len(ws) && ws[i+1].text == "to" && (i == 0 || ws[i-1].text != "from")
}

// trigrams returns the sorted, distinct hashes of the character trigrams of
// norm (padded with a space at each end), at most maxTrigramRunes runes of it.
func trigrams(norm string) []uint32 {
	if norm == "" {
		return nil
	}
	rs := make([]rune, 0, len(norm)+2)
	rs = append(rs, ' ')
	for _, r := range norm {
		if len(rs) > maxTrigramRunes {
			break
		}
		rs = append(rs, r)
	}
	rs = append(rs, ' ')
	out := make([]uint32, 0, len(rs))
	for i := 0; i+2 < len(rs); i++ {
		out = append(out, triHash(rs[i], rs[i+1], rs[i+2]))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func triHash(a, b, c rune) uint32 {
	x := uint64(a)<<42 | uint64(b)<<21 | uint64(c)
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return uint32(x)
}

// dice returns the Dice coefficient of two sorted sets.
func dice(a, b []uint32) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	return 2 * float64(intersect(a, b)) / float64(len(a)+len(b))
}

func intersect(a, b []uint32) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			n++
			i++
			j++
		}
	}
	return n
}

// maxInsteadWords bounds the content words read after "instead of".
const maxInsteadWords = 4

// isInstead reports whether ws[i] opens what a text says it is not:
// "instead" before "of", "rather" before "than".
func isInstead(ws []word, i int) bool {
	if i+1 >= len(ws) || ws[i+1].cjk {
		return false
	}
	return ws[i].text == "instead" && ws[i+1].text == "of" || ws[i].text == "rather" && ws[i+1].text == "than"
}

// notElsewhere returns the distinct terms of instead (a span of terms)
// that terms holds no more often than instead does: the words a text
// names only as what it is not.
func notElsewhere(terms, instead []string) []string {
	if len(instead) == 0 {
		return nil
	}
	out := instead[:0:0]
	for _, t := range instead {
		n, m := 0, 0
		for _, u := range terms {
			if u == t {
				n++
			}
		}
		for _, u := range instead {
			if u == t {
				m++
			}
		}
		if n <= m && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// conditionWords open the condition of a task ("when the sync fails",
// "if the upload fails"), read for maxConditionWords content words;
// stopwords, as written.
var conditionWords = map[string]bool{"when": true, "if": true}

const maxConditionWords = 6

// Slots: what a phrase after a preposition says of a task. "In CI" and
// "in a pre-commit hook" fill one slot (where), "over HTTPS" and "over
// MLLP" another (by what means), "to STL" and "to STEP" another (into
// what), each in two ways (see otherSlot in thing.go).
const (
	slotWhere uint8 = 1 + iota
	slotMeans
	slotTarget
	slotSource
	slotPurpose
)

// slotWords open a slot, as written: stopwords, which end the phrase
// before them.
var slotWords = map[string]uint8{
	"in": slotWhere, "on": slotWhere, "at": slotWhere,
	"using": slotMeans, "via": slotMeans, "through": slotMeans, "over": slotMeans,
	"to": slotTarget, "into": slotTarget, "onto": slotTarget,
	"from": slotSource,
	"for":  slotPurpose,
}

// slotTerm is a content word of a slot's phrase: its index term and its
// slot.
type slotTerm struct {
	term string
	slot uint8
}

// Bounds of slots: the content words of one phrase, and of a text.
const (
	maxSlotWords = 4
	maxSlotTerms = 16
)
