package proxy

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// What a replica's recall index costs in memory, the number that sizes
// retention.solutions_max_per_workspace. The solutions are shaped like the
// ones the proxy stores: a goal in the user's words (often with a file, an
// identifier, an error or a ticket number in it), an auto-captured approach
// ("Tools: ... Final answer: " and a 200-rune excerpt of the answer), and
// its outcome; one in five is posted by a person, with a longer approach.
//
//	go test -run '^$' -bench RecallIndexHeap -benchtime 1x ./proxy
var (
	heapVerbs = []string{
		"fix", "add", "remove", "parse", "write", "update", "refactor", "test", "deploy", "debug",
		"rename", "optimize", "document", "validate", "migrate", "cache", "retry", "configure",
		"implement", "generate", "convert", "upgrade", "profile", "paginate", "compress", "serialize",
	}
	heapObjects = []string{
		"config loader", "unit tests", "http client", "database schema", "login handler", "json output",
		"cache layer", "CI pipeline", "docker image", "payment api", "user sessions", "csv export",
		"search index", "kafka consumer", "metrics endpoint", "TLS certificates", "websocket server",
		"rate limiter", "email templates", "graphql resolver", "cron jobs", "s3 uploads", "feature flags",
		"audit log", "oauth flow", "webhook handler", "connection pool", "migration scripts", "helm chart",
		"terraform module", "react component", "sql query", "queue worker", "pdf renderer", "cli flags",
		"health checks", "tracing spans", "grpc service", "date parsing", "timezone handling", "file watcher",
		"plugin loader", "build cache", "lock file", "snapshot tests", "memory leak", "race condition",
	}
	heapContexts = []string{
		"", "", "in the billing service", "for the admin dashboard", "before the release", "on windows",
		"in the go module", "for postgres", "behind the proxy", "after the upgrade", "in production",
		"on staging", "in the monorepo", "under load", "in the worker pool", "in kubernetes", "on arm64",
		"in the auth service", "in the checkout flow", "in the data pipeline", "during startup",
	}
	heapDirs    = []string{"internal/billing", "cmd/server", "pkg/auth", "src/components", "api/v2", "lib", "services/orders", "web/src/hooks"}
	heapExts    = []string{".go", ".ts", ".py", ".tsx", ".rs", ".java", ".sql", ".yaml"}
	heapErrors  = []string{"TypeError: Cannot read properties of undefined (reading 'id')", "panic: runtime error: index out of range [3] with length 3", "ModuleNotFoundError: No module named 'yaml'", "error[E0382]: borrow of moved value", "FATAL: password authentication failed for user", "Error: connect ECONNREFUSED 127.0.0.1:5432", "undefined: NewClient", "AssertionError: expected 200, got 500"}
	heapTools   = []string{"read_file", "write_file", "run_tests", "grep", "apply_patch", "list_dir", "run_shell", "search_code", "git_diff", "edit"}
	heapPhrases = []string{
		"The fix was to", "I changed", "Tests pass now after I", "Root cause:", "Updated", "The problem was that",
		"I added a check so that", "Moved the initialisation so that", "Replaced the call to", "Now it",
	}
	heapWords = strings.Fields("the a of to in and is was for on with that it by from as when before after " +
		"handler request response client server config value error nil null check retry timeout context " +
		"cache key map slice list field struct type interface function method test case fixture mock " +
		"query index table column row transaction lock channel goroutine thread async await promise " +
		"import module package dependency version build lint format deploy release branch commit")
)

// heapIdent makes an identifier of the kind that fills a real dictionary:
// most occur once or a few times.
func heapIdent(r *rand.Rand) string {
	parts := []string{"parse", "load", "handle", "new", "get", "set", "build", "validate", "fetch", "apply", "resolve", "encode"}
	nouns := []string{"Config", "Invoice", "User", "Session", "Order", "Token", "Route", "Schema", "Payload", "Event", "Batch", "tenant.Tenant"}
	return fmt.Sprintf("%s%s%s", parts[r.IntN(len(parts))], nouns[r.IntN(len(nouns))], []string{"", "V2", "Async", fmt.Sprint(r.IntN(500))}[r.IntN(4)])
}

func heapPath(r *rand.Rand) string {
	return fmt.Sprintf("%s/%s_%d%s", heapDirs[r.IntN(len(heapDirs))], strings.ToLower(heapIdent(r)), r.IntN(50), heapExts[r.IntN(len(heapExts))])
}

func heapGoal(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(heapVerbs[r.IntN(len(heapVerbs))] + " the " + heapObjects[r.IntN(len(heapObjects))])
	if c := heapContexts[r.IntN(len(heapContexts))]; c != "" {
		b.WriteString(" " + c)
	}
	switch r.IntN(5) {
	case 0:
		fmt.Fprintf(&b, ": %s fails with %q", heapPath(r), heapErrors[r.IntN(len(heapErrors))])
	case 1:
		fmt.Fprintf(&b, " in %s, it is called from %s", heapIdent(r), heapPath(r))
	case 2:
		fmt.Fprintf(&b, " (ticket %d). It started after the last deploy", 1000+r.IntN(90000))
	}
	return b.String()
}

// heapText is n words of answer prose with identifiers and paths mixed in.
func heapText(r *rand.Rand, n int) string {
	var b strings.Builder
	b.WriteString(heapPhrases[r.IntN(len(heapPhrases))])
	for range n {
		b.WriteByte(' ')
		switch k := r.IntN(20); {
		case k == 0:
			b.WriteString(heapPath(r))
		case k <= 2:
			b.WriteString(heapIdent(r))
		case k == 3:
			b.WriteString(fmt.Sprint(r.IntN(10000)))
		default:
			b.WriteString(heapWords[r.IntN(len(heapWords))])
		}
	}
	return b.String()
}

func heapSolution(r *rand.Rand, i int, t0 time.Time) store.Solution {
	goal := fmt.Sprintf("%s (case %d)", heapGoal(r), i) // distinct goals: one solution each
	s := store.Solution{
		ID:        fmt.Sprintf("%016x%010x", t0.Add(time.Duration(i)*time.Second).UnixNano(), r.Uint64()>>24),
		Workspace: "default", Key: recall.GoalKey(goal), Goal: goal,
		Confidence: 0.8, Source: store.SourceAuto,
		Created: t0, Updated: t0.Add(time.Duration(i) * time.Second),
	}
	if r.IntN(5) == 0 {
		s.Source, s.Verified, s.Confidence = store.SourceAPI, true, 0.9
		s.Approach = heapText(r, 40+r.IntN(80))
		s.Outcome = heapText(r, 5+r.IntN(15))
		return s
	}
	tools := make([]string, 1+r.IntN(6))
	for j := range tools {
		tools[j] = heapTools[r.IntN(len(heapTools))]
	}
	answer := []rune(heapText(r, 60))
	if len(answer) > 200 {
		answer = append(answer[:199], '…')
	}
	s.Approach = "Tools: " + strings.Join(tools, " -> ") + ". Final answer: " + string(answer)
	s.Outcome = fmt.Sprintf("Completed with a final answer after %d tool calls; no tool failures.", len(tools))
	return s
}

// heapAlloc returns the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// buildIndex puts n generated solutions into a new index, the first of
// them the oldest. The solutions are made inside the measurement, as the
// change feed decodes them: their text is part of what the index keeps.
func buildIndex(n int) *recall.Index {
	r := rand.New(rand.NewPCG(7, uint64(n)))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ix := recall.NewIndex()
	for i := range n {
		ix.Put(heapSolution(r, i, t0))
	}
	return ix
}

// BenchmarkRecallIndexHeap reports the live heap of the recall index (its
// HeapAlloc growth after a collection) with 10k and 100k solutions in one
// workspace, and with 100k of which retention then removed all but the
// default cap's 10k, the oldest first, as the change feed's deletions do.
func BenchmarkRecallIndexHeap(b *testing.B) {
	report := func(b *testing.B, before uint64, ix *recall.Index) {
		after := heapAlloc()
		n := ix.Len("default")
		b.ReportMetric(float64(after-before)/float64(n), "B/solution")
		b.ReportMetric(float64(after-before)/(1<<20), "MiB")
		b.ReportMetric(float64(n), "solutions")
		runtime.KeepAlive(ix)
	}
	for _, n := range []int{memory.DefaultRetentionSolutionsMaxPerWorkspace, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			for range b.N {
				before := heapAlloc()
				report(b, before, buildIndex(n))
			}
		})
	}
	b.Run("100k-pruned-to-cap", func(b *testing.B) {
		for range b.N {
			before := heapAlloc()
			const n, keep = 100_000, memory.DefaultRetentionSolutionsMaxPerWorkspace
			r := rand.New(rand.NewPCG(7, n))
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			ix := recall.NewIndex()
			ids := make([]string, n)
			for i := range n {
				s := heapSolution(r, i, t0)
				ids[i] = s.ID
				ix.Put(s)
			}
			for _, id := range ids[:n-keep] {
				ix.Delete("default", id)
			}
			ids = nil
			report(b, before, ix)
		}
	})
}
