package mock

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"math"
	"net/http"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/tidwall/gjson"
)

func cosine(a, b []float64) float64 {
	var d, na, nb float64
	for i := range a {
		d += a[i] * b[i]
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	return d / math.Sqrt(na*nb)
}

// TestMockEmbeddingsSDK reads the mock's embeddings with OpenAI's SDK.
func TestMockEmbeddingsSDK(t *testing.T) {
	client := openai.NewClient(option.WithBaseURL("http://mock/v1"), option.WithAPIKey("k"), option.WithHTTPClient(mockHTTPClient()))
	texts := []string{"fix the failing unit tests", "fixing failed unit test", "rotate TLS certificates", ""}
	for _, format := range []openai.EmbeddingNewParamsEncodingFormat{openai.EmbeddingNewParamsEncodingFormatFloat, ""} {
		res, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model:          "mock-embed",
			Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
			EncodingFormat: format,
		})
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if len(res.Data) != len(texts) || res.Model != "mock-embed" || res.Usage.PromptTokens != 12 {
			t.Fatalf("%s: %d vectors, model %q, %d tokens", format, len(res.Data), res.Model, res.Usage.PromptTokens)
		}
		vecs := make([][]float64, len(texts))
		for i, d := range res.Data {
			if d.Index != int64(i) || len(d.Embedding) != EmbeddingDims {
				t.Fatalf("%s: item %d: index %d, %d dims", format, i, d.Index, len(d.Embedding))
			}
			vecs[i] = d.Embedding
			if n := cosine(d.Embedding, d.Embedding); math.Abs(n-1) > 1e-6 {
				t.Fatalf("%s: item %d not normalised", format, i)
			}
			want, _ := Embedding(texts[i], EmbeddingDims)
			for j := range want {
				if float32(d.Embedding[j]) != want[j] {
					t.Fatalf("%s: item %d differs from Embedding at %d", format, i, j)
				}
			}
		}
		// The same stems embed alike; other words are far.
		if c := cosine(vecs[0], vecs[1]); c < 0.99 {
			t.Errorf("%s: reworded forms at cosine %.3f", format, c)
		}
		if c := cosine(vecs[0], vecs[2]); c > 0.3 {
			t.Errorf("%s: unrelated texts at cosine %.3f", format, c)
		}
	}
}

func TestMockEmbeddingsRequests(t *testing.T) {
	m := fixedMock()
	res, body := do(t, m, http.MethodPost, "/embeddings", `{"model":"e","input":"one text","dimensions":8}`)
	if res.StatusCode != http.StatusOK || len(gjson.Get(body, "data.0.embedding").Array()) != 8 {
		t.Fatalf("string input, 8 dims: %d %s", res.StatusCode, body)
	}
	_, again := do(t, m, http.MethodPost, "/embeddings", `{"model":"e","input":"one text","dimensions":8}`)
	if again != body {
		t.Fatalf("not deterministic:\n%s\n%s", body, again)
	}
	// base64: the same float32s, little-endian.
	_, b64 := do(t, m, http.MethodPost, "/embeddings", `{"model":"e","input":["one text"],"dimensions":8,"encoding_format":"base64"}`)
	raw, err := base64.StdEncoding.DecodeString(gjson.Get(b64, "data.0.embedding").String())
	if err != nil || len(raw) != 32 {
		t.Fatalf("base64: %v, %d bytes: %s", err, len(raw), b64)
	}
	for i, f := range gjson.Get(body, "data.0.embedding").Array() {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != float32(f.Float()) {
			t.Fatalf("base64 value %d = %v, float form %v", i, got, f.Float())
		}
	}
	for _, bad := range []string{`{`, `{"model":"e","input":[1,2]}`, `{"model":"e","input":[]}`, `{"input":"x"}`, `{"model":"e","input":"x","dimensions":5000}`} {
		if res, body := do(t, m, http.MethodPost, "/embeddings", bad); res.StatusCode != http.StatusBadRequest || gjson.Get(body, "error.message").String() == "" {
			t.Errorf("%s: %d %s, want a 400 with OpenAI's error shape", bad, res.StatusCode, body)
		}
	}
}
