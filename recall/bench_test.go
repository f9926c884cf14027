package recall

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// A generator of realistic task goals: verb, object, qualifier and context
// from the vocabulary of programming tasks, plus the odd identifier.
var (
	benchVerbs = []string{
		"fix", "add", "remove", "download", "parse", "write", "update", "refactor", "test", "deploy",
		"debug", "rename", "optimize", "document", "validate", "migrate", "cache", "log", "retry",
		"configure", "implement", "delete", "create", "generate", "convert", "upgrade", "monitor",
		"profile", "benchmark", "paginate", "compress", "encrypt", "serialize", "mock", "lint",
		"format", "sort", "filter", "merge", "split",
	}
	benchQualifiers = []string{
		"", "", "", "flaky", "slow", "broken", "legacy", "new", "failing", "duplicate", "async",
		"nested", "large", "missing", "invalid", "concurrent", "cached", "deprecated", "empty", "stale",
	}
	benchObjects = []string{
		"config loader", "unit tests", "http client", "web page", "database schema", "temp files",
		"login handler", "json output", "cache layer", "error messages", "CI pipeline", "docker images",
		"payment api", "user sessions", "csv exports", "search index", "kafka consumer", "metrics endpoint",
		"TLS certificates", "websocket server", "rate limiter", "email templates", "graphql resolver",
		"cron jobs", "s3 uploads", "feature flags", "audit log", "oauth flow", "webhook handler",
		"retry policy", "connection pool", "migration scripts", "protobuf definitions", "helm chart",
		"terraform module", "react component", "redux store", "sql query", "orm models", "queue worker",
		"pdf renderer", "image thumbnails", "markdown parser", "cli flags", "env variables",
		"secrets manager", "load balancer", "dns records", "nginx config", "systemd unit",
		"backup script", "health checks", "tracing spans", "grpc service", "rest endpoint",
		"pagination cursor", "sorting function", "date parsing", "timezone handling", "unicode normalization",
		"file watcher", "plugin loader", "dependency graph", "build cache", "lock file", "changelog",
		"release notes", "api docs", "readme", "license headers", "code coverage", "snapshot tests",
		"e2e tests", "fuzz tests", "benchmarks", "memory leak", "race condition", "deadlock",
		"null pointer", "off by one error",
	}
	benchContexts = []string{
		"", "", "", "in the billing service", "for the admin dashboard", "in parseConfig",
		"before the release", "on windows", "with exponential backoff", "in the go module", "for postgres",
		"behind the proxy", "in the react app", "after the upgrade", "for large files", "in production",
		"on staging", "for mobile clients", "in the monorepo", "with the new SDK", "under load",
		"in the worker pool", "for the EU region", "in the python package", "in node", "in the rust crate",
		"for the nightly build", "in kubernetes", "on arm64", "with feature flags", "in the auth service",
		"in the checkout flow", "for the public api", "in the data pipeline", "in the mobile app",
		"in HandleRequest", "in user_repository", "for tenant isolation", "during startup", "on shutdown",
	}
	benchTools = []string{"read_file", "write_file", "run_tests", "grep", "http_get", "apply_patch", "list_dir", "run_shell", "search_code", "git_diff"}
	// Paraphrase substitutions applied to queries.
	benchParaphrase = strings.NewReplacer(
		"fix", "repair", "remove", "delete", "download", "fetch", "web page", "html of the site",
		"create", "make", "unit tests", "unittest", "config", "configuration", "error", "exception",
		"directory", "folder", "files", "file", "tests", "test",
	)
)

func benchGoal(r *rand.Rand) string {
	g := benchVerbs[r.IntN(len(benchVerbs))] + " the "
	if q := benchQualifiers[r.IntN(len(benchQualifiers))]; q != "" {
		g += q + " "
	}
	g += benchObjects[r.IntN(len(benchObjects))]
	if c := benchContexts[r.IntN(len(benchContexts))]; c != "" {
		g += " " + c
	}
	if r.IntN(5) == 0 {
		g += fmt.Sprintf(" (ticket %d)", r.IntN(100000))
	}
	return g
}

func benchApproach(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("Tools: ")
	for i := range 1 + r.IntN(5) {
		if i > 0 {
			b.WriteString(" -> ")
		}
		b.WriteString(benchTools[r.IntN(len(benchTools))])
	}
	b.WriteString(". Final answer: ")
	b.WriteString(benchGoal(r))
	b.WriteString(" and checked the ")
	b.WriteString(benchObjects[r.IntN(len(benchObjects))])
	b.WriteString(".")
	return b.String()
}

func benchSolution(r *rand.Rand, i int) store.Solution {
	g := benchGoal(r)
	return store.Solution{
		ID: fmt.Sprintf("sol%06d", i), Workspace: "bench", Key: GoalKey(g), Goal: g,
		Approach: benchApproach(r), Outcome: "Completed.", Confidence: 0.5 + float64(r.IntN(5))/10,
		Source: store.SourceAuto, Verified: r.IntN(3) == 0, Created: t0, Updated: t0.Add(time.Duration(i) * time.Second),
	}
}

var bench100k struct {
	once    sync.Once
	ix      *Index
	queries []string
}

// index100k builds, once, an index of 100k generated solutions in one
// workspace, and 10k queries: paraphrases of stored goals, fresh goals from
// the same vocabulary, and unrelated tasks.
func index100k() (*Index, []string) {
	bench100k.once.Do(func() {
		r := rand.New(rand.NewPCG(42, 100000))
		ix := NewIndex()
		goals := make([]string, 0, 100000)
		for i := range 100000 {
			s := benchSolution(r, i)
			goals = append(goals, s.Goal)
			ix.Put(s)
		}
		unrelated := []string{"bake sourdough bread", "plan a trip to lisbon", "write a poem about autumn", "book a table for four"}
		qs := make([]string, 0, 10000)
		for i := range 10000 {
			switch i % 4 {
			case 0, 1:
				qs = append(qs, benchParaphrase.Replace(goals[r.IntN(len(goals))]))
			case 2:
				qs = append(qs, benchGoal(r))
			default:
				qs = append(qs, unrelated[r.IntN(len(unrelated))])
			}
		}
		bench100k.ix, bench100k.queries = ix, qs
	})
	return bench100k.ix, bench100k.queries
}

// BenchmarkSearch100k measures one search (k 1, default threshold) in a
// workspace of 100k solutions, and reports the p99 latency of 10k queries.
func BenchmarkSearch100k(b *testing.B) {
	for _, k := range []int{1, 5} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			ix, qs := index100k()
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				ix.Search(Query{Workspace: "bench", Goal: qs[i%len(qs)], K: k, MinSimilarity: DefaultMinSimilarity})
				i++
			}
			b.StopTimer()
			lat := make([]time.Duration, len(qs))
			for j, q := range qs {
				start := time.Now()
				ix.Search(Query{Workspace: "bench", Goal: q, K: k, MinSimilarity: DefaultMinSimilarity})
				lat[j] = time.Since(start)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*50/100].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
		})
	}
}

// BenchmarkPut measures adding (or replacing) one solution in a workspace
// of 100k ("new": each round's approach is new, the second round on
// replaces), and storing one again with the same goal and approach
// ("again", a run captured again).
func BenchmarkPut(b *testing.B) {
	ix, _ := index100k()
	r := rand.New(rand.NewPCG(7, 7))
	sols := make([]store.Solution, 4096)
	for i := range sols {
		sols[i] = benchSolution(r, 200000+i)
	}
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s := sols[i%len(sols)]
			s.Approach += " (round " + strconv.Itoa(i/len(sols)) + ")"
			ix.Put(s)
			i++
		}
	})
	b.Run("again", func(b *testing.B) {
		for _, s := range sols {
			ix.Put(s)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s := sols[i%len(sols)]
			s.Updated = s.Updated.Add(time.Duration(i))
			ix.Put(s)
			i++
		}
	})
	for _, s := range sols {
		ix.Delete(s.Workspace, s.ID)
	}
}

// BenchmarkIndexHeap100k builds an index of 100k generated solutions (run
// it with -benchtime=1x) and reports the heap it holds per solution, the
// solutions' own text included.
func BenchmarkIndexHeap100k(b *testing.B) {
	var ix *Index
	var per float64
	for b.Loop() {
		ix = nil
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := rand.New(rand.NewPCG(42, 100000))
		ix = NewIndex()
		for i := range 100000 {
			ix.Put(benchSolution(r, i))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per = float64(after.HeapAlloc-before.HeapAlloc) / 100000
	}
	b.ReportMetric(per, "heap-B/solution")
	runtime.KeepAlive(ix)
}
