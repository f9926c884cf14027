package recall

// Direction: a task whose main action is the opposite of a stored one's
// (export for import, a CSV writer for a CSV parser, removing hooks for
// adding them) shares most of its words with it, yet the stored approach
// is the wrong advice. The main action is read from the goal's leading
// phrase (leadScanner); two goals are opposed when, in one family of the
// table below, each leans to a different side and they act on the same
// thing (see searcher.opposes).

// directionTable lists the families of opposite actions: the words on
// each side, as written (agent nouns such as "parser" or "producer" fold
// into their verb). A word may sit in several families ("generate" both
// writes data and creates something). In a flow family the first side
// takes something in and the other puts something out, so that "from" and
// "to" tell which way the data goes. At most maxFamilies families.
var directionTable = []struct {
	family     string
	flow       bool
	one, other []string
}{
	{"data", true,
		[]string{"read", "parse", "import", "deserialize", "decode", "unmarshal", "ingest", "input"},
		[]string{"write", "save", "dump", "persist", "export", "serialize", "encode", "marshal", "generate", "output"}},
	{"messages", true,
		[]string{"consume", "receive", "subscribe"},
		[]string{"produce", "publish", "send", "emit"}},
	{"transfer", true,
		[]string{"download", "pull"},
		[]string{"upload", "push"}},
	{"existence", false,
		[]string{"add", "create", "insert", "install", "implement", "introduce", "scaffold", "generate"},
		[]string{"remove", "delete", "drop", "erase", "purge", "wipe", "rm", "del", "unlink", "uninstall"}},
	{"switch", false,
		[]string{"enable", "activate"},
		[]string{"disable", "deactivate"}},
	{"compression", false,
		[]string{"compress", "zip"},
		[]string{"decompress", "unzip", "unpack", "gunzip"}},
	{"encryption", false,
		[]string{"encrypt"},
		[]string{"decrypt"}},
	{"lifecycle", false,
		[]string{"start", "launch", "boot"},
		[]string{"stop", "kill", "halt", "terminate", "shutdown", "shut"}},
	{"lock", false,
		[]string{"lock"},
		[]string{"unlock"}},
	{"level", false,
		[]string{"upgrade", "bump", "increase", "increment"},
		[]string{"downgrade", "decrease", "decrement", "reduce"}},
	{"attachment", false,
		[]string{"attach", "mount", "connect", "register", "subscribe"},
		[]string{"detach", "unmount", "disconnect", "unregister", "deregister", "unsubscribe"}},
	{"visibility", false,
		[]string{"show", "expand"},
		[]string{"hide", "collapse"}},
	{"session", false,
		[]string{"login", "signin"},
		[]string{"logout", "signout"}},
}

// Roles of a word of the goal's head, kept in docTerm.lead and leadObj
// with the families of the word's own direction in the low bits.
const (
	leadObject uint16 = 1 << 15 // leading phrase, outside the verb slot
	leadFrom   uint16 = 1 << 14 // a "from" phrase after it
	leadTo     uint16 = 1 << 13 // a "to", "into" or "as" phrase after it
	famMask           = leadTo - 1

	// maxFamilies bounds the table: a goal's direction is two bits per
	// family in a uint32, a word's families one bit each under leadTo.
	maxFamilies = 13

	maxLeadWords = 6 // content words of a leading phrase
	maxTailWords = 8 // content words of the "from" and "to" phrases
	maxTail      = 3 // phrases read after the leading one
)

// authoringVerbs say that something is being built. With an agent noun in
// the same phrase ("write a CSV parser", "implement a Kafka consumer") the
// agent noun gives the direction, and the phrase adds something.
var authoringVerbs = map[string]bool{}

var authoringWords = []string{
	"write", "implement", "create", "add", "build", "make", "develop", "code",
	"generate", "introduce", "scaffold", "design",
}

// leadSkip are the stopwords a phrase runs through; every other stopword
// ends it ("parse users from CSV": the leading phrase is "parse users").
var leadSkip = map[string]bool{
	"a": true, "an": true, "the": true, "all": true, "any": true, "each": true,
	"few": true, "more": true, "most": true, "my": true, "our": true,
	"your": true, "his": true, "her": true, "its": true, "their": true,
	"some": true, "such": true, "own": true, "same": true, "other": true,
	"these": true, "those": true, "this": true, "very": true, "only": true,
	"just": true, "too": true, "s": true, "new": true, "also": true,
	"please": true, "properly": true, "correctly": true, "currently": true,
}

// negations before the main action make its direction unknown.
var negations = map[string]bool{"not": true, "no": true, "nor": true, "don": true, "never": true, "t": true}

var (
	// directionStems maps a stem to its sides: bit 2f for the first side of
	// family f, bit 2f+1 for the other.
	directionStems = map[string]uint32{}
	// directionWords holds the table's words as written.
	directionWords = map[string]bool{}
	// flowFamilies has a bit for each flow family.
	flowFamilies uint16
	// existenceAdds is the side "add" of the family "existence".
	existenceAdds uint32
	// flowSides has both sides of each flow family.
	flowSides uint32
)

func init() {
	if len(directionTable) > maxFamilies {
		panic("recall: more than maxFamilies direction families")
	}
	for f, fam := range directionTable {
		if fam.flow {
			flowFamilies |= 1 << f
			flowSides |= 3 << (2 * f)
		}
		for side, words := range [][]string{fam.one, fam.other} {
			for _, w := range words {
				directionWords[w] = true
				directionStems[stemWord(w)] |= 1 << (2*f + side)
			}
		}
	}
	for _, w := range authoringWords {
		authoringVerbs[stemWord(w)] = true
	}
	existenceAdds = directionStems[stemWord("add")]
}

// families returns the families a direction mask touches, one bit each.
func families(dir uint32) uint16 {
	var m uint16
	for f := range directionTable {
		if dir>>(2*f)&3 != 0 {
			m |= 1 << f
		}
	}
	return m
}

// opposedFamilies returns the families in which a and b each lean to one
// side, not the same one.
func opposedFamilies(a, b uint32) uint16 {
	var m uint16
	for f := range directionTable {
		x, y := a>>(2*f)&3, b>>(2*f)&3
		if x != 0 && y != 0 && x != 3 && y != 3 && x != y {
			m |= 1 << f
		}
	}
	return m
}

// isAgentNoun reports whether the lowercase word w, whose index stem is
// stem, names a doer of the action stem (parser, consumers, compressor)
// rather than the action itself.
func isAgentNoun(w, stem string) bool {
	if len(w) > 3 && w[len(w)-1] == 's' {
		w = w[:len(w)-1]
	}
	if len(w) < 5 || w[len(w)-2:] != "er" && w[len(w)-2:] != "or" {
		return false
	}
	return stem != w && !directionWords[w]
}

// leadObj is a content word of the head of a goal: its index term, its
// role and the families of its own direction.
type leadObj struct {
	term  string
	flags uint16
}

// lead is the main action of a goal and the words around it.
type lead struct {
	dir  uint32 // two bits per family (see directionStems)
	objs []leadObj
	// verb is the index term of the phrase's first content word, the
	// action when it names one (kind; see vocab.go).
	verb string
	kind uint8
	// verb2 is the term of a second verb joined to the first ("find and
	// remove"), or "".
	verb2 string
	// head is the term of the leading phrase's last word past the verb
	// slot, or "": in "add an options flow" the head is "flow", what
	// the words before it modify (see otherFeature).
	head string
	// tailDir is the direction of the words in the phrases after the
	// leading one (see leadScanner.tailDir).
	tailDir uint32
	// outcome is the path of the task: outcomeSuccess, outcomeFailure,
	// both or neither (see outcomeWords).
	outcome uint8
	// onFailure says that the task is done when something fails: a
	// failure outcome in its condition ("email the owner when the sync
	// fails"); never for a repair.
	onFailure bool
	// slots are the words of the phrases after prepositions (see
	// slotWords), in text order.
	slots []slotTerm
	// quals are the qualifiers of the object the text names (see
	// qualifiers.go).
	quals uint32
}

// leadScanner reads the head of a text, word by word. The leading phrase
// starts at the first content word (stopwords and fillers before it
// skipped), runs through articles and the like, and ends at any other
// stopword ("for", "to", "from", "and", "with", "that"...), at its sixth
// content word or at a CJK word. "Find and remove": a lone first word may
// be joined by a second verb; "a producer for order events": after an
// agent noun, the phrase runs on past one "for" or "of". The verb slot
// (the first word, and the joined one) gives the action; the other words
// are what it acts on, and give directions too ("fix the CSV export").
// The few phrases after it are read for "from" (the source) and "to",
// "into" or "as" (the target).
type leadScanner struct {
	started  bool
	done     bool
	abstain  bool // a negation came first
	joinNext bool // "and"/"or" after a lone first word
	extended bool // the phrase ran on past "for" or "of"
	words    int

	tail      bool   // past the leading phrase
	tailRole  uint16 // leadFrom, leadTo or 0 for the phrase read
	tails     int    // phrases begun after the leading one
	tailWords int

	agent bool // an agent noun with a direction was seen
	// tailDir is the direction of the content words of the phrases after
	// the leading one: what the action is done to or for ("add a
	// progress bar to the file download", "add retries to the webhook
	// sender").
	tailDir uint32
	sawFrom bool // a "from" phrase was read
	// outcome collects the outcome words of the whole text (analyze
	// feeds them; see outcomeWords).
	outcome   uint8
	verbDir   uint32 // sides from words other than agent nouns
	authorDir uint32 // sides from authoring verbs
	agentDir  uint32 // sides from agent nouns
	objs      []leadObj
	verb      string
	verb2     string
	head      string // see lead.head
	light     bool   // the verb is a light verb (see lightVerbs)
	// substitute: the verb puts one thing in place of another ("replace
	// moment with date-fns"): its object is the source, a "with", "by"
	// or "for" phrase the target.
	substitute bool
}

// stop feeds a stopword, a single letter or another skipped word.
func (l *leadScanner) stop(text string) {
	switch {
	case l.done:
	case !l.started:
		if negations[text] {
			l.abstain, l.done = true, true
		}
	case leadSkip[text] || len(text) == 1 && text != "t":
	case l.words == 1 && !l.tail && questionWords[text]:
		// "Find which zone contains the point": the object follows.
	case l.tail:
		l.nextTail(text)
	case (text == "and" || text == "or") && l.words == 1:
		l.joinNext = true
	case (text == "for" || text == "of") && l.agent && !l.extended:
		l.extended = true
	default:
		l.tail = true
		l.nextTail(text)
	}
}

// questionWords, right after the verb, open its object ("find which
// queries block", "show what changed") rather than end the phrase.
var questionWords = map[string]bool{"which": true, "what": true, "whose": true}

// nextTail begins the phrase after the boundary word text.
func (l *leadScanner) nextTail(text string) {
	l.tails++
	if l.tails > maxTail {
		l.done = true
		return
	}
	switch text {
	case "from", "off":
		l.tailRole = leadFrom
		l.sawFrom = true
	case "to", "into", "onto", "as":
		l.tailRole = leadTo
	case "with", "by", "for":
		l.tailRole = 0
		if l.substitute {
			l.tailRole = leadTo
		}
	default:
		l.tailRole = 0
	}
}

// content feeds a content word: its lowercase text, its stem before
// synonyms and its index term. A phrase ("clean up") comes as its
// canonical term in all three.
func (l *leadScanner) content(text, stem, term string) {
	if l.done {
		return
	}
	if !l.started && negations[text] {
		l.abstain, l.done = true, true
		return
	}
	l.started = true
	dir := directionStems[stem]
	if l.tail {
		if len(text) <= 4 || text[len(text)-2:] != "ed" {
			l.tailDir |= dir
		}
		if l.tailRole != 0 {
			l.objs = append(l.objs, leadObj{term: term, flags: l.tailRole | families(dir)})
		}
		l.tailWords++
		l.done = l.tailWords == maxTailWords
		return
	}
	verbSlot := l.words == 0 || l.joinNext
	if l.words == 0 {
		l.verb = term
		l.light = lightVerbs[text]
		l.substitute = substitutionVerbs[text]
	} else if verbSlot {
		l.verb2 = term
	}
	l.joinNext = false
	l.words++
	if !verbSlot && len(text) > 4 && text[len(text)-2:] == "ed" {
		dir = 0 // a participle describes the object: "the gzipped logs"
	}
	switch {
	case dir == 0:
	case isAgentNoun(text, stem):
		l.agent = true
		l.agentDir |= dir
	case authoringVerbs[stem]:
		l.authorDir |= dir
	default:
		l.verbDir |= dir
	}
	if !verbSlot {
		// What the leading phrase acts on leans like the later phrases
		// do: "show the upload progress" and "show a progress bar while
		// the CLI downloads files".
		l.tailDir |= dir & flowSides
		flags := leadObject | families(dir)
		if l.substitute {
			flags |= leadFrom
		}
		l.objs = append(l.objs, leadObj{term: term, flags: flags})
		l.head = term
	}
	if l.words == maxLeadWords {
		l.tail = true
		l.nextTail("")
	}
}

// cjk feeds a CJK word: directions are read from English words only.
func (l *leadScanner) cjk() {
	if l.started {
		l.done = true
	}
}

// result returns the main action. With an agent noun, an authoring verb
// only says that something is added ("write a Kafka consumer" neither
// writes data nor consumes less for it), and in each family the agent
// noun's side wins over the other words' ("write a parser for the export"
// reads data). Both sides at once ("read and write") lean nowhere.
func (l *leadScanner) result() lead {
	if l.abstain {
		return lead{}
	}
	verb, kind := l.verb, actionKinds[l.verb]
	if l.light {
		verb, kind = "", actNone // "make" says nothing of the task, not even as a word of it
	}
	dir := l.verbDir
	if !l.agent {
		dir |= l.authorDir
	} else {
		if l.authorDir != 0 {
			dir |= existenceAdds
		}
		for f := range directionTable {
			if a := l.agentDir >> (2 * f) & 3; a != 0 {
				dir = dir&^(3<<(2*f)) | a<<(2*f)
			}
		}
	}
	if conversionVerbs[verb] && !l.substitute && !l.sawFrom {
		// "Convert XML files to JSON": without a "from" phrase, what is
		// converted is the source.
		for i := range l.objs {
			if l.objs[i].flags&leadObject != 0 {
				l.objs[i].flags |= leadFrom
			}
		}
	}
	outcome := l.outcome
	if verb == repairVerb {
		// A repair names the failure it ends or the success it brings
		// about: "fix the build that fails", "fix the build so it
		// succeeds" are one task.
		outcome = 0
	}
	return lead{dir: dir, objs: l.objs, verb: verb, kind: kind, verb2: l.verb2, head: l.head, tailDir: l.tailDir, outcome: outcome}
}

// conversionVerbs turn their object into something else: with a "to"
// phrase and no "from" phrase, the object is the source. Index terms.
var conversionVerbs = map[string]bool{}

// repairVerb is the index term of "fix" and its group.
var repairVerb string

// role returns the role of the next content word: leadObject in the
// leading phrase, leadFrom or leadTo in a "from" or "to" phrase after
// it, 0 elsewhere.
func (l *leadScanner) role() uint16 {
	switch {
	case l.done:
		return 0
	case !l.tail:
		return leadObject
	default:
		return l.tailRole
	}
}

// noTerm stands for a query word the workspace does not hold: it counts
// as a word, and matches none.
const noTerm = ^uint32(0)

// headWords are the words around the main actions of two goals, as term
// ids, without the words of the families they are opposed in.
type headWords struct {
	obj, from, to []uint32
}

func (h *headWords) add(id uint32, flags, opposed uint16) {
	if flags&famMask&opposed != 0 {
		return // "parser" against "writer": the action, not the thing
	}
	if flags&leadObject != 0 {
		h.obj = append(h.obj, id)
	}
	if flags&leadFrom != 0 {
		h.from = append(h.from, id)
	}
	if flags&leadTo != 0 {
		h.to = append(h.to, id)
	}
}

// flow returns what a goal takes from and what it puts to: taking in,
// "parse X into Y" takes X and puts Y; putting out, "serialize X to Y"
// takes X and puts Y, and "generate X from Y" takes Y and puts X.
func (h *headWords) flow(in bool) (src, dst []uint32) {
	switch {
	case in:
		return concat(h.obj, h.from), h.to
	case len(h.from) > 0:
		return h.from, concat(h.obj, h.to)
	default:
		return h.obj, h.to
	}
}

func concat(a, b []uint32) []uint32 {
	return append(append(make([]uint32, 0, len(a)+len(b)), a...), b...)
}

// meets reports whether a and b share a term.
func meets(a, b []uint32) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y && x != noTerm {
				return true
			}
		}
	}
	return false
}

// sameThing decides whether two goals whose actions are opposed in the
// families opposed, the first leaning to the first side of the lowest
// flow family among them when aIn, act on the same thing. In a flow
// family, the same source and the same target mean the same flow told
// from its other end ("generate a changelog from the commits", "parse the
// commits into a changelog"): not opposed; one's source being the other's
// target is the flow reversed ("serialize the orders to JSON",
// "deserialize JSON into orders"). Otherwise they act on the same thing
// when their leading phrases share a word, or one of them has none.
func sameThing(a, b *headWords, opposed uint16, aIn bool) bool {
	if opposed&flowFamilies != 0 {
		as, at := a.flow(aIn)
		bs, bt := b.flow(!aIn)
		if meets(as, bs) && meets(at, bt) {
			return false
		}
		if meets(as, bt) || meets(at, bs) {
			return true
		}
	}
	if len(a.obj) == 0 || len(b.obj) == 0 {
		return true
	}
	return meets(a.obj, b.obj)
}

// firstSide reports whether dir leans to the first side of the lowest
// flow family in opposed.
func firstSide(dir uint32, opposed uint16) bool {
	for f := range directionTable {
		if opposed&flowFamilies&(1<<f) != 0 {
			return dir>>(2*f)&3 == 1
		}
	}
	return false
}
