package recall

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// rankingCorpus is a workspace of solved tasks, varied enough that BM25's
// idf is realistic.
var rankingCorpus = []struct{ id, goal, approach string }{
	{"s01", "Download the web page at a URL and extract all links", "Used http_get to fetch the HTML, parsed anchor tags, deduplicated the URLs."},
	{"s02", "Write unit tests for the parser", "Added table tests for parseExpr covering precedence and syntax errors; ran go test."},
	{"s03", "Fix the failing CI build caused by a missing environment variable", "Found the variable in the workflow logs, added it to the repository secrets."},
	{"s04", "Parse the YAML config file and validate required keys", "Decoded with yaml.v3 into a struct, then checked each required field."},
	{"s05", "Delete temporary files older than seven days from the cache directory", "Walked the directory, compared modification times, removed stale entries."},
	{"s06", "Receive messages from a Kafka topic and store them in PostgreSQL", "Consumer group with manual commits; batched inserts with COPY."},
	{"s07", "Rename all .jpeg images in a folder to .jpg", "Globbed *.jpeg and renamed each file, skipping existing targets."},
	{"s08", "Add retry with exponential backoff to the HTTP client", "Wrapped the transport; retried 5xx and connection resets with jitter."},
	{"s09", "Resolve merge conflicts in the pull request", "Rebased on main, resolved conflicts in go.mod and handlers, force-pushed."},
	{"s10", "Create a Dockerfile for the Python web application", "Multi-stage build on python:3.12-slim, gunicorn entrypoint."},
	{"s11", "Speed up the slow SQL query on the orders table by adding an index", "EXPLAIN showed a sequential scan; added a composite index on (customer_id, created_at)."},
	{"s12", "Set up GitHub Actions to run the test suite on every push", "Workflow with a Go matrix, caching modules, running go test -race."},
	{"s13", "Convert a CSV file to JSON", "Read rows with encoding/csv, mapped headers to keys, wrote a JSON array."},
	{"s14", "Implement user login with JWT authentication", "Issued signed tokens at login, verified them in middleware, refresh tokens in cookies."},
	{"s15", "Debug the memory leak in the Node.js worker", "Heap snapshots showed listeners never removed; cleaned them up on shutdown."},
	{"s16", "Generate a changelog from git commit messages", "Parsed conventional commits since the last tag and grouped them by type."},
	{"s17", "Upgrade React from version 17 to 18", "Switched to createRoot, fixed strict mode double effects, updated testing library."},
	{"s18", "Write a bash script to back up the database every night", "pg_dump piped to gzip, cron entry at 02:00, kept 14 copies."},
	{"s19", "Count word frequencies in a large text file", "Streamed lines, split on non-letters, counted in a map, printed the top 20."},
	{"s20", "Resize images to thumbnails in parallel", "Worker pool over the file list, decoded, scaled to 256px, encoded as JPEG."},
	{"s21", "Handle timeout errors when calling the payment API", "Context deadline per call, idempotency keys, retried once on timeout."},
	{"s22", "Send an email notification when a job fails", "Hooked the job runner's failure callback to an SMTP sender."},
	{"s23", "Compress log files with gzip and upload them to S3", "Rotated logs hourly, gzipped, uploaded with the AWS SDK multipart uploader."},
	{"s24", "Add pagination to the REST API endpoint that lists users", "Cursor-based pagination with limit and next_cursor in the response."},
	{"s25", "Translate the README into Spanish", "Translated section by section, kept code blocks untouched."},
	{"s26", "Find and remove unused imports in the Go project", "Ran goimports -w over the module and fixed the build."},
	{"s27", "Исправить ошибку в парсере конфигурации", "Нашёл неверную обработку пустых строк, добавил тест."},
	{"s28", "下载网页并提取标题", "用 HTTP 客户端获取页面，解析 title 标签。"},
	{"s29", "Télécharger les fichiers du serveur FTP", "Connexion FTP passive, téléchargement récursif des répertoires."},
	{"s30", "Sort a list of dictionaries by a key in Python", "sorted(items, key=itemgetter('name'))."},
	{"s31", "Rotate the TLS certificates before they expire", "Issued new certificates with certbot and reloaded nginx without downtime."},
	{"s32", "Plot monthly revenue as a bar chart with matplotlib", "Grouped by month with pandas, plotted bars, saved a PNG."},
	{"s33", "Write a blog post about cooking", "Outlined three recipes, drafted in markdown, added photos."},
}

func rankingIndex(t testing.TB) *Index {
	t.Helper()
	ix := NewIndex()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range rankingCorpus {
		ix.Put(store.Solution{
			ID: c.id, Workspace: "w", Key: GoalKey(c.goal), Goal: c.goal, Approach: c.approach,
			Outcome: "Done.", Confidence: 0.9, Source: store.SourceAPI, Verified: true,
			Created: base, Updated: base.Add(time.Duration(i) * time.Minute),
		})
	}
	return ix
}

// referenceOverlap is the keyword overlap of the reference implementation:
// |A∩B| / max(|A|,|B|) over lowercase a-z words of the goals.
func referenceOverlap(a, b string) float64 {
	words := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r < 'a' || r > 'z' }) {
			m[w] = true
		}
		return m
	}
	x, y := words(a), words(b)
	n := 0
	for w := range x {
		if y[w] {
			n++
		}
	}
	if len(x) == 0 || len(y) == 0 {
		return 0
	}
	return float64(n) / float64(max(len(x), len(y)))
}

func TestRanking(t *testing.T) {
	ix := rankingIndex(t)
	goals := map[string]string{}
	for _, c := range rankingCorpus {
		goals[c.id] = c.goal
	}
	positives := []struct {
		name, query, want string
	}{
		{"synonyms web page", "fetch html of a site", "s01"},
		{"synonyms web page longer", "fetch html of a site and collect the links", "s01"},
		{"word forms file files", "delete the temporary file in the cache directory", "s05"},
		{"word forms fetch fetching", "fetching a web page to extract links", "s01"},
		{"word forms fetching", "retrieving web pages and extracting links", "s01"},
		{"identifier camelCase", "parseConfig should validate the required yaml keys", "s04"},
		{"identifier snake_case", "parse_config for yaml: validate required keys", "s04"},
		{"word forms files and synonyms", "deleting temp files older than a week in the cache dir", "s05"},
		{"typo recieve", "recieve kafka messages and save them to postgresql", "s06"},
		{"paraphrase retry", "retry failed http requests with exponential backoff", "s08"},
		{"synonym pr", "fix merge conflicts on my PR", "s09"},
		{"paraphrase faster query", "make the slow orders query faster with an index", "s11"},
		{"synonyms execute tests", "configure github actions to execute the tests on each push", "s12"},
		{"synonym transform", "transform csv files into json", "s13"},
		{"synonyms auth", "authenticate users with JWT tokens at sign in", "s14"},
		{"russian word forms", "исправить ошибки парсера конфигурации", "s27"},
		{"chinese bigrams", "下载网页，提取网页的标题", "s28"},
		{"french word forms", "télécharger des fichiers depuis un serveur FTP", "s29"},
		{"synonyms pictures", "resizing pictures into thumbnails in parallel", "s20"},
		{"word forms timeouts", "deal with timeouts when calling the payment api", "s21"},
		{"synonym remove", "removing unused imports from a go project", "s26"},
		{"synonym big", "count word frequency in a big text file", "s19"},
		{"identifier sendEmail", "sendEmailNotification when the job failed", "s22"},
		{"typo and order", "compres the logs with gzip and uplaod to s3", "s23"},
	}
	// A negative query must not recall notID; with notID empty it must not
	// recall anything.
	negatives := []struct {
		name, query, notID string
	}{
		{"shares write", "write unit tests for the parser", "s33"},
		{"shares write 1", "write unit tests for the tokenizer", "s33"},
		{"shares write 2", "write a poem about autumn leaves", ""},
		{"shares create and python", "create a birthday card for my python loving friend", ""},
		{"shares post", "post a letter to my bank", ""},
		{"shares table", "book a table at an italian restaurant", ""},
		{"shares python", "feed the python at the zoo", ""},
		{"shares list", "list the capitals of european countries", ""},
		{"shares fix", "fix a flat bicycle tire", ""},
		{"shares send", "send flowers to my mother for her birthday", ""},
		{"shares resize", "resize the living room rug", ""},
		{"shares count", "count sheep to fall asleep", ""},
		{"shares rotate", "rotate the tires of my car", ""},
		{"shares plot", "plot of the novel is confusing", ""},
		{"shares file", "file my tax return before april", ""},
		{"shares images", "images of cats sleeping in the sun", ""},
		{"shares test", "test drive a new electric car", ""},
	}
	refHits, refFalse := 0, 0
	for _, tc := range positives {
		t.Run("positive/"+tc.name, func(t *testing.T) {
			ms := ix.Search(Query{Workspace: "w", Goal: tc.query, K: 3, MinSimilarity: DefaultMinSimilarity})
			t.Logf("%-45q -> %s", tc.query, describe(ms))
			if len(ms) == 0 || ms[0].Solution.ID != tc.want {
				t.Fatalf("want %s first, got %s", tc.want, describe(ms))
			}
		})
		if referenceOverlap(tc.query, goals[tc.want]) >= 0.3 {
			refHits++
		}
	}
	for _, tc := range negatives {
		t.Run("negative/"+tc.name, func(t *testing.T) {
			all := ix.Search(Query{Workspace: "w", Goal: tc.query, K: 3, MinSimilarity: 0})
			t.Logf("%-45q -> %s", tc.query, describe(all))
			for _, m := range ix.Search(Query{Workspace: "w", Goal: tc.query, K: 5, MinSimilarity: DefaultMinSimilarity}) {
				if tc.notID == "" || m.Solution.ID == tc.notID {
					t.Fatalf("recalled %s %.2f", m.Solution.ID, m.Similarity)
				}
			}
		})
	}
	for _, tc := range negatives {
		for _, c := range rankingCorpus {
			if (tc.notID == "" || c.id == tc.notID) && referenceOverlap(tc.query, c.goal) >= 0.3 {
				refFalse++
				break
			}
		}
	}
	t.Logf("reference keyword overlap (threshold 0.3): recalls %d of %d positives, wrongly recalls for %d of %d negatives",
		refHits, len(positives), refFalse, len(negatives))
}

func describe(ms []Match) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.2f", m.Solution.ID, m.Similarity)
	}
	if len(ms) == 0 {
		return "none"
	}
	return b.String()
}

// seedSolutions are the examples of the project's brief and issues: a
// stored solution that reworded tasks must find, and that tasks going the
// other way must not.
var seedSolutions = []struct{ id, goal, approach string }{
	{"c1", "Write a CSV parser", "Split records on commas, handled quoted fields and escaped quotes, streamed rows from an io.Reader."},
	{"c2", "Import users from CSV", "Read rows with encoding/csv, validated the emails, inserted users in batches."},
	{"c3", "Add pre-commit hooks", "Installed pre-commit and configured gofmt and go vet hooks in .pre-commit-config.yaml."},
	{"c4", "Write a Kafka producer for order events", "franz-go client with idempotent writes, keyed by order ID, batched with a 5 ms linger."},
}

// TestRankingSeeds checks each row twice: in a workspace holding only the
// row's solution (a new user's memory, where idf knows nothing), and in
// the ranking corpus with the seed solutions added.
func TestRankingSeeds(t *testing.T) {
	tests := []struct {
		name, query, id string
		recall          bool // true: id comes first; false: id is not recalled
	}{
		{"parse a CSV file", "Parse a CSV file", "c1", true},
		{"parse CSV data", "Parse CSV data from a file", "c1", true},
		{"implement a parser", "Implement a parser for CSV files", "c1", true},
		{"parse CSV more words", "Parse a CSV file with quoted fields and stream the rows to a channel", "c1", true},
		{"import users", "Import the users from a CSV file", "c2", true},
		{"install hooks", "Install pre-commit hooks for gofmt", "c3", true},
		{"kafka producer", "Implement a Kafka producer that publishes order events", "c4", true},
		{"consume, not the producer", "Consume the order events from the Kafka topic and write each one to the orders table in PostgreSQL", "s06", true},

		{"opposite CSV writer", "Write a CSV writer", "c1", false},
		{"opposite generate CSV", "Generate a CSV file", "c1", false},
		{"opposite write CSV", "Write CSV files", "c1", false},
		{"opposite export", "Export users to CSV", "c2", false},
		{"opposite kafka consumer", "Write a Kafka consumer for order events", "c4", false},
		{"opposite consume", "Consume the order events from the Kafka topic and write each one to the orders table in PostgreSQL", "c4", false},
		{"opposite remove hooks", "Remove the pre-commit hooks", "c3", false},
		{"opposite uninstall hooks", "Uninstall the pre-commit hooks", "c3", false},
		{"opposite decompress", "Decompress the gzipped log files", "s23", false},
		{"opposite create", "Create temporary files in the cache directory", "s05", false},

		{"unrelated haiku", "write a haiku about autumn", "c1", false},
		{"unrelated poem", "write a poem about autumn leaves", "c1", false},
		{"unrelated consumer", "Consumer rights when a parcel arrives broken", "c4", false},
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id, goal, approach string) store.Solution {
		return store.Solution{
			ID: id, Workspace: "w", Key: GoalKey(goal), Goal: goal, Approach: approach,
			Outcome: "Done.", Confidence: 0.9, Source: store.SourceAPI, Verified: true, Created: base, Updated: base,
		}
	}
	corpus := rankingIndex(t)
	all := map[string]store.Solution{}
	for _, c := range seedSolutions {
		corpus.Put(mk(c.id, c.goal, c.approach))
		all[c.id] = mk(c.id, c.goal, c.approach)
	}
	for _, c := range rankingCorpus {
		all[c.id] = mk(c.id, c.goal, c.approach)
	}
	for _, tc := range tests {
		alone := NewIndex()
		alone.Put(all[tc.id])
		for _, setting := range []struct {
			name string
			ix   *Index
		}{{"alone", alone}, {"corpus", corpus}} {
			t.Run(setting.name+"/"+tc.name, func(t *testing.T) {
				ms := setting.ix.Search(Query{Workspace: "w", Goal: tc.query, K: 5, MinSimilarity: DefaultMinSimilarity})
				all := setting.ix.Search(Query{Workspace: "w", Goal: tc.query, K: 5})
				t.Logf("%-45q -> %s (%s)", tc.query, describe(all), tc.id)
				if tc.recall {
					if len(ms) == 0 || ms[0].Solution.ID != tc.id {
						t.Fatalf("want %s first, got %s", tc.id, describe(ms))
					}
					return
				}
				for _, m := range ms {
					if m.Solution.ID == tc.id {
						t.Fatalf("recalled %s %.2f", m.Solution.ID, m.Similarity)
					}
				}
			})
		}
	}
}
