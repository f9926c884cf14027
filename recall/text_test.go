package recall

import (
	"github.com/scarproxy/scarproxy/store"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestAnalyze(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"camelCase", "parseConfig", []string{"pars", "config"}},
		{"snake_case", "parse_config", []string{"pars", "config"}},
		{"acronym", "ParseHTTPResponse", []string{"pars", "http", "respons"}},
		{"digits stay", "HTTP2 utf8 404", []string{"http2", "utf8", "404"}},
		{"plural", "Files", []string{"file"}},
		{"gerund", "fetching", []string{"fetch"}},
		{"synonym to canonical", "download retrieve get", []string{"fetch", "fetch", "fetch"}},
		{"phrase", "the web pages", []string{"html"}},
		{"phrase with stopword", "look up the user", []string{"find", "user"}},
		{"compound", "webpage website html", []string{"html", "html", "html"}},
		{"stopwords only", "the of and to please", nil},
		{"single letters dropped", "a b x 7", []string{"7"}},
		{"punctuation", "fix: the (broken) build!", []string{"fix", "error", "build"}},
		{"chinese bigrams", "下载网页", []string{"下载", "载网", "网页"}},
		{"single han", "下", []string{"下"}},
		{"mixed scripts", "下载html", []string{"下载", "html"}},
		{"russian truncation", "ошибки ошибку", []string{"ошибк", "ошибк"}},
		{"accents truncation", "télécharger télécharge", []string{"téléc", "téléc"}},
		{"combining mark kept in word", "cafe\u0301s", []string{"cafe\u0301"}},
		{"pr synonym", "open a pull request, my PR", []string{"open", "pullrequest", "pullrequest"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := analyze(tc.in, maxGoalRunes).terms; !slices.Equal(got, tc.want) {
				t.Fatalf("analyze(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestAnalyzeNorm(t *testing.T) {
	got := analyze("Fix the parseConfig  bug, please!", maxGoalRunes).norm
	if want := "fix parse config bug"; got != want {
		t.Fatalf("norm = %q, want %q", got, want)
	}
}

func TestAnalyzeCapsInput(t *testing.T) {
	long := strings.Repeat("alpha ", maxGoalRunes) + "omega"
	if got := analyze(long, maxGoalRunes).terms; slices.Contains(got, "omega") {
		t.Fatalf("analysis read past %d runes", maxGoalRunes)
	}
}

// TestSynonymTable checks that no stem belongs to two groups: the later
// group would silently win.
func TestSynonymTable(t *testing.T) {
	owner := map[string]string{}
	for _, g := range synonymGroups {
		canon := stemWord(g[0])
		for _, w := range g {
			st := stemWord(w)
			if o, ok := owner[st]; ok && o != canon {
				t.Errorf("stem %q of %q is in groups %q and %q", st, w, o, canon)
			}
			owner[st] = canon
		}
	}
	for _, p := range synonymPhrases {
		if got := analyze(p[0]+" "+p[1], maxGoalRunes).terms; len(got) != 1 {
			t.Errorf("phrase %q %q gives %q, want one term", p[0], p[1], got)
		}
	}
}

func TestTrigramsAndDice(t *testing.T) {
	tests := []struct {
		a, b     string
		min, max float64
	}{
		{"receive file", "receive file", 1, 1},
		{"recieve file", "receive file", 0.5, 0.9},
		{"dataframe", "data frame", 0.5, 0.8},
		{"rotate tls", "bake bread", 0, 0.1},
		{"", "anything", 0, 0},
	}
	for _, tc := range tests {
		d := dice(trigrams(tc.a), trigrams(tc.b))
		if d < tc.min || d > tc.max {
			t.Errorf("dice(%q, %q) = %.2f, want in [%.2f, %.2f]", tc.a, tc.b, d, tc.min, tc.max)
		}
	}
	tr := trigrams("abcabc")
	if !slices.IsSorted(tr) || len(slices.Compact(slices.Clone(tr))) != len(tr) {
		t.Fatalf("trigrams not sorted and distinct: %v", tr)
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"parseConfig", "ParseHTTPResponse", "下载网页", "ошибки", "a\xffb", "web page", "\u0301\u0301x", "ǅungla", "İstanbul", "Write a CSV parser for the export", "don't remove it from x to y", "Support right-to-left layouts at the point of sale", "Go to definition, from Go to Rust", "Normalise the colours of the catalogue", "Publish the ROS 2 node's odometry as an RSS feed"} {
		f.Add(s)
	}
	ix := rankingIndex(f)
	f.Fuzz(func(t *testing.T, s string) {
		a := analyze(s, maxGoalRunes)
		for _, term := range a.terms {
			if term == "" || !utf8.ValidString(term) || strings.IndexFunc(term, unicode.IsSpace) >= 0 {
				t.Fatalf("bad term %q from %q", term, s)
			}
		}
		if !utf8.ValidString(a.norm) {
			t.Fatalf("bad norm %q from %q", a.norm, s)
		}
		for _, o := range a.lead.objs {
			if !slices.Contains(a.terms, o.term) || o.flags == 0 {
				t.Fatalf("lead word %q (%x) from %q is not a term of %q", o.term, o.flags, s, a.terms)
			}
		}
		tr := trigrams(a.norm)
		if !slices.IsSorted(tr) {
			t.Fatalf("trigrams not sorted")
		}
		for _, m := range ix.Search(Query{Workspace: "w", Goal: s, K: 5}) {
			if m.Similarity <= 0 || m.Similarity > 1 {
				t.Fatalf("similarity %v for %q", m.Similarity, s)
			}
		}
		// The text as a stored goal: a match's reason is made of its words.
		own := NewIndex()
		own.Put(store.Solution{ID: "f", Workspace: "w", Goal: s})
		low := strings.ToLower(s)
		for _, q := range []string{s, "Write a CSV parser", "migrate the users from MySQL to PostgreSQL"} {
			for _, m := range own.Search(Query{Workspace: "w", Goal: q, K: 1}) {
				for _, w := range strings.Fields(m.Why.Action + " " + m.Why.Object) {
					if !utf8.ValidString(w) || !strings.Contains(low, w) {
						t.Fatalf("reason word %q of %+v is not in the goal %q", w, m.Why, s)
					}
				}
			}
		}
	})
}

// splitWordsByRunes is splitWords as it was before ASCII runs were cut by
// their bytes: every run read rune by rune, the reference FuzzSplitWords
// holds splitWords to.
func splitWordsByRunes(text string, maxRunes int, fn func(w string, cjk bool)) {
	var run []rune
	n := 0
	for _, r := range text {
		if n >= maxRunes {
			break
		}
		n++
		if isWordRune(r) {
			run = append(run, r)
			continue
		}
		if len(run) > 0 {
			splitRunes(run, fn)
		}
		run = run[:0]
	}
	if len(run) > 0 {
		splitRunes(run, fn)
	}
}

// FuzzSplitWords: splitWords gives the words, in order, that reading
// every run by its runes gives.
func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"parseConfig HTTPServer parse_config", "PostgreSQL on GitHub in JavaScript", "OTel SQLite iOS macOS", "ABCdef9Ghi", "下载网页 ошибкиError", "a\xffB", "ǅungla İstanbul", "x1Y2z3", "JSONParser", "IPv6Address", ""} {
		f.Add(s, 2000)
		f.Add(s, 5)
	}
	type split struct {
		w   string
		cjk bool
	}
	f.Fuzz(func(t *testing.T, s string, maxRunes int) {
		var got, want []split
		splitWords(s, maxRunes, func(w string, cjk bool) { got = append(got, split{w, cjk}) })
		splitWordsByRunes(s, maxRunes, func(w string, cjk bool) { want = append(want, split{w, cjk}) })
		if !slices.Equal(got, want) {
			t.Fatalf("%q (%d runes):\n got %v\nwant %v", s, maxRunes, got, want)
		}
	})
}
