package wire

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/tidwall/gjson"
)

// remember remembers under tenant a turn of body whose array is the
// elements ending at ends, and reports whether it was kept.
func remember(m *TurnMemo[string], tenant, body string, head int, ends []int, arrayEnd int, size int) bool {
	r := NewResume(m)
	r.Name(tenant, []byte(body), 0, head, 0)
	elems := make([]Elem, len(ends))
	for i, e := range ends {
		elems[i].End = e
	}
	return r.Remember([]byte(body), elems, arrayEnd, body, size, "")
}

// TestTurnMemoForgetsTheLeastRecentlyUsed: past its budget the memo
// forgets the conversations used least recently, and says what it holds.
func TestTurnMemoForgetsTheLeastRecentlyUsed(t *testing.T) {
	// Four turns fit in the budget, not five.
	const size = 1000
	each := size + ElemsSize(make([]Elem, 2)) + int(unsafe.Sizeof(Turn[string]{})) + 64
	budget := 4*each + 10
	m := NewTurnMemo[string](budget)
	body := `[{"a":1},{"b":2}]`
	for _, tenant := range []string{"a", "b", "e", "f"} {
		if !remember(m, tenant, body, 8, []int{8, 16}, 17, size) {
			t.Fatalf("turn of %s not kept", tenant)
		}
	}
	if m.Len() != 4 || m.Bytes() != 4*each {
		t.Fatalf("%d turns, %d bytes, want %d", m.Len(), m.Bytes(), 4*each)
	}
	// a is used again: b is now the least recently used.
	r := NewResume(m)
	r.Name("a", []byte(body), 0, 8, 0)
	if r.Prior == nil || r.Prior.State != body {
		t.Fatal("a's turn not found")
	}
	if !remember(m, "c", body, 8, []int{8, 16}, 17, size) {
		t.Fatal("turn of c not kept")
	}
	for tenant, want := range map[string]bool{"a": true, "b": false, "c": true, "e": true, "f": true} {
		r := NewResume(m)
		r.Name(tenant, []byte(body), 0, 8, 0)
		if (r.Prior != nil) != want {
			t.Errorf("%s remembered: %v, want %v", tenant, r.Prior != nil, want)
		}
	}
	if m.Len() != 4 || m.Bytes() > budget {
		t.Fatalf("%d turns, %d bytes, budget %d", m.Len(), m.Bytes(), budget)
	}
	// A turn of more than a quarter of the budget is not kept.
	if remember(m, "d", body, 8, []int{8, 16}, 17, budget) {
		t.Fatal("a turn of the whole budget was kept")
	}
}

// TestResumeSkipsWhatIsRepeated: a body that repeats the remembered
// turn's bytes up to the end of an element is read from there; one that
// changed a byte before is not; the bytes after the array are known only
// when they are the same.
func TestResumeSkipsWhatIsRepeated(t *testing.T) {
	m := NewTurnMemo[string](0)
	turn := `{"x":[{"r":"user"},{"a":1},{"b":22}],"t":1}`
	ends := []int{18, 26, 35}
	if !remember(m, "t", turn, 18, ends, 36, 100) {
		t.Fatal("not kept")
	}
	for _, tc := range []struct {
		name, body string
		last       int
		tail       bool
	}{
		{"the same", turn, 2, true},
		{"one more element", `{"x":[{"r":"user"},{"a":1},{"b":22},{"c":3}],"t":1}`, 2, true},
		{"the last element changed", `{"x":[{"r":"user"},{"a":1},{"b":23}],"t":1}`, 1, true},
		{"the first element after the head changed", `{"x":[{"r":"user"},{"a":2},{"b":22}],"t":1}`, -1, true},
		{"the tail changed", `{"x":[{"r":"user"},{"a":1},{"b":22}],"t":2}`, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewResume(m)
			body := []byte(tc.body)
			r.Name("t", body, 0, 18, 0)
			if last := r.Skip(body, 0); last != tc.last {
				t.Fatalf("Skip = %d, want %d", last, tc.last)
			}
			end := strings.LastIndexByte(tc.body, ']') + 1
			if got := r.Tail(body, end); got != tc.tail {
				t.Fatalf("Tail = %v, want %v", got, tc.tail)
			}
		})
	}
	// Another tenant's body of the same bytes has its own name.
	r := NewResume(m)
	r.Name("u", []byte(turn), 0, 18, 0)
	if r.Prior != nil {
		t.Fatal("another tenant found this tenant's turn")
	}
}

// TestRememberLeavesTheTurnARetryRepeats: a body that repeats the
// remembered turn but for its last elements, with the same bytes after
// the array (a retry, a replaced step), is not kept, and Keeps says so
// before a format builds its state; one that adds an element is.
func TestRememberLeavesTheTurnARetryRepeats(t *testing.T) {
	m := NewTurnMemo[string](0)
	turn := `{"x":[{"r":"user"},{"a":1},{"b":22}],"t":1}`
	if !remember(m, "t", turn, 18, []int{18, 26, 35}, 36, 100) {
		t.Fatal("not kept")
	}
	for _, tc := range []struct {
		name, body string
		ends       []int
		keep       bool
	}{
		{"the last element replaced", `{"x":[{"r":"user"},{"a":1},{"b":23}],"t":1}`, []int{18, 26, 35}, false},
		{"the same turn again", turn, []int{18, 26, 35}, false},
		{"one more element", `{"x":[{"r":"user"},{"a":1},{"b":22},{"c":3}],"t":1}`, []int{18, 26, 35, 43}, true},
		{"the tail changed", `{"x":[{"r":"user"},{"a":1},{"b":23}],"t":2}`, []int{18, 26, 35}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewResume(m)
			body := []byte(tc.body)
			r.Name("t", body, 0, 18, 0)
			r.Skip(body, 0)
			end := strings.LastIndexByte(tc.body, ']') + 1
			r.Tail(body, end)
			elems := make([]Elem, len(tc.ends))
			for i, e := range tc.ends {
				elems[i].End = e
			}
			if got := r.Keeps(elems); got != tc.keep {
				t.Fatalf("Keeps = %v, want %v", got, tc.keep)
			}
			prior := r.Prior
			if got := r.Remember(body, elems, end, tc.body, 100, ""); got != tc.keep {
				t.Fatalf("Remember = %v, want %v", got, tc.keep)
			}
			if !tc.keep && !m.holds(r.key, prior) {
				t.Fatal("the remembered turn was replaced")
			}
		})
	}
}

// TestResumedTakesTheArraysOnce: the first request to resume from a
// remembered turn's end appends to the turn's arrays; a second one (a
// retry of the same turn) and one that resumes from an earlier element
// copy, and what each appends stays its own.
func TestResumedTakesTheArraysOnce(t *testing.T) {
	marks := chunksOf(1, 2, 3)
	calls := chunksOf("a", "b")
	var ext Extension

	m1, c1, took1 := Resumed(&ext, &marks, &calls, 2, 2, 4)
	if m1.At(0) != marks.At(0) || c1.At(0) != calls.At(0) {
		t.Fatal("the first resumer from the end copied the turn's arrays")
	}
	m1.Append(41)
	c1.Append("x")

	m2, c2, took2 := Resumed(&ext, &marks, &calls, 2, 2, 4)
	m2.Append(42)
	c2.Append("y")
	if m2.At(0) == marks.At(0) || c2.At(0) == calls.At(0) {
		t.Fatal("a second resumer from the end appended to the arrays the first one appends to")
	}

	var fresh Extension
	m3, c3, took3 := Resumed(&fresh, &marks, &calls, 1, 1, 4)
	m3.Append(43)
	c3.Append("z")
	if m3.At(0) == marks.At(0) {
		t.Fatal("a resumer from an earlier element appended to the turn's arrays")
	}
	if !took1 || took2 || took3 {
		t.Errorf("took: %v, %v, %v; want the first resumer only", took1, took2, took3)
	}

	for _, c := range []struct {
		marks     Chunks[int]
		want      []int
		calls     Chunks[string]
		wantCalls []string
	}{
		{marks, []int{1, 2, 3}, calls, []string{"a", "b"}},
		{m1, []int{1, 2, 3, 41}, c1, []string{"a", "b", "x"}},
		{m2, []int{1, 2, 3, 42}, c2, []string{"a", "b", "y"}},
		{m3, []int{1, 2, 43}, c3, []string{"a", "z"}},
	} {
		if got, gotCalls := chunksSlice(&c.marks), chunksSlice(&c.calls); !slices.Equal(got, c.want) || !slices.Equal(gotCalls, c.wantCalls) {
			t.Errorf("marks %v calls %v, want %v %v", got, gotCalls, c.want, c.wantCalls)
		}
	}
}

// TestResumedLeavesTheArraysToATurnThatAdds: a request that repeats the
// remembered turn (nothing to append) does not take its arrays from the
// next turn, which appends.
func TestResumedLeavesTheArraysToATurnThatAdds(t *testing.T) {
	marks := chunksOf(1, 2)
	var ext Extension
	m, _, _ := Resumed(&ext, &marks, &Chunks[string]{}, 1, 0, 0)
	if m.Append(9); m.At(0) == marks.At(0) {
		t.Fatal("a repeat of the turn took its arrays")
	}
	if m, _, _ := Resumed(&ext, &marks, &Chunks[string]{}, 1, 0, 1); m.At(0) != marks.At(0) {
		t.Fatal("the turn after a repeat copied the arrays")
	}
}

// TestResumedEndsTakesTheArrayOnce: the first request to resume from a
// turn's final element with elements to add appends to the turn's array
// of ends; a body with nothing more shares it without taking it; any
// other copies, with room to grow, and what each appends stays its own.
func TestResumedEndsTakesTheArrayOnce(t *testing.T) {
	p := &Turn[string]{Elems: make([]Elem, 3, 8)}
	for i := range p.Elems {
		p.Elems[i].End = 10 * (i + 1)
	}
	r := Resume[string]{Prior: p}
	if retry := r.resumedEnds(2, false); &retry[0] != &p.Elems[0] || cap(retry) != 3 {
		t.Fatalf("a body with nothing more: cap %d, shared %v", cap(retry), &retry[0] == &p.Elems[0])
	}
	first := r.resumedEnds(2, true)
	if &first[0] != &p.Elems[0] || cap(first) != 8 {
		t.Fatal("the first resumer from the end did not take the turn's array")
	}
	second := r.resumedEnds(2, true)
	if &second[0] == &p.Elems[0] || len(second) != 3 || cap(second) != 3+newElemsRoom {
		t.Fatalf("a second resumer: len %d, cap %d, shared %v", len(second), cap(second), &second[0] == &p.Elems[0])
	}
	earlier := r.resumedEnds(1, true)
	if &earlier[0] == &p.Elems[0] || len(earlier) != 2 {
		t.Fatal("a resumer from an earlier element shares the turn's array")
	}
	first = append(first, Elem{End: 40})
	second = append(second, Elem{End: 41})
	earlier = append(earlier, Elem{End: 31})
	if len(p.Elems) != 3 || first[3].End != 40 || second[3].End != 41 || earlier[2].End != 31 || p.Elems[2].End != 30 {
		t.Fatalf("turn %v, first %v, second %v, earlier %v", p.Elems, first, second, earlier)
	}
}

// TestResumedEndsGrowsAFullArray: the first request after a turn whose
// array of ends is full gets room for as many again; the next ones (a
// retry of it) room for a turn's elements.
func TestResumedEndsGrowsAFullArray(t *testing.T) {
	p := &Turn[string]{Elems: make([]Elem, 20)}
	r := Resume[string]{Prior: p}
	if ends := r.resumedEnds(19, true); len(ends) != 20 || cap(ends) != 40 {
		t.Fatalf("first: len %d, cap %d, want 20 and 40", len(ends), cap(ends))
	}
	if ends := r.resumedEnds(19, true); len(ends) != 20 || cap(ends) != 20+newElemsRoom {
		t.Fatalf("second: len %d, cap %d, want 20 and %d", len(ends), cap(ends), 20+newElemsRoom)
	}
}

func TestMoreElems(t *testing.T) {
	body := []byte(`[{"a":1} , {"b":2}  ]`)
	if !MoreElems(body, 8) || MoreElems(body, 18) {
		t.Fatal("MoreElems")
	}
}

// runTurn is the body of a run's turn: the head (a system element and the
// task, the same for every run) and the run's steps 1 to k.
func runTurn(run, k int) []byte {
	b := []byte(`{"x":[{"role":"system","c":"S"},{"role":"user","c":"the task"}`)
	for i := 1; i <= k; i++ {
		b = fmt.Appendf(b, `,{"a":"run %d, step %d"}`, run, i)
	}
	return append(b, `],"t":1}`...)
}

// scanRemember scans body with m as a format does, remembers its turn,
// and returns the request's Resume.
func scanRemember(t *testing.T, m *TurnMemo[string], body []byte) *Resume[string] {
	t.Helper()
	return scanRememberShared(t, m, body, "")
}

// scanRememberShared is scanRemember with a shared text (a system text)
// in the turn's state.
func scanRememberShared(t *testing.T, m *TurnMemo[string], body []byte, shared string) *Resume[string] {
	t.Helper()
	r := NewResume(m)
	ts, err := ScanTurn(body, []string{"x", "t"}, 0, &r, "tenant", func(string) []Span { return nil })
	if err != nil {
		t.Fatal(err)
	}
	r.Remember(body, ts.Ends, ts.ArrayEnd, string(body), 100, shared)
	return &r
}

// TestTurnMemoCountsASharedTextOnce: the turns of a name that hold one
// system text (the same string, resumed from turn to turn) count it once;
// copies of it count each; past the budget's quarter for a name, the
// oldest turns go as before.
func TestTurnMemoCountsASharedTextOnce(t *testing.T) {
	system := strings.Repeat("You are a coding agent. ", 2000) // 48 KB
	const runs = 8
	for _, copies := range []bool{false, true} {
		m := NewTurnMemo[string](0)
		var r *Resume[string]
		for run := range runs {
			text := system
			if copies {
				text = strings.Clone(system)
			}
			r = scanRememberShared(t, m, runTurn(run, 2), text)
		}
		n, sum := branchSizes(m, r)
		want := sum + len(system)
		if copies {
			want = sum + runs*len(system)
		}
		if n != runs || m.Bytes() != want {
			t.Errorf("copies %v: %d turns, the memo counts %d bytes, want %d (turns %d, system %d)", copies, n, m.Bytes(), want, sum, len(system))
		}
	}
	// A name's quarter of the budget: the shared text counts once in it.
	probe := NewTurnMemo[string](0)
	_, each := branchSizes(probe, scanRememberShared(t, probe, runTurn(0, 2), system))
	m := NewTurnMemo[string](4 * (len(system) + 3*each + 10))
	var r *Resume[string]
	for run := range runs {
		r = scanRememberShared(t, m, runTurn(run, 2), system)
	}
	if n, sum := branchSizes(m, r); n != 3 || m.Bytes() != sum+len(system) {
		t.Errorf("%d turns, %d bytes, want the newest 3 and the system text once (%d)", n, m.Bytes(), sum+len(system))
	}
}

func TestSharedTexts(t *testing.T) {
	a := strings.Repeat("a", 100)
	var s SharedTexts
	if s.Peek(a) != 100 || s.Size(a) != 100 || s.Size(a) != 0 || s.Peek(a) != 0 || s.Size("") != 0 {
		t.Fatal("one string counts once")
	}
	if s.Size(strings.Clone(a)) != 100 || s.Size(a[:50]) != 50 {
		t.Fatal("a copy, or a part, counts again")
	}
	for range 10 {
		s.Size(strings.Clone(a)) // past what it remembers: each counts
	}
	if s.Size(a) != 0 {
		t.Fatal("the first strings are still known")
	}
}

// branchSizes returns the sizes of the turns m holds under r's name, and
// their sum.
func branchSizes(m *TurnMemo[string], r *Resume[string]) (n, sum int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.turns[r.key].turns {
		n, sum = n+1, sum+t.size
	}
	return n, sum
}

// TestTurnMemoKeepsEachRunsTurn: runs of one task (the same head) that
// take turns each resume from their own latest turn, not from the one
// another run remembered last; the memo holds one turn per run under one
// name and counts their bytes.
func TestTurnMemoKeepsEachRunsTurn(t *testing.T) {
	const runs = 40 // more than Skip's buffer, fewer than MaxBranches
	m := NewTurnMemo[string](0)
	for k := 1; k <= 6; k++ {
		for run := range runs {
			r := scanRemember(t, m, runTurn(run, k))
			// The head is elements 0 and 1; the run's turn before ended
			// at step k-1, element k.
			want := k + 1
			if k == 1 {
				want = 0
			}
			if r.From != want {
				t.Fatalf("run %d, step %d: read from element %d, want %d", run, k, r.From, want)
			}
		}
	}
	r := scanRemember(t, m, runTurn(0, 6))
	n, sum := branchSizes(m, r)
	if m.Len() != 1 || n != runs || m.Bytes() != sum {
		t.Fatalf("%d names, %d turns of %d bytes, memo counts %d; want 1 name, %d turns", m.Len(), n, sum, m.Bytes(), runs)
	}
}

// TestTurnMemoKeepsMaxBranches: past MaxBranches runs under one name, the
// run used least recently is forgotten, and a turn that extends another
// (a run's first turn holds only the head) replaces it.
func TestTurnMemoKeepsMaxBranches(t *testing.T) {
	m := NewTurnMemo[string](0)
	for k := range 3 {
		if n, _ := branchSizes(m, scanRemember(t, m, runTurn(0, k))); n != 1 {
			t.Fatalf("one run, step %d: %d turns, want its latest only", k, n)
		}
	}
	for run := range MaxBranches + 1 {
		scanRemember(t, m, runTurn(run, 1))
	}
	last := scanRemember(t, m, runTurn(MaxBranches, 2))
	if last.From != 3 {
		t.Fatalf("the newest run read from element %d, want 3", last.From)
	}
	if n, sum := branchSizes(m, last); n != MaxBranches || m.Bytes() != sum {
		t.Fatalf("%d turns of %d bytes, memo counts %d; want %d turns", n, sum, m.Bytes(), MaxBranches)
	}
	if first := scanRemember(t, m, runTurn(0, 2)); first.From != 0 {
		t.Fatalf("the run used least recently read from element %d, want 0 (forgotten)", first.From)
	}
	var ref MemoRef[string]
	last.Refer(&ref)
	ref.Forget()
	if m.Len() != 0 || m.Bytes() != 0 {
		t.Fatalf("after Forget: %d names, %d bytes", m.Len(), m.Bytes())
	}
}

// TestTurnMemoBoundsANamesBytes: the turns under one name take at most a
// quarter of the budget, the oldest going first.
func TestTurnMemoBoundsANamesBytes(t *testing.T) {
	probe := NewTurnMemo[string](0)
	_, each := branchSizes(probe, scanRemember(t, probe, runTurn(0, 1)))
	m := NewTurnMemo[string](4 * (2*each + 10))
	var r *Resume[string]
	for run := range 5 {
		r = scanRemember(t, m, runTurn(run, 1))
	}
	if n, sum := branchSizes(m, r); n != 2 || sum != 2*each || m.Bytes() != sum {
		t.Fatalf("%d turns of %d bytes (memo: %d), want the newest 2 of %d", n, sum, m.Bytes(), each)
	}
	if r := scanRemember(t, m, runTurn(4, 2)); r.From != 3 {
		t.Fatalf("the newest run read from element %d, want 3", r.From)
	}
	if r := scanRemember(t, m, runTurn(0, 2)); r.From != 0 {
		t.Fatalf("the oldest run read from element %d, want 0 (forgotten)", r.From)
	}
}

// TestSkipTakesTheTurnRepeatedFurthest: of the turns under a name, the
// scan resumes from the one the body repeats furthest, whatever their
// order of use, and reads as far as that one when turns share elements.
func TestSkipTakesTheTurnRepeatedFurthest(t *testing.T) {
	m := NewTurnMemo[string](0)
	scanRemember(t, m, runTurn(1, 5))
	// A turn that repeats run 1 up to step 2, then goes its own way.
	branch := runTurn(1, 2)
	branch = append(branch[:len(branch)-len(`],"t":1}`)], `,{"a":"another step"}],"t":1}`...)
	if r := scanRemember(t, m, branch); r.From != 4 {
		t.Fatalf("the branch read from element %d, want 4", r.From)
	}
	// Run 1's next turn: the branch is newer, run 1's turn goes further.
	if r := scanRemember(t, m, runTurn(1, 6)); r.From != 7 || len(r.Prior.Elems) != 7 {
		t.Fatalf("run 1 read from element %d, want 7", r.From)
	}
}

// sharedTurn is a turn of a run that starts with shared steps every run
// has (a conversation gone back to an earlier point, runs of one task
// with a common start), then k steps of its own.
func sharedTurn(shared, run, k int) []byte {
	b := []byte(`{"x":[{"role":"system","c":"S"},{"role":"user","c":"the task"}`)
	for i := 1; i <= shared; i++ {
		b = fmt.Appendf(b, `,{"a":"shared step %d"}`, i)
	}
	for i := 1; i <= k; i++ {
		b = fmt.Appendf(b, `,{"a":"run %d, step %d"}`, run, i)
	}
	return append(b, `],"t":1}`...)
}

// TestSkipFollowsASharedStartOnce: turns under one name that share their
// first elements note how many (common), and a scan resumes where it
// would following every turn element by element: the same turn, from
// the same element, over runs that share a start, leave it early or
// late, branch and repeat.
func TestSkipFollowsASharedStartOnce(t *testing.T) {
	fast, slow := NewTurnMemo[string](0), NewTurnMemo[string](0)
	rng := rand.New(rand.NewPCG(29, 29))
	for n := range 3000 {
		shared, run, k := 6+rng.IntN(3)*3, rng.IntN(30), 1+rng.IntN(6)
		body := sharedTurn(shared, run, k)
		a, b := scanRemember(t, fast, body), scanRemember(t, slow, body)
		if a.From != b.From || (a.Prior == nil) != (b.Prior == nil) || a.Prior != nil && len(a.Prior.Elems) != len(b.Prior.Elems) {
			t.Fatalf("request %d (start %d, run %d, step %d): read from %d, following every turn %d", n, shared, run, k, a.From, b.From)
		}
		// The slow memo's turns claim no common start: Skip follows each.
		slow.mu.Lock()
		for _, it := range slow.turns {
			for _, turn := range it.turns {
				turn.common = 0
			}
		}
		slow.mu.Unlock()
	}
	// Runs of three steps past a shared start of 12 elements (a turn
	// that adds two elements or fewer to another is a retry: not kept).
	m := NewTurnMemo[string](0)
	for run := range 5 {
		scanRemember(t, m, sharedTurn(12, run, 3))
	}
	r := scanRemember(t, m, sharedTurn(12, 0, 4))
	if n := len(r.branches); n != 5 {
		t.Fatalf("%d turns under the name, want 5", n)
	}
	if c := r.branches[0].common; c != 2+12 {
		t.Errorf("the newest turn shares %d elements with the others, want %d", c, 2+12)
	}
	if r.From != 2+12+3 {
		t.Errorf("run 0's next turn read from element %d, want %d", r.From, 2+12+3)
	}
}

// furthest follows each of turns alone through body, whose head sums to
// sum and ends at pos, and returns the one body repeats furthest (up to
// an object element after probe; the newest of those that go as far) and
// that element, or nil and -1.
func furthest[S any](turns []*Turn[S], body []byte, sum uint64, pos, probe int) (*Turn[S], int) {
	var best *Turn[S]
	last := -1
	for _, t := range turns {
		s, p := sum, pos
		for i := probe + 1; i < len(t.Elems); i++ {
			end := t.Elems[i].End
			if end > len(body) || end <= p {
				break
			}
			if s, p = NextSum(s, body[p:end]), end; s != t.Elems[i].Sum {
				break
			}
			if body[end-1] == '}' && i > last {
				best, last = t, i
			}
		}
	}
	return best, last
}

// TestSkipTakesWhatFollowingEachTurnFinds: over runs that share a start,
// branch, go back and repeat, Skip resumes from the turn and element that
// following every turn alone finds.
func TestSkipTakesWhatFollowingEachTurnFinds(t *testing.T) {
	m := NewTurnMemo[string](0)
	rng := rand.New(rand.NewPCG(7, 29))
	for n := range 3000 {
		shared, run, k := rng.IntN(4)*3, rng.IntN(12), 1+rng.IntN(8)
		body := sharedTurn(shared, run, k)
		r := NewResume(m)
		ts, err := ScanTurn(body, []string{"x", "t"}, 0, &r, "tenant", func(string) []Span { return nil })
		if err != nil {
			t.Fatal(err)
		}
		ref := NewResume(m)
		head := bytes.Index(body, []byte(`"the task"}`)) + len(`"the task"}`)
		cut := bytes.Index(body, []byte(`"S"}`)) + len(`"S"}`) // the system element's end
		ref.Name("tenant", body, cut, head, 0)
		want, last := furthest(ref.branches, body, ref.sum, ref.summed, 1)
		if from := last + 1; from == 0 && r.From != 0 || from > 0 && (r.From != from || r.Prior != want) {
			t.Fatalf("request %d (start %d, run %d, step %d): read from %d, following each turn: %d", n, shared, run, k, r.From, from)
		}
		r.Remember(body, ts.Ends, ts.ArrayEnd, string(body), 100, "")
	}
}

// BenchmarkSkipManyRuns: the next turn of one of 64 runs of one task
// that share a start of 40 elements; "each" follows every turn element by
// element, as Skip did before turns noted their common start; "newest"
// is the next turn of the run remembered last, "changed" that run's turn
// with its last step changed (as Claude Code re-sends its newest message
// without its cache marker).
func BenchmarkSkipManyRuns(b *testing.B) {
	const shared = 40
	for _, kind := range []string{"shared", "each", "newest", "changed"} {
		each := kind == "each"
		b.Run(kind, func(b *testing.B) {
			m := NewTurnMemo[string](0)
			t := &testing.T{}
			for run := range MaxBranches {
				scanRemember(t, m, sharedTurn(shared, run, 3))
			}
			if each {
				for _, it := range m.turns {
					for _, turn := range it.turns {
						turn.common = 0
					}
				}
			}
			body := sharedTurn(shared, 7, 4)
			switch kind {
			case "newest":
				body = sharedTurn(shared, MaxBranches-1, 4)
			case "changed":
				body = bytes.Replace(sharedTurn(shared, MaxBranches-1, 4), []byte("step 3"), []byte("step X"), 1)
			}
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				r := NewResume(m)
				if _, err := ScanTurn(body, []string{"x", "t"}, 0, &r, "tenant", func(string) []Span { return nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestTailMembers: when the bytes after the array change, the members
// there whose values are the remembered turn's under the same key are
// found so (Same, MemberSum) and those that changed are read and checked
// as any: a number that goes on, a value under another key, a value that
// is no JSON, a key given twice.
func TestTailMembers(t *testing.T) {
	m := NewTurnMemo[[]Span](0)
	keys := []string{"x", "tools", "meta", "n"}
	const tools = `[{"name":"run","description":"Runs a command."}]`
	turn := func(k int, tail string) []byte {
		b := []byte(`{"x":[{"role":"user","c":"the task"}`)
		for i := 1; i <= k; i++ {
			b = fmt.Appendf(b, `,{"a":"step %d"}`, i)
		}
		return append(append(b, ']'), tail...)
	}
	scan := func(body []byte) (TurnScan, *Resume[[]Span], error) {
		r := NewResume(m)
		ts, err := ScanTurn(body, keys, 0, &r, "tenant", func(after []Span) []Span { return after })
		return ts, &r, err
	}
	// The turn every case extends.
	base := `,"tools":` + tools + `,"meta":{"a":1,"b":"two"},"n":1}`
	body := turn(1, base)
	ts, r, err := scan(body)
	if err != nil {
		t.Fatal(err)
	}
	r.Remember(body, ts.Ends, ts.ArrayEnd, ts.After, 100, "")
	if r.TailKnown || slices.Contains(ts.Same, true) {
		t.Fatalf("a first turn: TailKnown %v, Same %v", r.TailKnown, ts.Same)
	}
	toolsSum := r.MemberSum("tools")
	if toolsSum == 0 || r.MemberSum("meta") == toolsSum || r.MemberSum("absent") != 0 {
		t.Fatalf("member sums: tools %x, meta %x, absent %x", toolsSum, r.MemberSum("meta"), r.MemberSum("absent"))
	}
	for i, tc := range []struct {
		name, tail string
		known      bool
		same       []bool // of tools, meta, n
		err        string
	}{
		{"the same bytes", base, true, []bool{true, true, true}, ""},
		{"meta's members reordered", `,"tools":` + tools + `,"meta":{"b":"two","a":1},"n":1}`, false, []bool{true, false, true}, ""},
		{"a number that goes on", `,"tools":` + tools + `,"meta":{"a":1,"b":"two"},"n":12}`, false, []bool{true, true, false}, ""},
		{"a number that goes on, the last", `,"tools":` + tools + `,"meta":{"a":1,"b":"two"},"n":1.5}`, false, []bool{true, true, false}, ""},
		{"a number that goes on, with an exponent", `,"tools":` + tools + `,"meta":{"a":1,"b":"two"},"n":1e3 }`, false, []bool{true, true, false}, ""},
		{"the number with space after", `,"tools":` + tools + `,"meta":{"a":1,"b":"two"},"n":1 }`, false, []bool{true, true, true}, ""},
		{"tools' value under meta", `,"tools":` + tools + `,"meta":` + tools + `,"n":1}`, false, []bool{true, false, true}, ""},
		{"a member more before them", `,"extra":true,"tools":` + tools + `,"meta":{"a":1,"b":"two"},"n":1}`, false, []bool{true, true, true}, ""},
		{"tools changed", `,"tools":[{"name":"run","description":"Runs it."}],"meta":{"a":1,"b":"two"},"n":1}`, false, []bool{false, true, true}, ""},
		{"meta no JSON", `,"tools":` + tools + `,"meta":{"a":1,"b":},"n":1}`, false, nil, "JSON"},
		{"a number that goes on into no JSON", `,"tools":` + tools + `,"meta":{"a":1,"b":"two"},"n":1.}`, false, nil, "JSON"},
		{"tools twice", `,"tools":` + tools + `,"tools":` + tools + `,"meta":{"a":1,"b":"two"},"n":1}`, false, nil, "more than once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := turn(2+i, tc.tail)
			ts, r, err := scan(body)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Prior == nil || r.From == 0 {
				t.Fatalf("not resumed: prior %v, from %d", r.Prior != nil, r.From)
			}
			if r.TailKnown != tc.known || !slices.Equal(ts.Same[1:], tc.same) {
				t.Errorf("TailKnown %v, Same %v; want %v, %v", r.TailKnown, ts.Same[1:], tc.known, tc.same)
			}
			for k, key := range keys[1:] {
				want := gjson.GetBytes(body, key).Raw
				if got := string(ts.Top[k+1].Raw(body)); got != want {
					t.Errorf("%s at %q, want %q", key, got, want)
				}
			}
			if got := r.MemberSum("tools"); (got == toolsSum) != tc.same[0] {
				t.Errorf("tools' sum %x, the first turn's %x; want them equal: %v", got, toolsSum, tc.same[0])
			}
		})
	}
}

// TestTurnMemoReplacesATurnContinuedButForItsLast: a turn that repeats
// the remembered one but for its last element (Claude Code's cache marker
// moved off it), then goes on, replaces it under the name instead of
// becoming a branch beside it, turn after turn; a turn that leaves it
// earlier is a branch; a retry of a replaced turn resumes one element
// short of its end.
func TestTurnMemoReplacesATurnContinuedButForItsLast(t *testing.T) {
	// Turn k: the head, then k steps, the last of them marked.
	turn := func(k int, branch string) []byte {
		b := []byte(`{"x":[{"role":"system","c":"S"},{"role":"user","c":"the task"}`)
		for i := 1; i <= k; i++ {
			mark := ""
			if i == k {
				mark = `,"cache":1`
			}
			b = fmt.Appendf(b, `,{"a":"step %d%s"%s}`, i, branch, mark)
		}
		return append(b, `],"t":1}`...)
	}
	m := NewTurnMemo[string](0)
	var r *Resume[string]
	for k := 1; k <= 12; k++ {
		r = scanRemember(t, m, turn(k, ""))
		if k > 2 && r.From != k {
			t.Fatalf("step %d: read from element %d, want %d (the last one's, unmarked)", k, r.From, k)
		}
		if n, _ := branchSizes(m, r); n != 1 {
			t.Fatalf("step %d: %d turns under the name, want the newest alone", k, n)
		}
	}
	// Step 11 has 13 elements: the two of the head, 11 steps.
	if retry := scanRemember(t, m, turn(11, "")); retry.From != 12 {
		t.Fatalf("a retry of step 11 read from element %d, want its last, 12", retry.From)
	}
	// A turn that leaves the conversation at its second step is a branch.
	b := scanRemember(t, m, turn(3, " elsewhere"))
	if n, _ := branchSizes(m, b); n != 2 {
		t.Fatalf("%d turns under the name after a branch, want 2", n)
	}
}
