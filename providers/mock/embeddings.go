package mock

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
	"unicode"
)

// EmbeddingDims is the length of the mock's embeddings when the request
// asks for none ("dimensions").
const EmbeddingDims = 256

// maxEmbeddingDims is the most "dimensions" the mock accepts.
const maxEmbeddingDims = 4096

// embeddings answers POST /embeddings as OpenAI does, deterministically:
// each input text's vector is its bag of word stems (words lowercased,
// English stopwords dropped, a plural or verb ending cut), each stem
// hashed (FNV-1a) to one dimension and a sign, normalised to length 1.
// Texts that share stems are near, texts that share none are orthogonal
// up to hash collisions: enough for the whole path to run offline, not a
// model of meaning. "input" is a string or an array of strings;
// "dimensions" sets the length (default [EmbeddingDims]); "encoding_format"
// "base64" gives each vector as base64 of little-endian float32s.
func (m *Transport) embeddings(req *http.Request, body []byte) (*http.Response, error) {
	var in struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		Dimensions     int             `json:"dimensions"`
		EncodingFormat string          `json:"encoding_format"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return errorResponse(req, http.StatusBadRequest, "We could not parse the JSON body of your request.", "invalid_request_error", ""), nil
	}
	var texts []string
	if err := json.Unmarshal(in.Input, &texts); err != nil {
		var one string
		if err := json.Unmarshal(in.Input, &one); err != nil {
			return errorResponse(req, http.StatusBadRequest, "'input' must be a string or an array of strings.", "invalid_request_error", ""), nil
		}
		texts = []string{one}
	}
	if len(texts) == 0 || in.Model == "" {
		return errorResponse(req, http.StatusBadRequest, "'model' and a non-empty 'input' are required.", "invalid_request_error", ""), nil
	}
	dims := EmbeddingDims
	if in.Dimensions != 0 {
		if in.Dimensions < 1 || in.Dimensions > maxEmbeddingDims {
			return errorResponse(req, http.StatusBadRequest, "'dimensions' must be 1 to 4096.", "invalid_request_error", ""), nil
		}
		dims = in.Dimensions
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Model: in.Model}
	for i, t := range texts {
		vec, words := Embedding(t, dims)
		out.Usage.PromptTokens += words
		var e any = vec
		if in.EncodingFormat == "base64" {
			b := make([]byte, 4*len(vec))
			for j, x := range vec {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			e = base64.StdEncoding.EncodeToString(b)
		}
		out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: e})
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	b, _ := json.Marshal(out)
	return jsonResponse(req, http.StatusOK, b), nil
}

// Embedding is the mock's embedding of text in dims dimensions (see
// POST /embeddings), and the number of words it read.
func Embedding(text string, dims int) ([]float32, int) {
	vec := make([]float64, dims)
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	n := 0
	for _, w := range words {
		if embedStopwords[w] {
			continue
		}
		n++
		h := fnv.New64a()
		h.Write([]byte(stem(w)))
		sum := h.Sum64()
		sign := 1.0
		if sum>>63 == 1 {
			sign = -1
		}
		vec[sum%uint64(dims)] += sign
	}
	if n == 0 {
		vec[0] = 1 // no word: one vector for every empty text
	}
	var norm float64
	for _, x := range vec {
		norm += x * x
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dims)
	for i, x := range vec {
		out[i] = float32(x / norm)
	}
	return out, len(words)
}

// stem cuts a common English ending off w: enough that "tests",
// "testing" and "tested" embed alike.
func stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if len(w) > len(suf)+2 && strings.HasSuffix(w, suf) {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

var embedStopwords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true, "in": true,
	"on": true, "for": true, "from": true, "with": true, "by": true, "at": true, "as": true, "is": true,
	"it": true, "its": true, "this": true, "that": true, "into": true, "be": true, "are": true,
}
