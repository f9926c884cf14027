package recall

import "github.com/kljensen/snowball/english"

// Word forms the snowball stemmer leaves apart. Both tables are applied by
// englishStem, so index terms, synonyms and directions all see them.

// irregular maps irregular verb forms to the base form stemmed instead.
var irregular = map[string]string{
	"wrote": "write", "written": "write", "rewrote": "rewrite", "rewritten": "rewrite",
	"built": "build", "rebuilt": "rebuild", "sent": "send", "ran": "run",
	"made": "make", "got": "get", "gotten": "get", "began": "begin", "begun": "begin",
}

// agentVerbs are the verbs whose agent nouns name what a task builds: a
// parser parses, a writer writes, a compressor compresses. Their agent
// forms (parse+r, run+n+er, compress+or, execute-e+or...) are folded into
// the verb's stem, so "write a CSV parser" and "parse a CSV file" share a
// term. The list is explicit because the suffix alone also makes "user",
// "server", "order" and "folder"; forms that are not words never occur.
// Forms the stemmer already folds (importer, consumer, serializer,
// generator) are harmless here.
var agentVerbs = []string{
	"parse", "write", "read", "load", "dump", "scrape", "crawl", "fetch",
	"download", "upload", "send", "receive", "listen", "handle", "schedule",
	"run", "build", "bundle", "compile", "transpile", "lint", "format",
	"render", "convert", "wrap", "map", "route", "dispatch", "launch",
	"watch", "track", "check", "match", "scan", "lex", "print", "stream",
	"update", "install", "uninstall", "import", "export", "produce",
	"consume", "publish", "subscribe", "emit", "encode", "decode",
	"serialize", "deserialize", "marshal", "unmarshal", "compress",
	"decompress", "encrypt", "decrypt", "execute", "process", "extract",
	"collect", "select", "inspect", "edit", "debug", "profile", "test",
	"sort", "split", "merge", "generate", "validate", "migrate", "minify",
	"tokenize", "sanitize", "normalize", "optimize", "translate", "iterate",
}

// agentStems maps the stem of an agent noun to the stem of its verb.
var agentStems = func() map[string]string {
	m := map[string]string{}
	for _, v := range agentVerbs {
		vs := english.Stem(v, true)
		for _, f := range agentForms(v) {
			if fs := english.Stem(f, true); fs != vs {
				m[fs] = vs
			}
		}
	}
	return m
}()

// agentForms returns the candidate agent nouns of verb v: v+r (parse), v+er
// and v+consonant+er (read, run), v+or and v-e+or (compress, execute).
func agentForms(v string) []string {
	last := v[len(v)-1]
	if last == 'e' {
		return []string{v + "r", v[:len(v)-1] + "or"}
	}
	out := []string{v + "er", v + "or"}
	if !isVowel(last) && last != 'w' && last != 'x' && last != 'y' {
		out = append(out, v+string(last)+"er")
	}
	return out
}

func isVowel(c byte) bool {
	return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u'
}
