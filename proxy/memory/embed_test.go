package memory

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// geoEmbedder embeds the texts it knows at chosen angles from (1, 0): a
// geometry known exactly. It can fail its next calls or hang until the
// caller's deadline.
type geoEmbedder struct {
	model string
	mu    sync.Mutex
	cos   map[string]float64 // cosine with (1, 0) of each known text; others at 0
	fail  int                // calls still to fail; -1: every one
	hang  bool               // wait for ctx to end
	calls [][]string
}

var _ recall.Embedder = (*geoEmbedder)(nil)

func (g *geoEmbedder) Model() string { return g.model }

func (g *geoEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	g.mu.Lock()
	g.calls = append(g.calls, texts)
	hang, fail := g.hang, g.fail != 0
	if g.fail > 0 {
		g.fail--
	}
	g.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if fail {
		return nil, errors.New("embeddings: 503 overloaded")
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		c := g.cos[t]
		out[i] = []float32{float32(c), float32(math.Sqrt(1 - c*c))}
	}
	return out, nil
}

func (g *geoEmbedder) set(f func(g *geoEmbedder)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

func (g *geoEmbedder) callCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.calls)
}

const (
	goalQuery = "import the users from a CSV file"
	goalLex   = "import users from CSV files" // the words find it
	goalVec   = "bring customer records in from spreadsheets"
	goalFar   = "rotate the TLS certificates"
)

func geo() *geoEmbedder {
	return &geoEmbedder{model: "geo-1", cos: map[string]float64{goalQuery: 1, goalLex: 0.3, goalVec: 0.9, goalFar: 0.1}}
}

// embedMemory is a memory on a real bbolt store with semantic recall
// through g, holding the three solutions above, embedded.
func embedMemory(t *testing.T, g *geoEmbedder, reg prometheus.Registerer) (*Memory, store.Store) {
	t.Helper()
	st := tempBolt(t)
	m := newTestMemoryReg(t, st, reg, func(o *Options) {
		o.Embedder, o.EmbedBackoff = g, time.Millisecond
		rc := recall.DefaultConfig()
		rc.Embeddings = recall.EmbeddingsConfig{Provider: "geo", Model: g.model, Timeout: time.Minute, MinSimilarity: 0.6}
		o.Recall = &rc
	})
	ctx := context.Background()
	for _, goal := range []string{goalLex, goalVec, goalFar} {
		if err := m.PutSolutions(ctx, &store.Solution{Workspace: "w", Key: recall.GoalKey(goal), Goal: goal, Approach: "done before", Confidence: 0.9}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SyncIndex(ctx); err != nil {
		t.Fatal(err)
	}
	return m, st
}

func newTestMemoryReg(t *testing.T, st store.Store, reg prometheus.Registerer, opts ...func(*Options)) *Memory {
	t.Helper()
	m := newTestMemory(t, st, opts...)
	// newTestMemory registers nothing: give the memory series of its own.
	if reg != nil {
		m.embedMetrics = newEmbedMetrics(reg, m.vectors)
	}
	return m
}

func goals(ms []recall.Match) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Solution.Goal)
	}
	return out
}

// TestEmbedSolutionsStoresVectors: the solutions' goals are embedded in
// one call, stored with them, and searched.
func TestEmbedSolutionsStoresVectors(t *testing.T) {
	g := geo()
	m, st := embedMemory(t, g, nil)
	if n := m.Vectors().PendingLen(); n != 3 {
		t.Fatalf("pending %d, want 3", n)
	}
	if !m.EmbedPending(context.Background()) {
		t.Fatal("EmbedPending failed")
	}
	if g.callCount() != 1 || len(g.calls[0]) != 3 {
		t.Fatalf("calls %v, want one of 3 goals", g.calls)
	}
	list, err := st.ListSolutions(context.Background(), "w")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Embedding == nil || s.Embedding.Model != "geo-1" || len(s.Embedding.Vector) != 2 {
			t.Fatalf("%q stored with embedding %+v", s.Goal, s.Embedding)
		}
	}
	if m.Vectors().Len("w") != 3 || m.Vectors().PendingLen() != 0 {
		t.Fatalf("vectors %d, pending %d", m.Vectors().Len("w"), m.Vectors().PendingLen())
	}
	// Embedded once: nothing more to do, no call.
	m.EmbedPending(context.Background())
	if g.callCount() != 1 {
		t.Fatalf("%d calls after a second EmbedPending", g.callCount())
	}

	// A changed goal is embedded again; an unchanged one is not.
	changed := goalVec + " nightly"
	if err := m.PutSolutions(context.Background(), &store.Solution{Workspace: "w", Key: recall.GoalKey(goalVec), Goal: changed}); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.EmbedPending(context.Background())
	if g.callCount() != 2 || !slices.Equal(g.calls[1], []string{changed}) {
		t.Fatalf("calls %v, want the changed goal alone", g.calls)
	}
}

// TestEmbedSolutionsRetries: a failing embedder is retried with backoff,
// then given up after 6 attempts.
func TestEmbedSolutionsRetries(t *testing.T) {
	g := geo()
	g.fail = 2
	reg := prometheus.NewRegistry()
	m, st := embedMemory(t, g, reg)
	m.EmbedPending(context.Background())
	if g.callCount() != 3 {
		t.Fatalf("%d calls, want 2 failures and a success", g.callCount())
	}
	if m.Vectors().Len("w") != 3 {
		t.Fatalf("%d vectors after the retries", m.Vectors().Len("w"))
	}
	if got := counterValue(t, m.embedMetrics.embedded); got != 3 {
		t.Fatalf("embedded counter %v", got)
	}

	// Another model: every goal again, and this time it never works.
	g2 := geo()
	g2.model, g2.fail = "geo-2", -1
	m.SetEmbedder(g2)
	if n := m.Vectors().PendingLen(); n != 3 {
		t.Fatalf("pending after the model changed: %d", n)
	}
	m.EmbedPending(context.Background())
	if g2.callCount() != embedAttempts {
		t.Fatalf("%d calls, want %d attempts", g2.callCount(), embedAttempts)
	}
	if got := counterValue(t, m.embedMetrics.failed); got != 3 {
		t.Fatalf("failed counter %v, want 3", got)
	}
	s, _ := st.GetSolution(context.Background(), "w", m.Index().Search(recall.Query{Workspace: "w", Goal: goalFar})[0].Solution.ID)
	if s.Embedding == nil || s.Embedding.Model != "geo-1" {
		t.Fatalf("the old model's vector is gone: %+v", s.Embedding)
	}
	if m.Vectors().Len("w") != 0 {
		t.Fatal("the old model's vectors are still searched")
	}

	// It works again: a new model embeds everything.
	g3 := geo()
	g3.model = "geo-3"
	m.SetEmbedder(g3)
	m.EmbedPending(context.Background())
	if m.Vectors().Len("w") != 3 {
		t.Fatalf("%d vectors of geo-3", m.Vectors().Len("w"))
	}
}

// TestSemanticRecallFuses: the rewording the words miss is recalled by
// its vector, after the solution both rankings find.
func TestSemanticRecallFuses(t *testing.T) {
	g := geo()
	m, _ := embedMemory(t, g, nil)
	q := recall.Query{Workspace: "w", Goal: goalQuery, K: 5, MinSimilarity: recall.DefaultMinSimilarity}
	// Before the vectors are stored: words alone, without a call.
	if got := goals(m.Search(context.Background(), q)); !slices.Equal(got, []string{goalLex}) {
		t.Fatalf("before embedding: %v", got)
	}
	if g.callCount() != 0 {
		t.Fatal("the task was embedded while the workspace has no vector")
	}
	m.EmbedPending(context.Background())
	got := goals(m.Search(context.Background(), q))
	if !slices.Equal(got, []string{goalLex, goalVec}) {
		t.Fatalf("fused: %v, want [%s %s]", got, goalLex, goalVec)
	}
	if last := g.calls[len(g.calls)-1]; !slices.Equal(last, []string{goalQuery}) {
		t.Fatalf("the task was embedded as %v", last)
	}

	// Through a conversation's first request: the block names both.
	matches, block := m.recallFor(context.Background(), "w", "p", goalQuery, "conv", "conv", false)
	if len(matches) != 1 || !strings.Contains(string(block.JSON), "import users from CSV files") {
		t.Fatalf("recall block of max_results 1: %d matches, %s", len(matches), block.JSON)
	}
	rc := m.Recall()
	rc.MaxResults = 2
	if err := m.Reconfigure(m.Guard(), rc); err != nil {
		t.Fatal(err)
	}
	matches, _ = m.recallFor(context.Background(), "w", "p", goalQuery, "conv2", "conv2", false)
	if got := goals(matches); !slices.Equal(got, []string{goalLex, goalVec}) {
		t.Fatalf("recall of a run: %v", got)
	}
}

// TestSemanticRecallFallsBack: an embedder that fails or is slower than
// recall.embeddings.timeout leaves recall to the words, counted.
func TestSemanticRecallFallsBack(t *testing.T) {
	g := geo()
	reg := prometheus.NewRegistry()
	m, _ := embedMemory(t, g, reg)
	m.EmbedPending(context.Background())
	q := recall.Query{Workspace: "w", Goal: goalQuery, K: 5, MinSimilarity: recall.DefaultMinSimilarity}
	lexical := goals(m.Index().Search(q))

	g.set(func(g *geoEmbedder) { g.fail = 1 })
	if got := goals(m.Search(context.Background(), q)); !slices.Equal(got, lexical) {
		t.Fatalf("embedder failing: %v, want the words' %v", got, lexical)
	}
	if n := counterValue(t, m.embedMetrics.fallbacks.WithLabelValues("error")); n != 1 {
		t.Fatalf("error fallbacks %v", n)
	}

	rc := m.Recall()
	rc.Embeddings.Timeout = 10 * time.Millisecond
	if err := m.Reconfigure(m.Guard(), rc); err != nil {
		t.Fatal(err)
	}
	g.set(func(g *geoEmbedder) { g.hang = true })
	if got := goals(m.Search(context.Background(), q)); !slices.Equal(got, lexical) {
		t.Fatalf("embedder hanging: %v, want the words' %v", got, lexical)
	}
	if n := counterValue(t, m.embedMetrics.fallbacks.WithLabelValues("timeout")); n != 1 {
		t.Fatalf("timeout fallbacks %v", n)
	}

	// A client gone is no fallback.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.Search(ctx, q)
	if n := counterValue(t, m.embedMetrics.fallbacks.WithLabelValues("error")) + counterValue(t, m.embedMetrics.fallbacks.WithLabelValues("timeout")); n != 2 {
		t.Fatalf("fallbacks %v after a cancelled request, want 2", n)
	}

	// Off: words alone, no call.
	calls := g.callCount()
	m.SetEmbedder(nil)
	if got := goals(m.Search(context.Background(), q)); !slices.Equal(got, lexical) || g.callCount() != calls {
		t.Fatalf("off: %v after %d calls", got, g.callCount()-calls)
	}
}

// TestEmbedSolutionsGiveUpStopsThePass: once a batch is given up, the
// rest waits (the provider is likely down) instead of being tried batch
// after batch.
func TestEmbedSolutionsGiveUpStopsThePass(t *testing.T) {
	g := geo()
	g.fail = -1
	st := tempBolt(t)
	m := newTestMemory(t, st, func(o *Options) { o.Embedder, o.EmbedBackoff = g, time.Millisecond })
	ctx := context.Background()
	for i := range embedBatch + 8 {
		goal := "goal number " + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if err := m.PutSolutions(ctx, &store.Solution{Workspace: "w", Key: recall.GoalKey(goal), Goal: goal}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SyncIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if m.EmbedPending(ctx) {
		t.Fatal("EmbedPending reports success")
	}
	if g.callCount() != embedAttempts || m.Vectors().PendingLen() != 8 {
		t.Fatalf("%d calls, %d pending; want %d calls and the second batch pending", g.callCount(), m.Vectors().PendingLen(), embedAttempts)
	}
}

// TestEmbeddingsSurviveARestart: a memory started on a store whose
// solutions are embedded searches their vectors at once, without a call;
// one started with another model embeds them again.
func TestEmbeddingsSurviveARestart(t *testing.T) {
	g := geo()
	m, st := embedMemory(t, g, nil)
	if !m.EmbedPending(context.Background()) {
		t.Fatal("EmbedPending failed")
	}
	m.Shutdown(context.Background())

	same := geo()
	again := newTestMemory(t, st, func(o *Options) { o.Embedder = same })
	if again.Vectors().Len("w") != 3 || again.Vectors().PendingLen() != 0 {
		t.Fatalf("restarted: %d vectors, %d pending; want 3 and 0", again.Vectors().Len("w"), again.Vectors().PendingLen())
	}
	q := recall.Query{Workspace: "w", Goal: goalQuery, K: 5, MinSimilarity: recall.DefaultMinSimilarity}
	if got := goals(again.Search(context.Background(), q)); !slices.Contains(got, goalVec) {
		t.Fatalf("restarted: %v, want the vector's match", got)
	}
	if n := same.callCount(); n != 1 {
		t.Fatalf("%d calls after the restart, want the task's alone", n)
	}

	other := geo()
	other.model = "geo-2"
	third := newTestMemory(t, st, func(o *Options) { o.Embedder = other })
	if third.Vectors().Len("w") != 0 || third.Vectors().PendingLen() != 3 {
		t.Fatalf("another model: %d vectors, %d pending; want 0 and 3", third.Vectors().Len("w"), third.Vectors().PendingLen())
	}
}

// TestEmbeddingsTurnedOffAndOn: vectors of the model already stored are
// read back, not made again.
func TestEmbeddingsTurnedOffAndOn(t *testing.T) {
	g := geo()
	m, _ := embedMemory(t, g, nil)
	m.EmbedPending(context.Background())
	m.SetEmbedder(nil)
	if m.Vectors().Len("w") != 0 {
		t.Fatal("vectors searched with semantic recall off")
	}
	m.SetEmbedder(g)
	if m.Vectors().PendingLen() != 3 {
		t.Fatalf("pending %d after turning it on", m.Vectors().PendingLen())
	}
	if !m.EmbedPending(context.Background()) {
		t.Fatal("EmbedPending failed")
	}
	if g.callCount() != 1 || m.Vectors().Len("w") != 3 {
		t.Fatalf("%d calls, %d vectors; want the first call alone and 3 vectors", g.callCount(), m.Vectors().Len("w"))
	}
}

// TestTaskEmbeddedOnce: a task run again is not embedded again, unless
// the model changed.
func TestTaskEmbeddedOnce(t *testing.T) {
	g := geo()
	m, _ := embedMemory(t, g, nil)
	m.EmbedPending(context.Background())
	q := recall.Query{Workspace: "w", Goal: goalQuery, K: 5, MinSimilarity: recall.DefaultMinSimilarity}
	first := goals(m.Search(context.Background(), q))
	calls := g.callCount()
	if again := goals(m.Search(context.Background(), q)); !slices.Equal(again, first) || g.callCount() != calls {
		t.Fatalf("again: %v after %d more calls; want %v without a call", again, g.callCount()-calls, first)
	}
	g2 := geo()
	g2.model = "geo-2"
	m.SetEmbedder(g2)
	m.EmbedPending(context.Background())
	m.Search(context.Background(), q)
	if n := len(g2.calls); n != 2 || !slices.Equal(g2.calls[1], []string{goalQuery}) {
		t.Fatalf("another model: calls %v, want the solutions' then the task's", g2.calls)
	}
}
