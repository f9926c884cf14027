package wire

import (
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// An agent sends its whole conversation on every turn: the body of turn
// n+1 is, byte for byte, the body of turn n up to the end of one of the
// elements of its conversation's array (Messages' "messages", Responses'
// "input"), followed by new elements. A [TurnMemo] remembers, per
// conversation, the latest turn: where each element ended, a sum of the
// body up to there, a sum of the bytes after the array, and what the
// format read (its state S, which keeps what it found up to the end of
// each element). A [Resume] is one request's use of it: when the body
// repeats the remembered bytes up to the end of element k, the format's
// scan jumps there and reads only what follows. The validity of the bytes
// skipped and everything read from them are as last time, because they
// are the same bytes.
//
// A conversation is named by the bytes of its body up to the end of its
// first user element (its head), with the tenant. The sum of every prefix
// starts with the tenant, so the sum at the end of the head is the name
// (see MemoSeed on collisions). Runs of one task share a name (a script or
// a CI job that starts an agent with one prompt, several at once or one
// after another): the memo keeps up to MaxBranches turns under a name,
// and a request resumes from the one its body repeats furthest, so each
// run reads only what is new in it.
//
// The memo is bounded in bytes: when a new turn takes it past its budget,
// the conversations used least recently are forgotten first. A
// conversation that falls out is read in full on its next turn, as is any
// body that changed an earlier element.
type TurnMemo[S any] struct {
	seed   MemoSeed
	budget int

	starts KnownStarts[Span]

	mu             sync.Mutex
	turns          map[uint64]*memoItem[S]
	newest, oldest *memoItem[S] // the order of use, newest first
	bytes          int          // the size of the turns held
}

// MaxBranches bounds the turns a memo keeps under one name: the latest
// turn of each run of the task, or of each branch an agent took back in
// its conversation, the oldest going first. Their bytes are bounded too,
// by a quarter of the memo's budget.
const MaxBranches = 64

// memoItem is one name's turns in a TurnMemo's order of use.
type memoItem[S any] struct {
	key uint64
	// turns are the name's turns, the newest first. A change makes a new
	// slice: a Resume reads the one it got without the lock.
	turns        []*Turn[S]
	size         int // of the turns
	newer, older *memoItem[S]
}

// Turn is one remembered turn. It is never modified once stored.
type Turn[S any] struct {
	// Elems are the elements of the conversation's array, in order.
	Elems []Elem
	// TailLen and TailSum are the length and the memo sum of the bytes
	// after the array.
	TailLen int
	TailSum uint64
	// Members are the top-level members after the array, in order (nil
	// when the memo did not read them; see TailMember).
	Members []TailMember
	// State is what the format read of the turn.
	State S

	// endsTaken says a request that resumed from the turn's end took
	// Elems' array to append its own elements to (see resumedEnds).
	endsTaken atomic.Bool
	size      int // what the memo counts for it, shared aside
	// shared is the turn's text its name's other turns may hold too (the
	// system text, resumed from turn to turn as one string): the memo
	// counts each such string once a name (see SharedTexts).
	shared string
	// common is how many first elements every turn remembered beside
	// this one, when it was remembered, shares with it (see put): Skip
	// follows them once for all.
	common int
}

// TailMember is one top-level member after a turn's array: the sum of
// its key, the length of its value, and the sum of the value seeded by
// the key's. When the bytes after the array change, those that did not
// are found member by member (Codex CLI orders the members of its
// client_metadata anew on every request, after 9 KB of tools that do not
// change): a value of the same bytes under the same key needs no check,
// and what the format read of it is as last time.
type TailMember struct {
	Key uint64
	Len int
	Sum uint64
}

// Elem is where one element of a conversation's array ends in its body,
// and the memo sum of the tenant and the body up to there (0 for the
// elements of the head, whose sums are not used).
type Elem struct {
	End int
	Sum uint64
}

// MaxElems bounds the elements of a turn a format remembers: a body of
// 32 MiB of "{}," would otherwise take gigabytes of positions. A longer
// array is read, not remembered.
const MaxElems = 10_000

// DefaultMemoBudget is the bytes a TurnMemo holds by default.
const DefaultMemoBudget = 32 << 20

// NewTurnMemo returns an empty memo that holds at most budget bytes of
// turns (DefaultMemoBudget when budget <= 0). A turn of more than a
// quarter of the budget is not remembered.
func NewTurnMemo[S any](budget int) *TurnMemo[S] {
	if budget <= 0 {
		budget = DefaultMemoBudget
	}
	return &TurnMemo[S]{seed: NewMemoSeed(), budget: budget, turns: make(map[uint64]*memoItem[S])}
}

// Bytes returns the bytes the memo holds, as the formats estimate them:
// its turns, and the starts of bodies it knows (see KnownStarts). A nil
// memo holds none.
func (m *TurnMemo[S]) Bytes() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes + m.starts.Bytes()
}

// Len returns the number of conversations the memo holds (names: the
// runs of one task count once).
func (m *TurnMemo[S]) Len() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.turns)
}

// get returns the turns remembered under key, the newest first (none:
// nil), and makes them the ones used most recently. The slice is never
// changed: the caller may keep it.
func (m *TurnMemo[S]) get(key uint64) []*Turn[S] {
	m.mu.Lock()
	defer m.mu.Unlock()
	it := m.turns[key]
	if it == nil {
		return nil
	}
	m.unlink(it)
	m.pushNewest(it)
	return it.turns
}

// forget drops the turns remembered under key, if any.
func (m *TurnMemo[S]) forget(key uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if it := m.turns[key]; it != nil {
		m.dropLocked(it)
	}
}

// dropLocked forgets it. m.mu must be held.
func (m *TurnMemo[S]) dropLocked(it *memoItem[S]) {
	m.unlink(it)
	m.bytes -= it.size
	delete(m.turns, it.key)
}

// MemoRef names a conversation in a TurnMemo, so that its turn can be
// forgotten from any goroutine, before the request that read it is
// forwarded or after (see Request.Forget). The zero MemoRef names none.
type MemoRef[S any] struct {
	memo   *TurnMemo[S]
	key    uint64
	forgot atomic.Bool
}

// Forget drops the conversation's remembered turns (of every run under
// its name), and keeps the request that f belongs to from remembering its
// own: the next turn is read whole.
func (f *MemoRef[S]) Forget() {
	f.forgot.Store(true)
	f.drop()
}

// Forgotten reports whether Forget was called: the request's turn is not
// to be remembered.
func (f *MemoRef[S]) Forgotten() bool { return f.forgot.Load() }

// Remembered is called once the request's turn was remembered: a Forget
// that came meanwhile drops it.
func (f *MemoRef[S]) Remembered() {
	if f.forgot.Load() {
		f.drop()
	}
}

func (f *MemoRef[S]) drop() {
	if f.memo != nil {
		f.memo.forget(f.key)
	}
}

// Refer makes f name r's conversation, once Name named it.
func (r *Resume[S]) Refer(f *MemoRef[S]) {
	if r.memo != nil && r.named {
		f.memo, f.key = r.memo, r.key
	}
}

// holds reports whether t is one of the turns remembered under key.
func (m *TurnMemo[S]) holds(key uint64, t *Turn[S]) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	it := m.turns[key]
	return it != nil && slices.Contains(it.turns, t)
}

// put remembers t, of size bytes, under key, as the newest of its turns.
// It forgets the turns under key that t repeats (a turn whose elements
// are the first of t's: whatever resumes from it resumes from t as far),
// replaced, a turn t continues but for its last element (see Remember),
// the oldest past MaxBranches or past a quarter of the budget, and the
// names used least recently past the budget. It reports whether it kept
// t.
func (m *TurnMemo[S]) put(key uint64, t, replaced *Turn[S], size int) bool {
	if size+len(t.shared) > m.budget/4 {
		return false
	}
	t.size = size
	m.mu.Lock()
	defer m.mu.Unlock()
	it := m.turns[key]
	if it == nil {
		it = &memoItem[S]{key: key}
		m.turns[key] = it
	} else {
		m.unlink(it)
	}
	turns := make([]*Turn[S], 1, min(len(it.turns)+1, MaxBranches))
	turns[0] = t
	var shared SharedTexts
	kept := size + shared.Size(t.shared)
	for _, o := range it.turns {
		if len(turns) == MaxBranches || o == replaced || o.prefixOf(t) {
			continue
		}
		n := o.size + shared.Peek(o.shared)
		if kept+n > m.budget/4 {
			continue
		}
		shared.Size(o.shared)
		turns = append(turns, o)
		kept += n
	}
	t.common = len(t.Elems)
	if len(turns) > 1 {
		// The turns kept are among those kept beside the newest before
		// t, which all share its first p.common elements: t shares with
		// each at least what it shares with both.
		p := it.turns[0]
		t.common = min(commonElems(t.Elems, p.Elems), p.common)
	}
	m.bytes += kept - it.size
	it.turns, it.size = turns, kept
	m.pushNewest(it)
	for m.bytes > m.budget && m.oldest != nil && m.oldest != it {
		m.dropLocked(m.oldest)
	}
	return true
}

// commonElems is how many first elements a and b share.
func commonElems(a, b []Elem) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// prefixOf reports whether t's elements are the first of u's, the same
// bytes (both are turns of one name: the same head).
func (t *Turn[S]) prefixOf(u *Turn[S]) bool {
	n := len(t.Elems)
	return n <= len(u.Elems) && (n == 0 || t.Elems[n-1] == u.Elems[n-1])
}

func (m *TurnMemo[S]) unlink(it *memoItem[S]) {
	if it.newer != nil {
		it.newer.older = it.older
	} else {
		m.newest = it.older
	}
	if it.older != nil {
		it.older.newer = it.newer
	} else {
		m.oldest = it.newer
	}
	it.newer, it.older = nil, nil
}

func (m *TurnMemo[S]) pushNewest(it *memoItem[S]) {
	it.older = m.newest
	if m.newest != nil {
		m.newest.newer = it
	}
	m.newest = it
	if m.oldest == nil {
		m.oldest = it
	}
}

// SharedTexts counts the memory of texts that several remembered turns
// may hold: each distinct string once. A text resumed from one turn to
// the next (the system text) is the same string in both, not a copy.
type SharedTexts struct {
	seen [4]string // the strings counted; past four, each is counted
	n    int
}

// Size returns the bytes t adds: its length the first time the string is
// seen, 0 after.
func (s *SharedTexts) Size(t string) int {
	n := s.Peek(t)
	if n > 0 && s.n < len(s.seen) {
		s.seen[s.n] = t
		s.n++
	}
	return n
}

// Peek returns what Size would, without counting t.
func (s *SharedTexts) Peek(t string) int {
	if t == "" {
		return 0
	}
	for _, u := range s.seen[:s.n] {
		if len(u) == len(t) && unsafe.StringData(u) == unsafe.StringData(t) {
			return 0
		}
	}
	return len(t)
}

// ElemsSize is the memory elems hold, for a format's estimate of a turn's
// size.
func ElemsSize(elems []Elem) int { return cap(elems) * int(unsafe.Sizeof(Elem{})) }

// Resume is one request's use of a TurnMemo: the conversation's name, the
// turn remembered for it, and from where the body was read. The zero
// Resume, or one whose memo is nil, remembers nothing.
type Resume[S any] struct {
	memo  *TurnMemo[S]
	key   uint64
	named bool
	// sum is the memo sum of the tenant and the body up to summed.
	sum    uint64
	summed int
	// branches are the turns remembered under the conversation's name,
	// the newest first.
	branches []*Turn[S]
	// Prior is the conversation's remembered turn, nil when none: the
	// one Skip resumed from, or the newest.
	Prior *Turn[S]
	// From is the first element read: the elements before it are
	// Prior's, skipped.
	From int
	// through is the last element body repeats of Prior, the head's
	// last when no later one (see Skip).
	through int
	// TailKnown says the bytes after the array are Prior's.
	TailKnown bool
	// tailSum is the memo sum of the bytes after the array, when Tail
	// summed them (tailSummed).
	tailSum    uint64
	tailSummed bool
	// members are the body's members after the array, when not
	// TailKnown (see member).
	members []TailMember
}

// PriorState is the state of the remembered turn, or S's zero value when
// there is none.
func (r *Resume[S]) PriorState() (s S) {
	if r.Prior != nil {
		s = r.Prior.State
	}
	return s
}

// NewResume returns a request's use of m (nil: none).
func NewResume[S any](m *TurnMemo[S]) Resume[S] { return Resume[S]{memo: m} }

// Name names the conversation by the tenant and body[:end], the end of its
// head (its first user element), cut where the elements before that one
// end (start: the sum of the bytes up to there, or 0; see MemoSeed.Name),
// and finds its remembered turn, if any.
func (r *Resume[S]) Name(tenant string, body []byte, cut, end int, start uint64) {
	if r.memo == nil || r.named {
		return
	}
	r.sum, r.summed = r.memo.seed.Name(tenant, body, cut, end, start), end
	r.key, r.named = r.sum, true
	r.branches = r.memo.get(r.key)
	if len(r.branches) > 0 {
		r.Prior = r.branches[0]
	}
}

// Skip is called once the head is read, with probe the index of its last
// element. Of the turns remembered under the name, it takes the newest
// when body repeats all of it, else the one body repeats furthest (the
// newest of those that go as far), which becomes Prior, and returns the
// last element after probe that body repeats of it byte for byte; -1 for
// none (Prior stays the newest). The scan goes on
// from its end (Prior.Elems[last].End), and From is last+1. Only an
// element that is an object is sure to end where it ended (a number could
// go on: "1" then "12"), so only such an element is returned.
//
// The turns are followed together, element by element: an element's
// bytes are summed once for all the turns it ends at the same place in,
// so many runs of one task cost about what one does.
func (r *Resume[S]) Skip(body []byte, probe int) int {
	var buf [8]*Turn[S]
	live := append(buf[:0], r.branches...)
	sum, pos := r.sum, r.summed
	var best *Turn[S]
	last := -1
	var at uint64 // sum at the end of element last
	i := probe + 1
	if len(live) > 1 {
		// Every turn has the newest one's first common elements (runs of
		// one task share a long start): those are followed once, and
		// where the body leaves them, it leaves every turn.
		p := live[0]
		for ; i < p.common; i++ {
			end := p.Elems[i].End
			if end > len(body) || end <= pos {
				live = nil
				break
			}
			if sum, pos = NextSum(sum, body[pos:end]), end; sum != p.Elems[i].Sum {
				live = nil
				break
			}
			if body[end-1] == '}' {
				best, last, at = p, i, sum
			}
		}
	}
	if len(live) > 1 {
		// The newest turn first, alone: an agent's next turn repeats its
		// last one whole, and then no other is looked at (each is an
		// array of its own to load). Where the body leaves it, the
		// others that went as far go on together from there: a sum
		// covers the body up to its element's end, so those are the ones
		// whose element before ends where the newest one's does with its
		// sum (a turn that left earlier would cost a sum of its own).
		p, from := live[0], i
		for ; i < len(p.Elems); i++ {
			end := p.Elems[i].End
			if end > len(body) || end <= pos {
				break
			}
			next := NextSum(sum, body[pos:end])
			if next != p.Elems[i].Sum {
				break
			}
			sum, pos = next, end
			if body[end-1] == '}' {
				best, last, at = p, i, sum
			}
		}
		switch {
		case i == len(p.Elems):
			live = nil
		case i == from:
			live = live[1:]
		default:
			n := 0
			for _, o := range live[1:] {
				if len(o.Elems) > i && o.Elems[i-1] == p.Elems[i-1] {
					live[n], n = o, n+1
				}
			}
			live = live[:n]
		}
	}
	for ; len(live) > 0; i++ {
		if len(live) == 1 {
			// One turn left (a conversation's own, most of the time):
			// followed alone.
			p := live[0]
			for ; i < len(p.Elems); i++ {
				end := p.Elems[i].End
				if end > len(body) || end <= pos {
					break
				}
				if sum, pos = NextSum(sum, body[pos:end]), end; sum != p.Elems[i].Sum {
					break
				}
				if body[end-1] == '}' {
					best, last, at = p, i, sum
				}
			}
			break
		}
		// The turns whose element i body repeats; of those that end it
		// at different places (only numbers can), the first one's.
		n, end, next, matched := 0, -1, uint64(0), false
		for _, p := range live {
			if i >= len(p.Elems) {
				continue
			}
			e := p.Elems[i]
			if e.End > len(body) || e.End <= pos || matched && e.End != end {
				continue
			}
			if e.End != end {
				end, next = e.End, NextSum(sum, body[pos:e.End])
			}
			if e.Sum == next {
				live[n], n, matched = p, n+1, true
			}
		}
		live = live[:n]
		if n == 0 {
			break
		}
		sum, pos = next, end
		if body[end-1] == '}' {
			best, last, at = live[0], i, sum
		}
	}
	if best == nil {
		r.through = probe
		return -1
	}
	r.Prior = best
	r.sum, r.summed, r.From, r.through = at, best.Elems[last].End, last+1, last
	return last
}

// resumedEnds returns the ends of the remembered turn's elements up to
// and including last, which ScanTurn appends the body's new ones to
// (more: the body has some). The first request to resume from the
// turn's final element with more to append takes the turn's own array,
// when it has room: it writes past the turn's elements, which no reader
// of the turn reads; when the array is full, it copies them with as much
// room again (a growing conversation copies its ends once in a while,
// not on every turn). A body with nothing more shares the array, its
// capacity cut. Any other copies them with room for a turn's elements (a
// retry of the next turn, or a branch).
func (r *Resume[S]) resumedEnds(last int, more bool) []Elem {
	p, n := r.Prior, last+1
	room := newElemsRoom
	switch {
	case !more:
		return p.Elems[:n:n]
	case n == len(p.Elems) && p.endsTaken.CompareAndSwap(false, true):
		if cap(p.Elems) > n {
			return p.Elems
		}
		room = max(n, newElemsRoom)
	}
	ends := make([]Elem, n, n+room)
	copy(ends, p.Elems[:n])
	return ends
}

// Tail reports whether the bytes of body from end on, end being where
// the array ends, are those after Prior's array: the format's scan may
// then end there, what it found in them being Prior's. The bytes before
// the array are the same too (the head names the conversation), so the
// scan of what follows would find what it found then.
func (r *Resume[S]) Tail(body []byte, end int) bool {
	p := r.Prior
	if p == nil || p.TailLen != len(body)-end {
		return false
	}
	// The sum is kept either way: a turn remembered with other bytes of
	// this length after its array (Codex CLI's reordered client_metadata)
	// takes it, not summed again.
	r.tailSum, r.tailSummed = r.memo.seed.Bytes(body[end:]), true
	r.TailKnown = r.tailSum == p.TailSum
	return r.TailKnown
}

// member checks the value of a top-level member after the array, at s,
// key its name, and reports whether it is the value Prior had under that
// key, byte for byte: then the value was checked before and s goes past
// it at once. The member is noted for the turn Remember keeps.
func (r *Resume[S]) member(s *Scanner, key []byte) (same bool, err error) {
	if r.memo == nil {
		return false, s.Value(1)
	}
	ks := xxh3.HashSeed(key, uint64(r.memo.seed))
	if p := r.Prior; p != nil {
		for _, m := range p.Members {
			end := s.I + m.Len
			if m.Key != ks || end > len(s.B) || numberGoesOn(s.B, end) {
				continue
			}
			if NextSum(ks, s.B[s.I:end]) == m.Sum {
				s.I = end
				if r.members == nil {
					r.members = make([]TailMember, 0, len(p.Members))
				}
				r.members = append(r.members, m)
				return true, nil
			}
		}
	}
	start := s.I
	if err := s.Value(1); err != nil {
		return false, err
	}
	if r.members == nil && r.Prior != nil {
		r.members = make([]TailMember, 0, len(r.Prior.Members))
	}
	r.members = append(r.members, TailMember{Key: ks, Len: s.I - start, Sum: NextSum(ks, s.B[start:s.I])})
	return false, nil
}

// numberGoesOn reports whether b holds a number that ends at end and one
// that goes on past it ("1" then "12", "1.5", "1e3"): the same bytes up to
// end are then not the same value.
func numberGoesOn(b []byte, end int) bool {
	if c := b[end-1]; c < '0' || c > '9' || end == len(b) {
		return false
	}
	switch c := b[end]; {
	case '0' <= c && c <= '9', c == '.', c == 'e', c == 'E', c == '+', c == '-':
		return true
	}
	return false
}

// MemberSum returns the memo sum of the value of the top-level member key
// after the array (seeded by the key's), when the memo read it; else 0.
// Two bodies with the same sum for a key hold the same value bytes there.
func (r *Resume[S]) MemberSum(key string) uint64 {
	if r.memo == nil {
		return 0
	}
	members := r.members
	if r.TailKnown {
		members = r.Prior.Members
	}
	ks := xxh3.HashStringSeed(key, uint64(r.memo.seed))
	for _, m := range members {
		if m.Key == ks {
			return m.Sum
		}
	}
	return 0
}

// Remember keeps a turn of the conversation: elems, the elements of its
// array, which ends at arrayEnd in body, state what the format read, of
// size bytes (ElemsSize is added) besides shared, a text of the state the
// name's other turns may hold too (its system text), counted once a name.
// The sums of the elements read (from From on, past the head) are filled
// in elems. The turn takes over elems
// and state: the caller must not change them afterwards. It reports
// whether the turn was kept.
//
// A turn that repeats the remembered one but for its last two elements at
// most, with the same bytes after them (a retry, a replaced step, every
// request of a rate-limit storm), is not kept: the next turn resumes from
// the remembered one as far, or two elements short.
func (r *Resume[S]) Remember(body []byte, elems []Elem, arrayEnd int, state S, size int, shared string) bool {
	if !r.Keeps(elems) {
		return false
	}
	sum, pos := r.sum, r.summed
	for i := r.From; i < len(elems); i++ {
		end := elems[i].End
		if end <= pos {
			continue // in the head
		}
		sum, pos = NextSum(sum, body[pos:end]), end
		elems[i].Sum = sum
	}
	r.sum, r.summed = sum, pos
	t := &Turn[S]{Elems: elems, TailLen: len(body) - arrayEnd, TailSum: r.tailSum, State: state, shared: shared, Members: r.members}
	if !r.TailKnown {
		if !r.tailSummed {
			t.TailSum = r.memo.seed.Bytes(body[arrayEnd:])
		}
	} else {
		t.Members = r.Prior.Members
	}
	size += ElemsSize(elems) + cap(t.Members)*int(unsafe.Sizeof(TailMember{}))
	// A turn that repeats the remembered one but for its last element,
	// with the same bytes after the array, then goes on, replaces it:
	// Claude Code moves its cache marker from its last message to the
	// newest on every turn, and keeping each turn as a branch of its own
	// would hold up to MaxBranches copies of the conversation's lists (a
	// retry of the turn replaced resumes from this one, one element
	// short). Another run of the task says so after the array (its run
	// id), or leaves the conversation earlier.
	var replaced *Turn[S]
	if p := r.Prior; p != nil && r.TailKnown && r.through == len(p.Elems)-2 && len(elems) > len(p.Elems) {
		replaced = p
	}
	return r.memo.put(r.key, t, replaced, size+int(unsafe.Sizeof(*t))+64)
}

// Keeps reports whether Remember would keep a turn of elems: a caller
// builds the state it keeps only then.
func (r *Resume[S]) Keeps(elems []Elem) bool {
	if r.memo == nil || !r.named || len(elems) == 0 || len(elems) > MaxElems {
		return false
	}
	p := r.Prior
	return p == nil || !r.TailKnown || len(elems) > len(p.Elems) || r.From < len(elems)-2 || !r.memo.holds(r.key, p)
}

// Extension is a remembered turn's claim on its lists (its marks, one per
// element read, and its calls, each in Chunks): the first request that
// resumes from the turn's end takes it and appends what it reads to those
// lists in place, past what the turn holds. Any other resumer takes a
// Prefix, which copies at most a chunk of each, so two requests that
// resume from one turn (a retry) never write to one chunk, and the turn's
// own lists never see what was appended past them.
type Extension struct{ taken atomic.Bool }

// Take claims the extension: it reports true to the first caller only.
func (x *Extension) Take() bool { return x.taken.CompareAndSwap(false, true) }

// Resumed returns the marks (up to and including element last) and the
// calls (the first ncalls) that a request resuming from the remembered
// turn after its element last appends to: the turn's own when last is its
// final element, the request has elements of its own to append (room) and
// it is the first to take ext; otherwise their Prefix (see Chunks). took
// says it took them: the request may then append past the turn's other
// lists in place too (see VerdictLog.Resumed).
func Resumed[M, C any](ext *Extension, marks *Chunks[M], calls *Chunks[C], last, ncalls, room int) (m Chunks[M], c Chunks[C], took bool) {
	if room > 0 && last+1 == marks.Len() && ncalls == calls.Len() && ext.Take() {
		return *marks, *calls, true
	}
	return marks.Prefix(last + 1), calls.Prefix(ncalls), false
}

// ResumedNames returns the first n of a remembered turn's tool names
// (Info.Tools), which a request resuming there appends its own to: the
// turn's own slice, with the room it has, when n is all of them and the
// request is the first to take claim (a claim of its own, not the
// turn's Extension: Claude Code's request resumes one message short of
// the turn's end, after the last of its calls); otherwise a clipped
// prefix, which an append copies. The one that takes them appends past
// the turn's names, which no reader of the turn reads, and the names a
// request's Info holds stay as they were when the capture reads them.
func ResumedNames(names []string, n int, claim *Extension) []string {
	if n == len(names) && claim.Take() {
		return names
	}
	return slices.Clip(names[:n])
}
