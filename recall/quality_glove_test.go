package recall

import (
	"bufio"
	"compress/gzip"
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/scarproxy/scarproxy/store"
)

// gloveWord splits a text as recall/internal/glovegen does.
var gloveWord = regexp.MustCompile(`[a-z0-9]+(?:'[a-z]+)?`)

// gloveSkip are function words left out of a text's vector: they are in
// every task and pull every vector toward theirs.
var gloveSkip = map[string]bool{
	"a": true, "an": true, "the": true, "to": true, "of": true, "and": true, "or": true, "in": true,
	"on": true, "for": true, "with": true, "from": true, "by": true, "at": true, "as": true, "into": true,
	"is": true, "are": true, "be": true, "it": true, "its": true, "this": true, "that": true, "so": true,
	"when": true, "we": true, "our": true, "they": true, "their": true, "them": true, "each": true, "every": true,
}

// gloveEmbedder embeds a text as the mean of the GloVe vectors of its
// words (testdata/quality/glove.txt.gz), normalised: the simplest
// sentence vector a general-English word model gives.
type gloveEmbedder map[string][]float32

func loadGlove(t *testing.T) gloveEmbedder {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "quality", "glove.txt.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	g := gloveEmbedder{}
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 101 {
			t.Fatalf("glove.txt.gz: a line of %d fields", len(fs))
		}
		v := make([]float32, 100)
		for i, s := range fs[1:] {
			x, err := strconv.ParseFloat(s, 32)
			if err != nil {
				t.Fatal(err)
			}
			v[i] = float32(x)
		}
		g[fs[0]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g gloveEmbedder) embed(text string) []float32 {
	out := make([]float32, 100)
	for _, w := range gloveWord.FindAllString(strings.ToLower(text), -1) {
		if v := g[w]; v != nil && !gloveSkip[w] {
			for i := range out {
				out[i] += v[i]
			}
		}
	}
	var sum float64
	for _, x := range out {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		out[0] = 1 // no word known: a vector of its own
		return out
	}
	k := float32(1 / math.Sqrt(sum))
	for i := range out {
		out[i] *= k
	}
	return out
}

// runHybrid measures a set through Fuse, each goal and query embedded by
// g, at the cosine minCos.
func runHybrid(t *testing.T, g gloveEmbedder, file string, minCos float64) qualityFigures {
	t.Helper()
	set, _ := loadQualitySet(t, file)
	var feed changeList
	for i := range set.Solutions {
		sol := set.solution(i)
		sol.Embedding = &store.Embedding{Model: "glove", Vector: g.embed(sol.Goal)}
		feed = append(feed, store.SolutionChange{Seq: int64(i + 1), Solution: sol})
	}
	ix, vs := NewIndex(), NewVectors()
	vs.SetModel("glove")
	if _, _, err := ix.Follow(context.Background(), vs.Tee(feed), 0); err != nil {
		t.Fatal(err)
	}
	return scoreQueries(set, func(goal string) []Match {
		return Fuse(ix, vs, Query{Workspace: "w", Goal: goal, K: 1, MinSimilarity: DefaultMinSimilarity}, g.embed(goal), minCos)
	})
}

// TestQualityHybridGloVe measures semantic recall's fusion with an
// embedding model at hand: GloVe's 100-dimensional word vectors (public
// domain; recall/internal/glovegen), a text embedded as the mean of its
// words'. The cosine threshold was looked at on sets 3 to 9 (tune data
// for the lexical rules, never for this) from 0.80 to 0.95: at 0.95
// almost nothing changes, and below it every rewording found more costs
// several false recalls. At 0.90, the first measure: sets 3 to 9 find 4
// more rewordings (173 of 525) for 27 more false recalls (107 of 1,037);
// the tenth set, held out, 5 more (20 of 96) for 10 more (39 of 178). A
// mean of word vectors does not tell tasks apart better than the words
// do: semantic recall needs a sentence-embedding model. Report-only,
// bounded by that first measure, so that the figures cannot move unseen.
func TestQualityHybridGloVe(t *testing.T) {
	g := loadGlove(t)
	const minCos = 0.90
	var lexTune, hybTune qualityFigures
	for _, file := range []string{"heldout3.json", "heldout4.json", "heldout5.json", "heldout6.json", "heldout7.json", "heldout8.json", "heldout9.json"} {
		lex, hyb := runHybrid(t, g, file, 2), runHybrid(t, g, file, minCos)
		lexTune.add(lex)
		hybTune.add(hyb)
	}
	lex10, hyb10 := runHybrid(t, g, "heldout10.json", 2), runHybrid(t, g, "heldout10.json", minCos)
	t.Logf("sets 3-9, lexical: %s", lexTune)
	t.Logf("sets 3-9, GloVe hybrid at %.2f: %s", minCos, hybTune)
	t.Logf("set 10, lexical: %s", lex10)
	t.Logf("set 10, GloVe hybrid at %.2f: %s", minCos, hyb10)
	for _, c := range []struct {
		label         string
		f             qualityFigures
		found, falses int
	}{
		{"sets 3-9", hybTune, 173, 107},
		{"set 10", hyb10, 20, 39},
	} {
		if c.f.found < c.found || c.f.falseRecalls() > c.falses {
			t.Errorf("%s through the GloVe hybrid: %s; first measured at %d found, %d false recalls", c.label, c.f, c.found, c.falses)
		}
	}
}

// add sums g into f.
func (f *qualityFigures) add(g qualityFigures) {
	f.reworded += g.reworded
	f.found += g.found
	f.confusable += g.confusable
	f.confRejects += g.confRejects
	f.unrelated += g.unrelated
	f.unrelRejects += g.unrelRejects
}
