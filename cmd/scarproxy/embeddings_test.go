package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEndToEndSemanticRecallMock: serve --mock with recall.embeddings on
// the mock embeds a stored solution in the background, stores its vector,
// and recalls it through the memory API with the vectors' similarity
// (the words alone score the reordered task under 100%).
func TestEndToEndSemanticRecallMock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	os.WriteFile(path, []byte("mock: true\ndata_dir: "+dir+"\nrecall:\n  embeddings:\n    provider: mock\n    model: mock-embed\n    timeout: 10s\n"), 0o644)
	in := start(t, "--config", path)
	if r := do(t, "POST", in.BaseURL+"/scar/v1/solutions", `{"goal":"add retries with backoff to the webhook sender","approach":"did it","outcome":"ok","confidence":0.8}`, nil); r.status != 201 {
		t.Fatalf("post solution: %d %s", r.status, r.body)
	}
	waitFor(t, 10*time.Second, "the solution's goal embedded", func() bool {
		m := do(t, "GET", in.BaseURL+"/metrics", "", nil)
		return strings.Contains(m.body, "scarproxy_recall_solutions_embedded_total 1")
	})
	waitFor(t, 10*time.Second, "recalled by its vector", func() bool {
		rec := do(t, "GET", in.BaseURL+"/scar/v1/recall?goal=the+webhook+sender:+add+retries+with+backoff", "", nil)
		return rec.status == 200 && strings.Contains(rec.body, `"similarity":1`)
	})
	if m := do(t, "GET", in.BaseURL+"/metrics", "", nil); !strings.Contains(m.body, `scarproxy_recall_embedding_fallbacks_total{reason="error"} 0`) {
		t.Fatalf("fallbacks: %s", m.body)
	}
}

// TestReloadSemanticRecall: recall.embeddings is taken anew on a reload:
// turned on, the stored solutions wait to be embedded by the new model;
// turned off, nothing waits.
func TestReloadSemanticRecall(t *testing.T) {
	fx := newReloadFixture(t, "mock: true\n", noEnv)
	if r := do(t, "POST", fx.base+"/scar/v1/solutions", `{"goal":"rotate the ingress TLS certificates","approach":"did it","outcome":"ok","confidence":0.8}`, nil); r.status != 201 {
		t.Fatalf("post solution: %d %s", r.status, r.body)
	}
	pending := func() string {
		m := do(t, "GET", fx.base+"/metrics", "", nil)
		for line := range strings.SplitSeq(m.body, "\n") {
			if v, ok := strings.CutPrefix(line, "scarproxy_recall_solutions_embedding_pending "); ok {
				return v
			}
		}
		t.Fatalf("no pending gauge in %s", m.body)
		return ""
	}
	if p := pending(); p != "0" {
		t.Fatalf("pending with embeddings off: %s", p)
	}
	fx.write(t, "mock: true\nrecall:\n  embeddings:\n    provider: mock\n    model: mock-embed\n")
	if err := fx.r.Reload(); err != nil {
		t.Fatal(err)
	}
	if p := pending(); p != "1" {
		t.Fatalf("pending after turning embeddings on: %s", p)
	}
	fx.write(t, "mock: true\nrecall:\n  embeddings:\n    provider: mock\n")
	if err := fx.r.Reload(); err == nil || !strings.Contains(err.Error(), "recall.embeddings.model") {
		t.Fatalf("reload without a model: %v", err)
	}
	if p := pending(); p != "1" {
		t.Fatalf("pending after a refused reload: %s", p)
	}
	fx.write(t, "mock: true\n")
	if err := fx.r.Reload(); err != nil {
		t.Fatal(err)
	}
	if p := pending(); p != "0" {
		t.Fatalf("pending after turning embeddings off: %s", p)
	}
}
