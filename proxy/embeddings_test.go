package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// geoProvider is an OpenAI-compatible provider whose embeddings have a
// known geometry (a text naming CSV at (1, 0); one naming spreadsheets at
// cosine 0.9 from it, one naming nightly at 0.3; anything else
// orthogonal), and whose chat completions keep the last request they got.
// Its embeddings can fail or hang.
type geoProvider struct {
	srv     *httptest.Server
	mode    atomic.Value // "", "fail" or "hang"
	lastReq atomic.Value // []byte
	embeds  atomic.Int64
}

func newGeoProvider(t *testing.T) *geoProvider {
	g := &geoProvider{}
	g.mode.Store("")
	g.lastReq.Store([]byte(nil))
	done := make(chan struct{})
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/v1/embeddings":
			g.embeds.Add(1)
			switch g.mode.Load().(string) {
			case "fail":
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, `{"error":{"message":"overloaded"}}`)
				return
			case "hang":
				select {
				case <-r.Context().Done():
				case <-done:
				}
				return
			}
			var in struct {
				Input []string `json:"input"`
			}
			json.Unmarshal(body, &in)
			var items []string
			for i, text := range in.Input {
				c := 0.0
				switch {
				case strings.Contains(text, "nightly"):
					c = 0.3
				case strings.Contains(text, "spreadsheets"):
					c = 0.9
				case strings.Contains(text, "CSV"):
					c = 1
				}
				items = append(items, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":[%g,%g]}`, i, c, math.Sqrt(1-c*c)))
			}
			fmt.Fprintf(w, `{"object":"list","data":[%s],"model":"geo"}`, strings.Join(items, ","))
		case "/v1/chat/completions":
			g.lastReq.Store(body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(g.srv.Close)
	t.Cleanup(func() { close(done) })
	return g
}

// newGeoHarness returns a geoProvider and a proxy in front of it whose
// recall embeds through it (recall.embeddings on the provider "up").
func newGeoHarness(t *testing.T) (*geoProvider, *harness) {
	up := newGeoProvider(t)
	pc := providers.Config{Name: "up", Type: providers.TypeOpenAI, BaseURL: up.srv.URL + "/v1"}
	p, err := providers.New(pc, nil)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := providers.NewEmbedder(p, "geo")
	if err != nil {
		t.Fatal(err)
	}
	rc := recall.DefaultConfig()
	rc.Embeddings = recall.EmbeddingsConfig{Provider: "up", Model: "geo", Timeout: time.Minute, MinSimilarity: 0.6}
	return up, newHarness(t, "", withProviders(pc), withOptions(func(o *Options) {
		o.Recall, o.Embedder = &rc, emb
	}))
}

// fallbacks returns scarproxy_recall_embedding_fallbacks_total{reason}.
func (h *harness) fallbacks(reason string) float64 {
	h.t.Helper()
	families, err := h.srv.metrics.registry.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "scarproxy_recall_embedding_fallbacks_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	h.t.Fatalf("no fallback series %s", reason)
	return 0
}

// TestSemanticRecallThroughTheProxy: with recall.embeddings on an
// httptest provider, a task the words miss recalls a solution through the
// proxy by its vector; when the provider's embeddings fail or hang, the
// run recalls on words alone, and the metric counts it.
func TestSemanticRecallThroughTheProxy(t *testing.T) {
	up, h := newGeoHarness(t)
	ctx := context.Background()
	m := h.srv.memory
	for _, goal := range []string{"bring customer records in from spreadsheets", "rotate the TLS certificates"} {
		if err := m.PutSolutions(ctx, &store.Solution{Workspace: "default", Key: recall.GoalKey(goal), Goal: goal, Approach: "done before", Confidence: 0.9}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SyncIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if !m.EmbedPending(ctx) || m.Vectors().Len("default") != 2 {
		t.Fatalf("solutions embedded: %d", m.Vectors().Len("default"))
	}

	ask := func(task string) (string, string) {
		t.Helper()
		res, _ := h.chat(`{"model":"m","messages":[{"role":"user","content":"`+task+`"}]}`, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d", res.StatusCode)
		}
		return res.Header.Get(HeaderRecall), string(up.lastReq.Load().([]byte))
	}
	n, sent := ask("import the users from a CSV file")
	if n != "1" || !strings.Contains(sent, "bring customer records in from spreadsheets") || !strings.Contains(sent, recall.BlockStart) {
		t.Fatalf("X-Scar-Recall %s; the provider got %s", n, sent)
	}
	if strings.Contains(sent, "TLS") {
		t.Fatalf("the far solution was recalled: %s", sent)
	}

	up.mode.Store("fail")
	if n, sent := ask("import the orders from a CSV file"); n != "0" || strings.Contains(sent, recall.BlockStart) {
		t.Fatalf("embeddings failing: X-Scar-Recall %s; sent %s", n, sent)
	}
	if got := h.fallbacks("error"); got != 1 {
		t.Fatalf("error fallbacks %v", got)
	}

	rc := m.Recall()
	rc.Embeddings.Timeout = 20 * time.Millisecond
	if err := m.Reconfigure(m.Guard(), rc); err != nil {
		t.Fatal(err)
	}
	up.mode.Store("hang")
	if n, _ := ask("import the invoices from a CSV file"); n != "0" {
		t.Fatalf("embeddings hanging: X-Scar-Recall %s", n)
	}
	if got := h.fallbacks("timeout"); got != 1 {
		t.Fatalf("timeout fallbacks %v", got)
	}

	// The memory API recalls as the proxy does.
	up.mode.Store("")
	res := h.do(http.MethodGet, "/scar/v1/recall?goal=import+the+users+from+a+CSV+file", nil, nil)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("bring customer records in from spreadsheets")) {
		t.Fatalf("GET /scar/v1/recall: %d %s", res.StatusCode, body)
	}
}

// TestSemanticRecallWithTheMock: the whole path offline, the mock's
// embeddings (a bag of word stems) recalling a reworded task that shares
// its stems but not enough of its words for the lexical threshold.
func TestSemanticRecallWithTheMock(t *testing.T) {
	pc := providers.Config{Name: "mock", Type: providers.TypeMock}
	p, err := providers.New(pc, nil)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := providers.NewEmbedder(p, "mock-embed")
	if err != nil {
		t.Fatal(err)
	}
	rc := recall.DefaultConfig()
	rc.Embeddings = recall.EmbeddingsConfig{Provider: "mock", Model: "mock-embed", Timeout: time.Minute, MinSimilarity: 0.6}
	h := newHarness(t, "", withProviders(pc), withOptions(func(o *Options) {
		o.Recall, o.Embedder = &rc, emb
	}))
	ctx := context.Background()
	m := h.srv.memory
	goal := "add retries with backoff to the webhook sender"
	if err := m.PutSolutions(ctx, &store.Solution{Workspace: "default", Key: recall.GoalKey(goal), Goal: goal, Approach: "done before", Confidence: 0.9}); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncIndex(ctx); err != nil {
		t.Fatal(err)
	}
	m.EmbedPending(ctx)
	s, err := h.store.ListSolutions(ctx, "default")
	if err != nil || len(s) != 1 || s[0].Embedding == nil || s[0].Embedding.Model != "mock-embed" {
		t.Fatalf("stored: %+v, %v", s, err)
	}
	// The same words in another order: the words score under 1 (their
	// trigrams differ), the vectors 1 (the same bag of stems), and the
	// block shows the larger.
	task := "the webhook sender: add retries with backoff"
	lex := m.Index().Search(recall.Query{Workspace: "default", Goal: task})
	if len(lex) != 1 || lex[0].Similarity >= 1 {
		t.Fatalf("lexical: %+v", lex)
	}
	res, body := h.chat(`{"model":"mock-gpt","messages":[{"role":"user","content":"`+task+` [[mock:echo]]"}]}`, nil)
	if res.StatusCode != http.StatusOK || res.Header.Get(HeaderRecall) != "1" || !bytes.Contains(body, []byte("Similarity: 100%")) {
		t.Fatalf("%d X-Scar-Recall %s: %s", res.StatusCode, res.Header.Get(HeaderRecall), body)
	}
}

// TestFusionOrderThroughTheProxy: the memory API, which recalls as the
// proxy does, orders by the fused ranks of an httptest provider's
// embeddings: the solution both rankings find first, then the words'
// best, then the one only its vector finds.
func TestFusionOrderThroughTheProxy(t *testing.T) {
	_, h := newGeoHarness(t)
	ctx := context.Background()
	m := h.srv.memory
	const (
		lex  = "import the users from a CSV file nightly" // vector at 0.3
		both = "load the users from CSV spreadsheets"     // vector at 0.9
		vec  = "bring customer records in from spreadsheets"
		far  = "rotate the TLS certificates"
	)
	for _, goal := range []string{lex, both, vec, far} {
		if err := m.PutSolutions(ctx, &store.Solution{Workspace: "default", Key: recall.GoalKey(goal), Goal: goal, Approach: "done before", Confidence: 0.9}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.SyncIndex(ctx); err != nil {
		t.Fatal(err)
	}
	m.EmbedPending(ctx)
	task := "import the users from a CSV file"
	words := m.Index().Search(recall.Query{Workspace: "default", Goal: task, K: 5, MinSimilarity: recall.DefaultMinSimilarity})
	if len(words) != 2 || words[0].Solution.Goal != lex || words[1].Solution.Goal != both {
		t.Fatalf("the words alone: %+v; want %q then %q", words, lex, both)
	}
	res := h.do(http.MethodGet, "/scar/v1/recall?k=5&goal="+strings.ReplaceAll(task, " ", "+"), nil, nil)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var got struct {
		Matches []struct {
			Solution struct {
				Goal string `json:"goal"`
			} `json:"solution"`
		} `json:"matches"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%d %s: %v", res.StatusCode, body, err)
	}
	var order []string
	for _, m := range got.Matches {
		order = append(order, m.Solution.Goal)
	}
	// both: 1/(60+2) + 1/(60+1); lex: 1/(60+1) + 1/(60+3); vec: 1/(60+2).
	if want := []string{both, lex, vec}; !slices.Equal(order, want) {
		t.Fatalf("fused order %q, want %q", order, want)
	}
}
