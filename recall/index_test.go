package recall

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func sol(id, goal string) store.Solution {
	return store.Solution{
		ID: id, Workspace: "w", Key: GoalKey(goal), Goal: goal,
		Approach: "approach of " + id, Outcome: "done", Confidence: 0.9,
		Source: store.SourceAPI, Verified: true, Created: t0, Updated: t0,
	}
}

func ids(ms []Match) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Solution.ID)
	}
	return out
}

// bruteForce scores every solution of the workspace exactly, without any
// pruning, and ranks them like Search.
func bruteForce(ix *Index, q Query) []Match {
	s := ix.prepare(q)
	if s == nil {
		return []Match{}
	}
	defer s.release()
	var all []result
	for slot, d := range s.ws.docs {
		if d == nil || !s.admissible(d) {
			continue
		}
		var bm float32
		for i := range s.terms {
			qt := &s.terms[i]
			if j := findTerm(d.terms, qt.id); j >= 0 {
				bm += s.contrib(qt, d.terms[j].tfG, d.terms[j].tfA, clampU8(d.lg), clampU8(d.la))
			}
		}
		tri := 0.0
		if len(s.qtri) > 0 && len(d.tris) > 0 {
			tri = 2 * float64(intersectTris(s.qtri, d.tris)) / float64(len(s.qtri)+len(d.tris))
		}
		if bm <= 0 && tri <= 0 {
			continue
		}
		sim := s.similarity(d, float64(bm), tri)
		if sim < s.min-1e-9 {
			continue
		}
		all = append(all, result{slot: uint32(slot), sim: sim})
	}
	slices.SortFunc(all, func(a, b result) int {
		if s.better(a, b) {
			return -1
		}
		if s.better(b, a) {
			return 1
		}
		return 0
	})
	s.top = all[:min(len(all), s.k)]
	return s.matches()
}

// checkInvariants verifies that postings and the documents' positions in
// them agree, and that the statistics match the documents.
func checkInvariants(t *testing.T, ix *Index) {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for name, ws := range ix.wss {
		ws.mu.RLock()
		n, sumG, sumA := 0, int64(0), int64(0)
		for slot, d := range ws.docs {
			if d == nil {
				continue
			}
			n++
			sumG += int64(d.lg)
			sumA += int64(d.la)
			if got := ws.byID[d.sol.ID]; got != uint32(slot) {
				t.Fatalf("%s: byID[%s] = %d, want %d", name, d.sol.ID, got, slot)
			}
			for _, dt := range d.terms {
				if p := ws.terms[dt.id].post[dt.pos]; p.slot != uint32(slot) || p.tfG != dt.tfG || p.tfA != dt.tfA || p.lg != clampU8(d.lg) || p.la != clampU8(d.la) {
					t.Fatalf("%s: term %q posting %d is slot %d, want %d", name, ws.terms[dt.id].word, dt.pos, p.slot, slot)
				}
			}
			for _, dt := range d.tris {
				if p := ws.tri[dt.h][dt.pos]; p != uint32(slot) {
					t.Fatalf("%s: trigram posting %d is slot %d, want %d", name, dt.pos, p, slot)
				}
			}
		}
		postings := 0
		for id, tm := range ws.terms {
			postings += len(tm.post)
			if tm.word != "" && ws.dict[tm.word] != uint32(id) {
				t.Fatalf("%s: dict[%q] = %d, want %d", name, tm.word, ws.dict[tm.word], id)
			}
			if tm.word == "" && len(tm.post) > 0 {
				t.Fatalf("%s: dropped term %d has postings", name, id)
			}
		}
		docTerms := 0
		for _, d := range ws.docs {
			if d != nil {
				docTerms += len(d.terms)
			}
		}
		if postings != docTerms {
			t.Fatalf("%s: %d postings, %d document terms", name, postings, docTerms)
		}
		if n != ws.n || n != len(ws.byID) || sumG != ws.sumG || sumA != ws.sumA {
			t.Fatalf("%s: stats n=%d/%d/%d sumG=%d/%d sumA=%d/%d", name, n, ws.n, len(ws.byID), sumG, ws.sumG, sumA, ws.sumA)
		}
		ws.mu.RUnlock()
	}
}

var (
	genVerbs   = []string{"fix", "add", "remove", "download", "parse", "write", "update", "refactor", "test", "deploy", "debug", "rename", "optimize", "document", "validate", "migrate", "cache", "log", "retry", "configure"}
	genObjects = []string{"the config loader", "unit tests", "the http client", "a web page", "the database schema", "temp files", "the login handler", "json output", "the cache layer", "error messages", "the CI pipeline", "docker images", "the payment api", "user sessions", "csv exports", "the search index", "kafka consumers", "metrics endpoint", "TLS certificates", "the websocket server"}
	genContext = []string{"in the billing service", "for the admin dashboard", "in parseConfig", "before the release", "on windows", "with retries", "in the go module", "for postgres", "behind the proxy", "in the react app", "after the upgrade", "for large files", "", "", ""}
	genTools   = []string{"read_file", "write_file", "run_tests", "grep", "http_get", "apply_patch", "list_dir", "run_shell"}
)

func genGoal(r *rand.Rand) string {
	return fmt.Sprintf("%s %s %s", genVerbs[r.IntN(len(genVerbs))], genObjects[r.IntN(len(genObjects))], genContext[r.IntN(len(genContext))])
}

func genApproach(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	s := "Tools: "
	for i := range n {
		if i > 0 {
			s += " -> "
		}
		s += genTools[r.IntN(len(genTools))]
	}
	return s + ". Final answer: " + genGoal(r) + " done."
}

func TestSearchMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ix := NewIndex()
	projects := []string{"", "api", "web"}
	live := map[string]bool{}
	for step := range 3000 {
		id := fmt.Sprintf("id%03d", r.IntN(400))
		switch op := r.IntN(10); {
		case op < 7:
			s := sol(id, genGoal(r))
			s.Approach = genApproach(r)
			s.Project = projects[r.IntN(len(projects))]
			s.Verified = r.IntN(2) == 0
			s.Confidence = float64(r.IntN(4)+6) / 10
			s.Updated = t0.Add(time.Duration(r.IntN(50)) * time.Hour)
			s.Key = fmt.Sprintf("k%d", r.IntN(50))
			ix.Put(s)
			live[id] = true
		default:
			ix.Delete("w", id)
			delete(live, id)
		}
		if ix.Len("w") != len(live) {
			t.Fatalf("step %d: Len = %d, want %d", step, ix.Len("w"), len(live))
		}
		if step%50 != 0 {
			continue
		}
		checkInvariants(t, ix)
		for range 10 {
			q := Query{
				Workspace:     "w",
				Project:       projects[r.IntN(len(projects))],
				Goal:          genGoal(r),
				K:             r.IntN(7) - 1,
				MinSimilarity: []float64{0, 0.2, 0.35, 0.5, 0.8}[r.IntN(5)],
				ExcludeKey:    fmt.Sprintf("k%d", r.IntN(60)),
			}
			if r.IntN(4) == 0 {
				q.Goal = typo(r, q.Goal)
			}
			want := bruteForce(ix, q)
			if got := searchExhaustive(ix, q); !equalMatches(got, want) {
				t.Fatalf("step %d, query %+v:\nexhaustive %s\nbruteForce %s", step, q, describe(got), describe(want))
			}
			// The bounded search may miss trigram-only matches, never
			// misorder or misscore what it returns.
			got := ix.Search(q)
			if len(got) > len(want) {
				t.Fatalf("step %d, query %+v:\nSearch     %s\nbruteForce %s", step, q, describe(got), describe(want))
			}
			for i := range got {
				if i < len(want) && (got[i].Solution.ID != want[i].Solution.ID || got[i].Similarity != want[i].Similarity) && !contains(want, got[i]) {
					t.Fatalf("step %d, query %+v:\nSearch     %s\nbruteForce %s", step, q, describe(got), describe(want))
				}
			}
		}
	}
}

func searchExhaustive(ix *Index, q Query) []Match {
	s := ix.prepare(q)
	if s == nil {
		return []Match{}
	}
	defer s.release()
	s.exhaustive = true
	s.run()
	return s.matches()
}

// contains reports whether want holds m with the same similarity.
func contains(want []Match, m Match) bool {
	for _, w := range want {
		if w.Solution.ID == m.Solution.ID {
			return w.Similarity == m.Similarity
		}
	}
	return false
}

// typo swaps two adjacent letters of one word of s.
func typo(r *rand.Rand, s string) string {
	b := []byte(s)
	for range 10 {
		i := r.IntN(len(b) - 1)
		if b[i] != ' ' && b[i+1] != ' ' && b[i] != b[i+1] {
			b[i], b[i+1] = b[i+1], b[i]
			break
		}
	}
	return string(b)
}

func equalMatches(a, b []Match) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Solution.ID != b[i].Solution.ID || a[i].Similarity != b[i].Similarity {
			return false
		}
	}
	return true
}

func TestSearchFilters(t *testing.T) {
	ix := NewIndex()
	mk := func(id, project, key string) store.Solution {
		s := sol(id, "download the web page and extract links")
		s.Project, s.Key = project, key
		return s
	}
	ix.Put(mk("a", "api", "conv:a"))
	ix.Put(mk("b", "web", "conv:b"))
	ix.Put(mk("c", "", "conv:c"))
	ix.Put(sol("other", "rotate TLS certificates"))
	goal := "fetch the html of a site and extract the links"
	tests := []struct {
		name string
		q    Query
		want []string
	}{
		{"no project matches all", Query{Goal: goal, K: 5}, []string{"a", "b", "c"}},
		{"project skips other projects", Query{Project: "api", Goal: goal, K: 5}, []string{"a", "c"}},
		{"unknown project keeps projectless", Query{Project: "cli", Goal: goal, K: 5}, []string{"c"}},
		{"exclude own key", Query{Goal: goal, K: 5, ExcludeKey: "conv:b"}, []string{"a", "c"}},
		{"project and exclude", Query{Project: "web", Goal: goal, K: 5, ExcludeKey: "conv:c"}, []string{"b"}},
		{"K 0 means 1", Query{Goal: goal}, []string{"a"}},
		{"negative K means 1", Query{Goal: goal, K: -3}, []string{"a"}},
		{"unknown workspace", Query{Workspace: "nope", Goal: goal, K: 5}, []string{}},
		{"empty goal", Query{Goal: "", K: 5}, []string{}},
		{"stopwords only", Query{Goal: "the of and to", K: 5}, []string{}},
		{"unrelated goal", Query{Goal: "bake sourdough bread", K: 5}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.q.Workspace == "" {
				tc.q.Workspace = "w"
			}
			if tc.q.MinSimilarity == 0 {
				tc.q.MinSimilarity = DefaultMinSimilarity
			}
			if got := ids(ix.Search(tc.q)); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSearchKCapping(t *testing.T) {
	ix := NewIndex()
	for i := range 8 {
		ix.Put(sol(fmt.Sprintf("s%d", i), "parse the yaml config file"))
	}
	for _, k := range []int{1, 3, 5, 6, 100} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			got := ix.Search(Query{Workspace: "w", Goal: "parse the yaml config", K: k})
			if want := min(k, 5); len(got) != want {
				t.Fatalf("K=%d: %d matches, want %d", k, len(got), want)
			}
		})
	}
}

func TestSearchThreshold(t *testing.T) {
	ix := rankingIndex(t)
	goal := "download the web page and extract links"
	all := ix.Search(Query{Workspace: "w", Goal: goal, K: 5})
	if len(all) < 2 {
		t.Fatalf("want several matches without threshold, got %s", describe(all))
	}
	for _, m := range all {
		if m.Similarity <= 0 || m.Similarity > 1 {
			t.Fatalf("similarity %v outside (0,1]", m.Similarity)
		}
	}
	for _, min := range []float64{all[0].Similarity, all[1].Similarity, 0.99, 1} {
		got := ix.Search(Query{Workspace: "w", Goal: goal, K: 5, MinSimilarity: min})
		for _, m := range got {
			if m.Similarity < min {
				t.Fatalf("min %.2f: got %s", min, describe(got))
			}
		}
		want := 0
		for _, m := range all {
			if m.Similarity >= min {
				want++
			}
		}
		if len(got) != want {
			t.Fatalf("min %.2f: got %s, want %d matches", min, describe(got), want)
		}
	}
	if got := ix.Search(Query{Workspace: "w", Goal: goal, MinSimilarity: 1.5}); len(got) != 0 {
		t.Fatalf("min 1.5: got %s", describe(got))
	}
}

func TestSearchTieBreak(t *testing.T) {
	ix := NewIndex()
	goal := "fix the flaky integration test"
	mk := func(id string, verified bool, conf float64, updated time.Duration) store.Solution {
		s := sol(id, goal)
		s.Approach = "same approach"
		s.Verified, s.Confidence, s.Updated = verified, conf, t0.Add(updated)
		return s
	}
	// Inserted worst first, so insertion order cannot explain the result.
	ix.Put(mk("f", false, 0.5, 0))
	ix.Put(mk("e", false, 0.9, 0))
	ix.Put(mk("d", true, 0.5, 0))
	ix.Put(mk("c", true, 0.9, 0))
	ix.Put(mk("b", true, 0.9, time.Hour))
	ix.Put(mk("a", true, 0.9, time.Hour))
	got := ids(ix.Search(Query{Workspace: "w", Goal: goal, K: 5}))
	if want := []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestPutReplacesAndDeleteRemoves(t *testing.T) {
	ix := NewIndex()
	ix.Put(sol("a", "rotate the TLS certificates"))
	ix.Put(sol("b", "plot revenue with matplotlib"))
	q := Query{Workspace: "w", Goal: "rotate TLS certificates", K: 5, MinSimilarity: DefaultMinSimilarity}
	if got := ids(ix.Search(q)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("before: got %v", got)
	}

	// Same ID, new goal: the old text no longer matches and there is no twin.
	ix.Put(sol("a", "compress log files with gzip"))
	if n := ix.Len("w"); n != 2 {
		t.Fatalf("Len after replace = %d, want 2", n)
	}
	if got := ids(ix.Search(q)); len(got) != 0 {
		t.Fatalf("old goal still recalled: %v", got)
	}
	gz := Query{Workspace: "w", Goal: "gzip the log files", K: 5, MinSimilarity: DefaultMinSimilarity}
	if got := ids(ix.Search(gz)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("new goal: got %v", got)
	}

	ix.Delete("w", "a")
	ix.Delete("w", "a")       // twice: no effect
	ix.Delete("nope", "a")    // unknown workspace
	ix.Delete("w", "missing") // unknown ID
	if got := ids(ix.Search(gz)); len(got) != 0 {
		t.Fatalf("deleted solution recalled: %v", got)
	}
	if n := ix.Len("w"); n != 1 {
		t.Fatalf("Len after delete = %d, want 1", n)
	}
	checkInvariants(t, ix)

	ix.Put(store.Solution{Workspace: "w", Goal: "no id"})
	if n := ix.Len("w"); n != 1 {
		t.Fatalf("solution without ID was indexed: Len = %d", n)
	}
}

// TestPutAgainTakesTheNewRecord: a solution stored again with the same
// goal and approach (a run captured again: another outcome, another time)
// is what recall returns from then on, and its postings are not made
// again: the document it was indexed as stays.
func TestPutAgainTakesTheNewRecord(t *testing.T) {
	ix := NewIndex()
	a := sol("a", "rotate the TLS certificates")
	ix.Put(a)
	ix.Put(sol("b", "plot revenue with matplotlib"))
	ws := ix.workspace("w", false)
	before := ws.docs[ws.byID["a"]]

	a.Outcome, a.Confidence, a.Updated, a.Project = "rotated, all hosts", 0.7, t0.Add(time.Hour), "infra"
	ix.Put(a)
	if d := ws.docs[ws.byID["a"]]; d != before {
		t.Fatal("the same goal and approach were indexed again")
	}
	got := ix.Search(Query{Workspace: "w", Goal: "rotate TLS certificates", K: 5, MinSimilarity: DefaultMinSimilarity})
	if len(got) != 1 || got[0].Solution.Outcome != a.Outcome || got[0].Solution.Confidence != 0.7 ||
		!got[0].Solution.Updated.Equal(a.Updated) || got[0].Solution.Project != "infra" {
		t.Fatalf("recalled %+v, want the record stored last", got)
	}
	if n := ix.Len("w"); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}

	// A new approach is indexed: its words are found.
	a.Approach = "ran certbot renew with the dns-01 challenge"
	ix.Put(a)
	if d := ws.docs[ws.byID["a"]]; d == before {
		t.Fatal("a new approach was not indexed")
	}
	checkInvariants(t, ix)
}

func TestWorkspacesAreSeparate(t *testing.T) {
	ix := NewIndex()
	a, b := sol("1", "parse the yaml config"), sol("1", "parse the yaml config")
	b.Workspace = "other"
	ix.Put(a)
	ix.Put(b)
	ix.Delete("w", "1")
	if ix.Len("w") != 0 || ix.Len("other") != 1 {
		t.Fatalf("Len w=%d other=%d, want 0 and 1", ix.Len("w"), ix.Len("other"))
	}
	if got := ids(ix.Search(Query{Workspace: "w", Goal: "parse yaml config"})); len(got) != 0 {
		t.Fatalf("workspace w: got %v", got)
	}
	if got := ids(ix.Search(Query{Workspace: "other", Goal: "parse yaml config"})); !slices.Equal(got, []string{"1"}) {
		t.Fatalf("workspace other: got %v", got)
	}
}

func TestTypoCorrection(t *testing.T) {
	ix := rankingIndex(t)
	tests := []struct{ query, want string }{
		{"recieve messages from kafka", "s06"},
		{"comprss log files", "s23"},
		{"certificates rotaton", "s31"},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			ms := ix.Search(Query{Workspace: "w", Goal: tc.query, MinSimilarity: DefaultMinSimilarity})
			if len(ms) == 0 || ms[0].Solution.ID != tc.want {
				t.Fatalf("got %s, want %s", describe(ms), tc.want)
			}
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	ix := NewIndex()
	r := rand.New(rand.NewPCG(3, 4))
	goals := make([]string, 200)
	for i := range goals {
		goals[i] = genGoal(r)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			ws := fmt.Sprintf("ws%d", w%2)
			for i := range 500 {
				id := fmt.Sprintf("%d-%d", w, i%50)
				s := sol(id, goals[(i*7+w)%len(goals)])
				s.Workspace = ws
				ix.Put(s)
				if i%3 == 0 {
					ix.Delete(ws, fmt.Sprintf("%d-%d", w, (i+1)%50))
				}
			}
		})
		wg.Go(func() {
			for i := range 500 {
				ms := ix.Search(Query{Workspace: fmt.Sprintf("ws%d", i%2), Goal: goals[(i*13+w)%len(goals)], K: 3})
				for _, m := range ms {
					if m.Similarity < 0 || m.Similarity > 1 {
						t.Errorf("similarity %v", m.Similarity)
					}
				}
				_ = ix.Len("ws0")
			}
		})
	}
	wg.Wait()
	checkInvariants(t, ix)
	if n := ix.Len("ws0") + ix.Len("ws1"); n == 0 || n > 200 {
		t.Fatalf("Len total = %d, want 1..200", n)
	}
	q := Query{Workspace: "ws0", Goal: goals[0], K: 5}
	if got, want := ix.Search(q), bruteForce(ix, q); !equalMatches(got, want) {
		t.Fatalf("after concurrent writes: Search %s, bruteForce %s", describe(got), describe(want))
	}
}
