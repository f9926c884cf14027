package recall

import (
	"fmt"
	"strings"
	"testing"
)

// describeLead renders a main action for failure messages:
// "data:read existence:add [csv pars(data) to:json]".
func describeLead(l lead) string {
	var b strings.Builder
	for f, fam := range directionTable {
		switch l.dir >> (2 * f) & 3 {
		case 1:
			fmt.Fprintf(&b, "%s:%s ", fam.family, fam.one[0])
		case 2:
			fmt.Fprintf(&b, "%s:%s ", fam.family, fam.other[0])
		case 3:
			fmt.Fprintf(&b, "%s:both ", fam.family)
		}
	}
	b.WriteString("[")
	for i, o := range l.objs {
		if i > 0 {
			b.WriteString(" ")
		}
		switch {
		case o.flags&leadFrom != 0:
			b.WriteString("from:")
		case o.flags&leadTo != 0:
			b.WriteString("to:")
		}
		b.WriteString(o.term)
		for f, fam := range directionTable {
			if o.flags&(1<<f) != 0 {
				fmt.Fprintf(&b, "(%s)", fam.family)
			}
		}
	}
	b.WriteString("]")
	return b.String()
}

// TestDirection is the table of opposite tasks: each pair is checked both
// ways through the index, as Search sees it.
func TestDirection(t *testing.T) {
	tests := []struct {
		name     string
		a, b     string
		opposite bool
	}{
		{"parser writer", "Write a CSV parser", "Write a CSV writer", true},
		{"parse generate", "Parse a CSV file", "Generate a CSV file", true},
		{"parser write", "Write a CSV parser", "Write CSV files", true},
		{"import export", "Import users from CSV", "Export users to CSV", true},
		{"read write", "Read the config file", "Write the config file", true},
		{"serialize deserialize", "Serialize the order struct to JSON", "Deserialize JSON into the order struct", true},
		{"serializer deserializer", "Write a serializer for orders", "Write a deserializer for orders", true},
		{"encode decode", "Encode the payload as base64", "Decode the base64 payload", true},
		{"upload download", "Upload the build artifacts to S3", "Download the build artifacts from S3", true},
		{"producer consumer", "Write a Kafka producer for order events", "Write a Kafka consumer for order events", true},
		{"producer consume", "Write a Kafka producer for order events", "Consume order events from Kafka", true},
		{"publish subscribe", "Publish order events to the queue", "Subscribe to order events on the queue", true},
		{"add remove", "Add pre-commit hooks", "Remove the pre-commit hooks", true},
		{"install uninstall", "Install the pre-commit hooks", "Uninstall the pre-commit hooks", true},
		{"add uninstall", "Add pre-commit hooks", "Uninstall pre-commit hooks", true},
		{"create delete", "Create the users table", "Delete the users table", true},
		{"create drop", "Create the users table", "Drop the users table", true},
		{"add parser remove parser", "Add a CSV parser", "Remove the CSV parser", true},
		{"write parser delete parser", "Write a CSV parser", "Delete the CSV parser", true},
		{"enable disable", "Enable debug logging", "Disable debug logging", true},
		{"compress decompress", "Compress the log files", "Decompress the log files", true},
		{"encrypt decrypt", "Encrypt the nightly backup", "Decrypt the nightly backup", true},
		{"push pull", "Push the docker image to the registry", "Pull the docker image from the registry", true},
		{"start stop", "Start the dev server", "Stop the dev server", true},
		{"lock unlock", "Lock the user account", "Unlock the user account", true},
		{"upgrade downgrade", "Upgrade React to version 18", "Downgrade React to version 17", true},
		{"login logout", "Implement user login", "Implement user logout", true},
		{"add missing remove unused", "Add missing imports", "Find and remove unused imports", true},
		{"fix import fix export", "Fix the CSV import", "Fix the CSV export", true},

		{"same parser", "Write a CSV parser", "Parse a CSV file", false},
		{"same implement parser", "Write a CSV parser", "Implement a parser for CSV files", false},
		{"same add install", "Add pre-commit hooks", "Install pre-commit hooks", false},
		{"same import", "Import users from CSV", "Import the users from a CSV file", false},
		{"same producer publish", "Write a Kafka producer for order events", "Implement a Kafka producer that publishes order events", false},
		{"other things", "Generate a changelog from git commit messages", "Parse git commit messages into a changelog", false},
		{"other things 2", "Parse the logs and generate a report", "Generate a report from the logs", false},
		{"both ways", "Read and write CSV files", "Write CSV files", false},
		{"participle", "Decompress the log files", "Decompress the gzipped log files", false},
		{"negation", "Do not delete the cache files", "Delete the cache files", false},
		{"other families", "Receive messages from a Kafka topic and store them in PostgreSQL", "Write the Kafka messages to PostgreSQL", false},
		{"tests of a writer", "Write unit tests for the parser", "Write unit tests for the CSV writer", false},
		{"no direction", "Fix the flaky shutdown test", "Rotate the TLS certificates", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range [][2]string{{tc.a, tc.b}, {tc.b, tc.a}} {
				ix := NewIndex()
				ix.Put(sol("stored", p[0]))
				s := ix.prepare(Query{Workspace: "w", Goal: p[1]})
				got := s.opposes(s.ws.docs[0])
				s.release()
				if got != tc.opposite {
					t.Errorf("stored %q [%s], query %q [%s]: opposite %v, want %v",
						p[0], describeLead(analyze(p[0], maxGoalRunes).lead),
						p[1], describeLead(analyze(p[1], maxGoalRunes).lead), got, tc.opposite)
				}
			}
		})
	}
}

func TestDirectionTable(t *testing.T) {
	if len(directionTable) > maxFamilies {
		t.Fatalf("%d families, at most %d fit", len(directionTable), maxFamilies)
	}
	for f, fam := range directionTable {
		sides := map[string]int{}
		for side, words := range [][]string{fam.one, fam.other} {
			for _, w := range words {
				st := stemWord(w)
				if s, ok := sides[st]; ok && s != side {
					t.Errorf("%s: %q stems to %q, on both sides", fam.family, w, st)
				}
				sides[st] = side
				if directionStems[st]>>(2*f)&3 != 1<<side {
					t.Errorf("%s: %q (stem %q) does not lean to its side", fam.family, w, st)
				}
				if authoringVerbs[st] && isAgentNoun(w, st) {
					t.Errorf("%s: %q taken for an agent noun", fam.family, w)
				}
			}
		}
	}
	// Agent nouns lean like their verbs, and are seen as agent nouns.
	for _, p := range [][2]string{
		{"parser", "parse"}, {"writer", "write"}, {"reader", "read"}, {"importer", "import"},
		{"exporter", "export"}, {"serializer", "serialize"}, {"deserializer", "deserialize"},
		{"encoder", "encode"}, {"decoder", "decode"}, {"uploader", "upload"},
		{"downloader", "download"}, {"producer", "produce"}, {"consumers", "consume"},
		{"publisher", "publish"}, {"subscriber", "subscribe"}, {"compressor", "compress"},
		{"encryptor", "encrypt"}, {"installer", "install"}, {"generator", "generate"},
	} {
		st := stemWord(p[0])
		if st != stemWord(p[1]) || directionStems[st] == 0 || !isAgentNoun(p[0], st) {
			t.Errorf("%q (stem %q) is not the agent noun of %q", p[0], st, p[1])
		}
	}
}
