package recall

import (
	"slices"
	"testing"

	"github.com/kljensen/snowball/english"
)

func TestWordForms(t *testing.T) {
	tests := []struct {
		name string
		a, b string // must give the same terms
	}{
		{"parse parser", "parse", "parser"},
		{"parse parsing", "parse", "parsing"},
		{"parse parsers", "parse", "parsers"},
		{"write writer", "write", "writer"},
		{"write writing", "write", "writing"},
		{"write written", "write", "written"},
		{"write wrote", "write", "wrote"},
		{"serialize serializer", "serialize", "serializer"},
		{"serialize serialization", "serialize", "serialization"},
		{"deserialize deserializer", "deserialize", "deserializer"},
		{"read reader", "read", "reader"},
		{"run runner", "run", "runner"},
		{"compress compressor", "compress", "compressor"},
		{"execute executor", "execute", "executor"},
		{"handle handler", "handle", "handler"},
		{"schedule scheduler", "schedule", "scheduler"},
		{"format formatter", "format", "formatter"},
		{"produce producer", "produce", "producer"},
		{"consume consumer", "consume", "consumer"},
		{"import importer", "import", "importer"},
		{"build built", "build", "built"},
		{"send sent", "send", "sent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := analyze(tc.a, maxGoalRunes).terms, analyze(tc.b, maxGoalRunes).terms
			if len(a) != 1 || !slices.Equal(a, b) {
				t.Fatalf("%q -> %q, %q -> %q", tc.a, a, tc.b, b)
			}
		})
	}
}

// TestNotAgentNouns lists words that end like agent nouns but are not
// the doer of a listed verb: folding must leave their stems alone.
func TestNotAgentNouns(t *testing.T) {
	for _, w := range []string{
		"user", "server", "order", "folder", "header", "container", "computer",
		"counter", "pointer", "monitor", "number", "filter", "cluster", "letter",
		"matter", "register", "water", "poster", "paper", "power", "error",
		"mirror", "vendor", "vector", "factor", "author", "director", "leader",
	} {
		if got, want := stemWord(w), english.Stem(w, true); got != want {
			t.Errorf("stemWord(%q) = %q, want the stemmer's %q", w, got, want)
		}
	}
}

func TestAgentForms(t *testing.T) {
	tests := []struct {
		verb string
		want []string
	}{
		{"parse", []string{"parser", "parsor"}},
		{"run", []string{"runer", "runor", "runner"}},
		{"compress", []string{"compresser", "compressor", "compressser"}},
		{"execute", []string{"executer", "executor"}},
		{"lex", []string{"lexer", "lexor"}},
	}
	for _, tc := range tests {
		if got := agentForms(tc.verb); !slices.Equal(got, tc.want) {
			t.Errorf("agentForms(%q) = %q, want %q", tc.verb, got, tc.want)
		}
	}
}
