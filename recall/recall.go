// Package recall is scarproxy's success memory logic: it ranks stored
// solutions against the goal of a new task, renders the recall block
// injected into the system message, and builds the solution captured from a
// finished conversation.
//
// It works on plain values ([store.Solution]) and does no I/O: the proxy
// loads solutions from the store into an [Index] at start-up and mirrors
// every write into it. It must not import Echo, bbolt, pgx or any scarproxy
// package other than store (for its record types) and guard/quoted (the
// quoting path every block shows stored text through).
//
// # Ranking
//
// Text is tokenised in any script (letters and digits per Unicode),
// identifiers are split (parseConfig, parse_config, ParseHTTPResponse),
// words are lowercased, English stopwords dropped, English words stemmed
// (snowball, plus irregular forms such as "wrote" and the agent nouns of a
// list of task verbs: parser, writer, runner and compressor fold into
// parse, write, run and compress), words of other alphabets cut to their
// first five runes, CJK runs indexed as character bigrams, and a
// vocabulary maps the actions, things, acronyms and tool names of
// programming tasks to canonical terms (fetch/get/download, web
// page/html/site, throttle/rate limit, memoize/cache, Postgres/PostgreSQL,
// k8s/Kubernetes, ...; see vocab.go for its sources), and, for words it
// does not name, WordNet 3.0's synsets and derived nouns (cursor/pointer,
// pay/payment; wordnet.go, from a generated table). Names of the
// vocabulary written in camel case (PostgreSQL, JavaScript) stay whole.
//
// A goal is scored by BM25F (k1 1.2, b 0.75) over the goal field, weighted
// 3, and the approach field; each query word counts once. Idf counts 10
// prior solutions besides the workspace's own, none holding the word, or a
// quarter of them for a word of almost every task (write, fix, file...): in
// a workspace of a few solutions, raw idf calls every shared word common
// and every other word rare ("parse a CSV file" scored 0.34 against a lone
// "write a CSV parser", its "file" outweighing "parse" and "CSV"). A query
// word the workspace has never seen is corrected to the most frequent
// indexed word one edit away, first letter kept (typos such as "recieve"),
// at 80% weight.
//
// Two coverages come out of it. The query coverage q is the BM25F score,
// each query word's contribution capped at what it adds to the query's
// score against itself, divided by that self-score: the idf-weighted share
// of the query a solution covers. The goal coverage g is the idf-weighted
// share of the stored goal's words that the query holds. When the goal is
// better covered than the query (the query says more: "parse CSV data from
// a file" for "write a CSV parser"), their harmonic mean counts instead:
//
//	c = q                if g <= q
//	c = 2qg / (q + g)    otherwise
//
// so that words a query adds cost less than words it lacks; c is at most
// 2q/(1+q), so a long query that happens to hold a short goal's words
// still scores low. c is blended with the Dice similarity of the character
// trigrams of the goals:
//
//	similarity = max(0.8*c + 0.2*dice, 0.6*dice)
//
// # Direction
//
// A solution whose main action is the opposite of the query's (export for
// import, a CSV writer for a CSV parser, removing hooks for adding them, a
// Kafka consumer for a producer) has its similarity multiplied by 0.3, so
// that 1 falls below the default threshold. The actions are read from the
// goals' leading phrases against one table of opposite families
// (read/write, parse/generate, import/export, consume/produce,
// download/upload, add/remove, enable/disable, compress/decompress,
// encrypt/decrypt, start/stop, lock/unlock...); in "write a CSV parser"
// the agent noun, not "write", gives the direction. Opposite actions count
// only on the same thing: words shared by the leading phrases, or one
// goal's source being the other's target ("serialize orders to JSON",
// "deserialize JSON into orders"); "parse the commits into a changelog" is
// not the opposite of "generate a changelog from the commits". Direction
// is read from English words only, and a leading negation ("do not
// delete...") leaves it unknown.
//
// # Task parts
//
// A solution whose task does not fit the query's has its similarity
// multiplied by 0.3 as well: another named action (backup for restore),
// a leading phrase that shares no word with the other goal (the utility
// for its tests), a source and a target swapped (from MySQL to PostgreSQL
// and back, "replace moment with date-fns" and the reverse), or another
// tool of one category (a Python CLI for a Rust
// one, Elasticsearch for PostgreSQL, a server for a client). parts.go
// states the rules. A match says why it was recalled ([Match.Why]): the
// action and the object the goals share.
//
// Similarities are rounded to two decimals; among equal ones verified
// solutions win, then higher confidence, then the most recently updated.
// The default threshold, 0.35, was calibrated on the tune set of
// testdata/quality (at 0.30 three more false recalls, at 0.40 one reworded
// task fewer) and is checked on its
// held-out set, never tuned on (quality_test.go; BENCHMARKS.md gives the
// figures).
//
// # Index
//
// [Index] keeps, per workspace, an inverted index of terms (postings
// carrying field frequencies and lengths) and of goal trigrams, plus a
// deletion-neighbourhood table for typo correction. Put and Delete update
// only the postings of the solution's own terms and trigrams (swap-remove,
// each document knowing its position in each list) and the length sums.
//
// Search prunes without changing the results, within two effort bounds.
// A document's bound assumes the query covers its goal whole (g = 1, so
// c <= 2q/(1+q)), since g is known only once the document is evaluated.
// Query terms are read highest bound first (MaxScore): the most promising
// documents are evaluated early to raise the threshold, a term's postings
// are read only while they can still lift an unseen document over it, and
// candidates are evaluated best bound first until none can. The effort
// bounds: trigram similarity is computed for at most 32 candidates per
// result asked (the best by BM25 bound; it only matters when more are that
// close), and solutions sharing no term with the goal are found through
// trigram postings (rarest first, at most 4096 read, 64 evaluated) only
// when fewer results than asked were found.
//
// # Blocks
//
// [Block] keeps the reference wording; stored text is sanitised so that it
// cannot close the block or add lines. [Strip] removes earlier blocks
// before a new one is injected.
package recall

import (
	"errors"
	"fmt"
)

// Config is the recall section of the configuration.
type Config struct {
	// MinSimilarity is the lowest similarity recalled, in [0,1]. Default
	// 0.35: paraphrases and synonyms of a stored goal score 0.5 and
	// more, unrelated tasks that share a common word, tasks that go the
	// other way (export for import) and tasks whose parts do not fit
	// (another action, object, direction or tool) 0.3 and less (see the
	// ranking tables and the quality sets in the tests). Lower it and
	// unrelated solutions leak into prompts; raise it and reworded tasks
	// are missed.
	MinSimilarity float64 `yaml:"min_similarity"`
	// MaxResults is the number of solutions in a recall block, 1..5.
	// Default 1. Each one costs prompt tokens on every turn.
	MaxResults int `yaml:"max_results"`
	// AutoCapture stores a solution for every finished conversation that
	// used tools. Default true.
	AutoCapture bool `yaml:"auto_capture"`
	// Embeddings turns on semantic recall through a provider's
	// embeddings (see EmbeddingsConfig, fuse.go). Off by default.
	Embeddings EmbeddingsConfig `yaml:"embeddings"`
}

// DefaultMinSimilarity is the default of Config.MinSimilarity.
const DefaultMinSimilarity = 0.35

// DefaultConfig returns the defaults: min_similarity 0.35, max_results 1,
// auto_capture true, embeddings off.
func DefaultConfig() Config {
	return Config{MinSimilarity: DefaultMinSimilarity, MaxResults: 1, AutoCapture: true, Embeddings: DefaultEmbeddingsConfig()}
}

// Validate reports every invalid key, each named as in the YAML file
// ("recall.max_results: must be 1..5, got 9").
func (c Config) Validate() error {
	var errs []error
	if !(c.MinSimilarity >= 0 && c.MinSimilarity <= 1) {
		errs = append(errs, fmt.Errorf("recall.min_similarity: must be in [0,1], got %v", c.MinSimilarity))
	}
	if c.MaxResults < 1 || c.MaxResults > maxK {
		errs = append(errs, fmt.Errorf("recall.max_results: must be 1..%d, got %d", maxK, c.MaxResults))
	}
	errs = append(errs, c.Embeddings.Validate())
	return errors.Join(errs...)
}
