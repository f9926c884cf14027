package recall

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Embedder turns texts into vectors with one embedding model: a provider's
// OpenAI-compatible POST /embeddings (package providers), or a test's.
type Embedder interface {
	// Model names the model whose vectors Embed returns; vectors of
	// another model are never compared with them.
	Model() string
	// Embed returns one vector per text, in order, all of one length. It
	// returns an error when the call fails, ctx ends first, or the answer
	// does not hold one vector per text.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbeddingsConfig is recall.embeddings in the configuration: semantic
// recall through a provider's embeddings. It is off while Provider is
// empty.
type EmbeddingsConfig struct {
	// Provider names the provider (one of providers:, or "mock" with
	// --mock) whose OpenAI-compatible POST /embeddings embeds goals, with
	// its base URL and its key (api_key_env). Empty: off, the default.
	Provider string `yaml:"provider"`
	// Model is the embedding model asked for (text-embedding-3-small,
	// nomic-embed-text...). Required with Provider. Stored vectors of
	// another model are not used: each solution is embedded again.
	Model string `yaml:"model"`
	// Timeout is recall's time budget for embedding a new task, on the
	// first request of a run: past it, or when the call fails, recall is
	// lexical for that run (counted in
	// scarproxy_recall_embedding_fallbacks_total). Default 300ms.
	Timeout time.Duration `yaml:"timeout"`
	// MinSimilarity is the cosine similarity of the goal embeddings at or
	// above which a solution the words do not find is recalled, in [0,1].
	// Default 0.6. It depends on the model: raise it for models whose
	// unrelated texts score high.
	MinSimilarity float64 `yaml:"min_similarity"`
}

// Defaults of EmbeddingsConfig.
const (
	DefaultEmbeddingsTimeout       = 300 * time.Millisecond
	DefaultEmbeddingsMinSimilarity = 0.6
)

// DefaultEmbeddingsConfig returns recall.embeddings' defaults: off, a
// 300ms budget, a cosine threshold of 0.6.
func DefaultEmbeddingsConfig() EmbeddingsConfig {
	return EmbeddingsConfig{Timeout: DefaultEmbeddingsTimeout, MinSimilarity: DefaultEmbeddingsMinSimilarity}
}

// Enabled reports whether semantic recall is configured.
func (c EmbeddingsConfig) Enabled() bool { return c.Provider != "" }

// Validate reports every invalid key of recall.embeddings.
func (c EmbeddingsConfig) Validate() error {
	var errs []error
	if c.Provider != "" && c.Model == "" {
		errs = append(errs, errors.New("recall.embeddings.model: required with recall.embeddings.provider"))
	}
	if c.Provider == "" && c.Model != "" {
		errs = append(errs, errors.New("recall.embeddings.provider: required with recall.embeddings.model"))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("recall.embeddings.timeout: must not be negative, got %v", c.Timeout))
	}
	if !(c.MinSimilarity >= 0 && c.MinSimilarity <= 1) {
		errs = append(errs, fmt.Errorf("recall.embeddings.min_similarity: must be in [0,1], got %v", c.MinSimilarity))
	}
	return errors.Join(errs...)
}
