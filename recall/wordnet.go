package recall

import "slices"

// WordNet equivalences: words the vocabulary (vocab.go, text.go) says
// nothing of, read as one term when WordNet 3.0 gives them one sense
// ("accomplish" and "achieve", "cursor" and "pointer", "pay" and
// "payment"). The table, wordnetGroups in wordnet_table.go, is generated
// by recall/internal/wordnetgen from the WordNet database, which says how
// each word's sense is chosen; docs/guard-and-recall.md says how to
// regenerate it, and cites WordNet.
//
// The vocabulary comes first, and WordNet fills only its silences. A
// group that holds any word the vocabulary names (a synonym group's, a
// tool's, a word of a direction family, an outcome, a qualifier, a
// context word, a named or light verb, a stopword...) is left out whole:
// the vocabulary gives such words their sense in software work, and
// WordNet its most frequent sense in English ("go" is a language here,
// and WordNet's "leave"; "utility" a helper, and WordNet's
// "usefulness"). Joining the other words of the group to the
// vocabulary's term found fewer rewordings and made more false recalls on
// the tune sets (BENCHMARKS.md, "Recall quality", the tenth round).

// wordnetTerms maps the stem of a word the vocabulary does not know to the
// term of its WordNet group: the stem of the group's first word, or the
// term that word was given by an earlier group. A stem keeps the first
// term it is given, and a stem that is a term stays one: groups join
// through one word at most ("accomplish" and "fulfill" are one term,
// "achieve" and "attain" another, though WordNet's "accomplishment" is an
// "achievement").
var wordnetTerms = map[string]string{}

// initWordNet fills wordnetTerms; initVocab calls it last, once every
// table of the vocabulary is known.
func initWordNet() {
	known := vocabStems()
	terms := map[string]bool{} // the terms given so far
	var stems []string
group:
	for _, g := range wordnetGroups {
		stems = stems[:0]
		for _, w := range g {
			s := stemWord(w)
			if known[s] || isStopword(w) {
				continue group
			}
			if !slices.Contains(stems, s) {
				stems = append(stems, s)
			}
		}
		if len(stems) < 2 {
			continue
		}
		term := stems[0]
		if t, ok := wordnetTerms[term]; ok {
			term = t
		}
		for _, s := range stems {
			if _, taken := wordnetTerms[s]; s == term || taken || terms[s] {
				continue
			}
			wordnetTerms[s] = term
			terms[term] = true
		}
	}
}

// vocabWords calls fn with each word the vocabulary names as written: the
// words of its tables keyed by the written word, and of its lists.
func vocabWords(fn func(w string)) {
	for _, m := range []map[string]bool{directionWords, lightVerbs, substitutionVerbs, leadSkip, negations, conditionWords, questionWords} {
		for w := range m {
			fn(w)
		}
	}
	for w := range qualWords {
		fn(w)
	}
	for w := range outcomeWords {
		fn(w)
	}
	for w := range slotWords {
		fn(w)
	}
	for w, a := range spelledOut {
		fn(w)
		fn(a)
	}
	for w := range writtenImplies {
		fn(w)
	}
	for _, l := range [][]string{contextWords, genericActions, specificActions, authoringWords, commonWords, camelNames} {
		for _, w := range l {
			fn(w)
		}
	}
	for _, t := range toolTable {
		fn(t.name)
	}
}

// vocabStems returns the stems the vocabulary gives a sense or a rule: the
// stems of its words as written, of its synonym groups' words, of its
// phrases' terms, and of its direction families.
func vocabStems() map[string]bool {
	known := map[string]bool{}
	vocabWords(func(w string) { known[stemWord(w)] = true })
	for _, m := range []map[string]string{synonyms} {
		for s, t := range m {
			known[s], known[t] = true, true
		}
	}
	for _, t := range phrases {
		known[t] = true
	}
	for _, t := range triples {
		known[t] = true
	}
	for s := range directionStems {
		known[s] = true
	}
	for s := range toolIndex {
		known[s] = true
	}
	for s := range actionKinds {
		known[s] = true
	}
	for s := range contextTerms {
		known[s] = true
	}
	for s := range commonTerms {
		known[s] = true
	}
	return known
}

// synonym returns the term of a stem: its vocabulary group's, else its
// WordNet group's.
func synonym(stem string) (string, bool) {
	if c, ok := synonyms[stem]; ok {
		return c, true
	}
	c, ok := wordnetTerms[stem]
	return c, ok
}
