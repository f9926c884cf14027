package providers

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
)

// maxEmbeddingsBody caps the answer an Embedder reads.
const maxEmbeddingsBody = 64 << 20

// ErrNoEmbeddings is returned by NewEmbedder for a provider whose type has
// no OpenAI-compatible POST /embeddings (anthropic, gemini).
var ErrNoEmbeddings = errors.New("providers: the provider's type has no OpenAI-compatible embeddings")

// Embedder asks one provider's OpenAI-compatible POST /embeddings (OpenAI,
// Ollama, vLLM, LM Studio, the mock) for the vectors of texts with one
// model. Requests go through the provider as the proxy's own do: its base
// URL, its transport and, when it has one, its key (a provider without a
// key sends none: fine for a local server). It is safe for concurrent
// use.
type Embedder struct {
	p     *Provider
	model string
}

// NewEmbedder returns an Embedder of model through p. It returns
// ErrNoEmbeddings for a provider of type anthropic or gemini, and an
// error for an empty model.
func NewEmbedder(p *Provider, model string) (*Embedder, error) {
	if t := p.Config().Type; t != TypeOpenAI && t != TypeMock {
		return nil, fmt.Errorf("provider %s (type %s): %w", p.Name(), t, ErrNoEmbeddings)
	}
	if model == "" {
		return nil, errors.New("providers: embeddings: a model is required")
	}
	return &Embedder{p: p, model: model}, nil
}

// Model returns the embedding model asked for.
func (e *Embedder) Model() string { return e.model }

// Provider returns the provider the embeddings come from.
func (e *Embedder) Provider() *Provider { return e.p }

// Embed returns the vectors of texts, in order. It returns an error when
// the provider cannot be reached or ctx ends first (wrapping ctx's
// error), when it answers other than 2xx (with the status and the
// answer's error message), or when the answer does not hold one vector
// per text, all of one length, of finite values.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	body, err := json.Marshal(struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}{e.model, texts})
	if err != nil {
		return nil, fmt.Errorf("providers: embeddings: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("providers: embeddings: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := e.p.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("providers: embeddings from %s: %w", e.p.Name(), ctx.Err())
		}
		return nil, fmt.Errorf("providers: embeddings from %s: %w", e.p.Name(), err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxEmbeddingsBody+1))
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("providers: embeddings from %s: read: %w", e.p.Name(), err)
	}
	if res.StatusCode/100 != 2 {
		return nil, &EmbeddingsError{Provider: e.p.Name(), StatusCode: res.StatusCode, Message: errorMessage(raw)}
	}
	if len(raw) > maxEmbeddingsBody {
		return nil, fmt.Errorf("providers: embeddings from %s: answer over %d bytes", e.p.Name(), maxEmbeddingsBody)
	}
	vecs, err := parseEmbeddings(raw, len(texts))
	if err != nil {
		return nil, fmt.Errorf("providers: embeddings from %s: %w", e.p.Name(), err)
	}
	return vecs, nil
}

// EmbeddingsError is a provider's answer other than 2xx to POST /embeddings.
type EmbeddingsError struct {
	Provider   string
	StatusCode int
	Message    string // the answer's error message, capped; may be empty
}

func (e *EmbeddingsError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("providers: embeddings from %s: status %d", e.Provider, e.StatusCode)
	}
	return fmt.Sprintf("providers: embeddings from %s: status %d: %s", e.Provider, e.StatusCode, e.Message)
}

// Temporary reports whether trying again later may succeed: a 408, 429
// or 5xx.
func (e *EmbeddingsError) Temporary() bool {
	return e.StatusCode == http.StatusRequestTimeout || e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500
}

// errorMessage is the message of an OpenAI-shaped error body, or its
// first bytes, on one line of at most 200 runes.
func errorMessage(raw []byte) string {
	var b struct {
		Error json.RawMessage `json:"error"`
	}
	msg := string(raw)
	if json.Unmarshal(raw, &b) == nil && len(b.Error) > 0 {
		var e struct {
			Message string `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(b.Error, &e) == nil && e.Message != "":
			msg = e.Message
		case json.Unmarshal(b.Error, &s) == nil: // Ollama: {"error":"..."}
			msg = s
		}
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if r := []rune(msg); len(r) > 200 {
		msg = string(r[:200]) + "…"
	}
	return msg
}

// parseEmbeddings reads n vectors from an OpenAI embeddings answer: each
// item's "embedding" an array of numbers or a base64 string of
// little-endian float32s, placed by its "index".
func parseEmbeddings(raw []byte, n int) ([][]float32, error) {
	var body struct {
		Data []struct {
			Index     *int            `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, fmt.Errorf("answer is not an embeddings list: %w", err)
	}
	if len(body.Data) != n {
		return nil, fmt.Errorf("%d vectors for %d texts", len(body.Data), n)
	}
	out := make([][]float32, n)
	for i, d := range body.Data {
		at := i
		if d.Index != nil {
			at = *d.Index
		}
		if at < 0 || at >= n || out[at] != nil {
			return nil, fmt.Errorf("vector %d: bad or repeated index %d", i, at)
		}
		v, err := parseVector(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("vector %d: %w", i, err)
		}
		if len(v) == 0 {
			return nil, fmt.Errorf("vector %d: no values", i)
		}
		out[at] = v
	}
	for i := range out {
		if len(out[i]) != len(out[0]) {
			return nil, fmt.Errorf("vectors of %d and %d values", len(out[0]), len(out[i]))
		}
	}
	return out, nil
}

func parseVector(raw json.RawMessage) ([]float32, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, errors.New("embedding is not base64 of float32s")
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, finite(v)
	}
	var fs []float64
	if err := json.Unmarshal(raw, &fs); err != nil {
		return nil, errors.New("embedding is not an array of numbers")
	}
	v := make([]float32, len(fs))
	for i, f := range fs {
		v[i] = float32(f)
	}
	return v, finite(v)
}

func finite(v []float32) error {
	for _, x := range v {
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("embedding holds a value that is not a finite number")
		}
	}
	return nil
}
