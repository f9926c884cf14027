package providers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/providers/mock"
)

func TestEmbedderRequestAndAnswer(t *testing.T) {
	var path, auth, model string
	var input []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, auth = r.URL.Path, r.Header.Get("Authorization")
		var body struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		model, input = body.Model, body.Input
		// Out of order, one item in base64 (float32s 1.5 and -2).
		io.WriteString(w, `{"object":"list","data":[
			{"object":"embedding","index":1,"embedding":"AADAPwAAAMA="},
			{"object":"embedding","index":0,"embedding":[0.25,0.5]}],"model":"m"}`)
	}))
	defer up.Close()
	p, err := New(Config{Name: "o", Type: TypeOpenAI, BaseURL: up.URL + "/v1", APIKeyEnv: "K"}, func(string) string { return "sk-x" })
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEmbedder(p, "text-embedding-3-small")
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := e.Embed(context.Background(), []string{"first", "second"})
	if err != nil {
		t.Fatal(err)
	}
	if path != "/v1/embeddings" || auth != "Bearer sk-x" || model != "text-embedding-3-small" || !slices.Equal(input, []string{"first", "second"}) {
		t.Fatalf("request: %s %q %q %v", path, auth, model, input)
	}
	if len(vecs) != 2 || !slices.Equal(vecs[0], []float32{0.25, 0.5}) || !slices.Equal(vecs[1], []float32{1.5, -2}) {
		t.Fatalf("vectors %v", vecs)
	}
}

func TestEmbedderErrors(t *testing.T) {
	answer := make(chan func(w http.ResponseWriter), 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (<-answer)(w) }))
	defer up.Close()
	p, err := New(Config{Name: "o", Type: TypeOpenAI, BaseURL: up.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := NewEmbedder(p, "m")
	status := func(code int, body string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) { w.WriteHeader(code); io.WriteString(w, body) }
	}
	for _, tc := range []struct {
		name      string
		answer    func(w http.ResponseWriter)
		want      string
		temporary bool
	}{
		{"rate limited", status(429, `{"error":{"message":"Rate limit reached","type":"requests"}}`), "status 429: Rate limit reached", true},
		{"server error", status(503, `upstream down`), "status 503: upstream down", true},
		{"ollama error", status(404, `{"error":"model \"m\" not found, try pulling it first"}`), `status 404: model "m" not found`, false},
		{"too few", status(200, `{"data":[{"index":0,"embedding":[1]}]}`), "1 vectors for 2 texts", false},
		{"lengths differ", status(200, `{"data":[{"index":0,"embedding":[1]},{"index":1,"embedding":[1,2]}]}`), "vectors of 1 and 2 values", false},
		{"repeated index", status(200, `{"data":[{"index":0,"embedding":[1]},{"index":0,"embedding":[2]}]}`), "repeated index", false},
		{"empty vector", status(200, `{"data":[{"index":0,"embedding":[]},{"index":1,"embedding":[2]}]}`), "no values", false},
		{"not numbers", status(200, `{"data":[{"index":0,"embedding":["x"]},{"index":1,"embedding":[2]}]}`), "not an array of numbers", false},
		{"not json", status(200, `<html>`), "not an embeddings list", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer <- tc.answer
			_, err := e.Embed(context.Background(), []string{"a", "b"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			var ee *EmbeddingsError
			if temporary := errors.As(err, &ee) && ee.Temporary(); temporary != tc.temporary {
				t.Fatalf("err = %#v: temporary %v, want %v", err, temporary, tc.temporary)
			}
		})
	}
}

// TestEmbedderDeadline: a provider that does not answer in time gives
// the context's error.
func TestEmbedderDeadline(t *testing.T) {
	done := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server notices a client gone only once the body is read
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer up.Close()
	defer close(done)
	p, _ := New(Config{Name: "o", Type: TypeOpenAI, BaseURL: up.URL}, nil)
	e, _ := NewEmbedder(p, "m")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := e.Embed(ctx, []string{"a"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
}

func TestEmbedderProviders(t *testing.T) {
	for _, typ := range []string{TypeAnthropic, TypeGemini} {
		p, err := New(Config{Name: "x", Type: typ, BaseURL: "https://example.invalid/v1"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewEmbedder(p, "m"); !errors.Is(err, ErrNoEmbeddings) {
			t.Errorf("%s: err = %v, want ErrNoEmbeddings", typ, err)
		}
	}
	p, _ := New(Config{Name: "mock", Type: TypeMock}, nil)
	if _, err := NewEmbedder(p, ""); err == nil {
		t.Error("no model: no error")
	}
	e, err := NewEmbedder(p, "mock-embed")
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := e.Embed(context.Background(), []string{"rate limit the API"})
	want, _ := mock.Embedding("rate limit the API", mock.EmbeddingDims)
	if err != nil || len(vecs) != 1 || !slices.Equal(vecs[0], want) {
		t.Fatalf("mock: %v, %v", vecs, err)
	}
}

// FuzzParseEmbeddings: whatever a provider answers, parseEmbeddings
// returns an error or n vectors of one length of finite values, and never
// panics.
func FuzzParseEmbeddings(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":0,"embedding":[0.25,0.5]},{"index":1,"embedding":"AADAPwAAAMA="}]}`), 2)
	f.Add([]byte(`{"data":[{"index":1,"embedding":[1]},{"index":0,"embedding":[2]}]}`), 2)
	f.Add([]byte(`{"data":[{"embedding":[1e39]}]}`), 1)
	f.Add([]byte(`{"data":[{"index":-1,"embedding":"AAA="}]}`), 1)
	f.Add([]byte(`{"error":{"message":"no"}}`), 0)
	f.Fuzz(func(t *testing.T, raw []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		vecs, err := parseEmbeddings(raw, n)
		if err != nil {
			return
		}
		if len(vecs) != n {
			t.Fatalf("%d vectors for %d texts", len(vecs), n)
		}
		for i, v := range vecs {
			if len(v) == 0 || len(v) != len(vecs[0]) {
				t.Fatalf("vector %d of %d values, the first of %d", i, len(v), len(vecs[0]))
			}
			if finite(v) != nil {
				t.Fatalf("vector %d holds a value that is not finite", i)
			}
		}
	})
}
