package guard

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// benchIncidents returns n incidents spread over the last two hours before
// now, a realistic mix: syntax errors at moving lines, rate limits,
// timeouts, edit-tool misses, novel errors with ids, and one-off failures.
func benchIncidents(n int, now time.Time) []store.Incident {
	out := make([]store.Incident, n)
	for i := range out {
		var typ, msg string
		status := 0
		switch i % 10 {
		case 0, 1:
			typ, msg = store.TypeToolError, fmt.Sprintf("  File \"/work/app/module_%d.py\", line %d\n    def handler(:\n               ^\nSyntaxError: invalid syntax", i%5, 10+i%90)
		case 2:
			typ, status, msg = store.TypeHTTPError, 429, "Rate limit reached for gpt-4o in organization org-4f9a on tokens per min (TPM): Limit 30000, Used 29750, Requested 1200. Please try again in 2.4s."
		case 3:
			typ, status, msg = store.TypeTimeout, 504, "no response from provider within 60s"
		case 4:
			typ, msg = store.TypeToolError, "<tool_use_error>String to replace not found in file.\nString:     return nil\n</tool_use_error>"
		case 5, 6:
			typ, msg = store.TypeToolError, fmt.Sprintf("KeyError: 'session_%d' while loading /var/cache/app/%08x.json at 2024-05-0%d 12:%02d:07", i, i*7919, 1+i%9, i%60)
		case 7:
			typ, status, msg = store.TypeUnreachable, 502, fmt.Sprintf("dial tcp 10.0.%d.%d:8443: connect: connection refused", i%255, (i/255)%255)
		default:
			typ, msg = store.TypeToolError, fmt.Sprintf("assertion failed in test case %d: expected %d, got %d (request id %x)", i, i*3, i*3+1, i*104729)
		}
		out[i] = store.Incident{
			ID:         fmt.Sprintf("%08d", i),
			Time:       now.Add(-time.Duration(i%120) * time.Minute),
			Workspace:  "w",
			Project:    "p",
			Type:       typ,
			StatusCode: status,
			Message:    msg,
		}
	}
	return out
}

func BenchmarkDetect(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	incidents := benchIncidents(1000, now)
	g := mustGuard(b, DefaultConfig())
	if len(g.Detect(incidents, now)) == 0 {
		b.Fatal("no entries")
	}
	b.ReportAllocs()
	for b.Loop() {
		g.Detect(incidents, now)
	}
}

func BenchmarkDetectCold(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	incidents := benchIncidents(1000, now)
	b.ReportAllocs()
	for b.Loop() {
		g, _ := New(DefaultConfig())
		g.Detect(incidents, now)
	}
}

func BenchmarkFingerprint(b *testing.B) {
	msgs := []string{
		"KeyError: 'session_4411' while loading /var/cache/app/0001e0f7.json at 2024-05-03 12:41:07",
		"  File \"/work/app/module_3.py\", line 41\n    def handler(:\n               ^\nSyntaxError: invalid syntax",
		"dial tcp 10.0.12.7:8443: connect: connection refused",
		"Error: ENOENT: no such file or directory, open '/home/dev/project/src/config/settings.local.json'",
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		Fingerprint(msgs[i%len(msgs)])
		i++
	}
}

// BenchmarkClassifyCorpus classifies, uncached, every output of the last
// three held-out corpora (655 tool outputs, a failure's first sight by
// the guard): ns/op is the mean over them.
func BenchmarkClassifyCorpus(b *testing.B) {
	var files []txtarFile
	for _, n := range []int{10, 11, 12} {
		files = append(files, parseTxtar(b, fmt.Sprintf("testdata/corpus_heldout%d.txtar", n))...)
	}
	g := mustGuard(b, DefaultConfig())
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		g.compute(store.TypeToolError, 0, files[i%len(files)].data)
		i++
	}
}

func BenchmarkToolFailed(b *testing.B) {
	outputs := []string{
		"src/errors.go:12: func Error() string {\nsrc/errors.go:40: return &Error{}\nsrc/main.go:9: err := run()",
		"Traceback (most recent call last):\n  File \"/app/x.py\", line 3, in <module>\n    main()\nValueError: bad value",
		`{"output":"ok\n","metadata":{"exit_code":0,"duration_seconds":0.4}}`,
		"--- PASS: TestError (0.00s)\nPASS\nok  \texample.com/app\t0.012s",
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ToolFailed(outputs[i%len(outputs)])
		i++
	}
}

// BenchmarkToolFailedCorpus runs ToolFailed over every output of
// testdata/tool_outputs.txtar, failures and successes alike.
func BenchmarkToolFailedCorpus(b *testing.B) {
	files := parseTxtar(b, "testdata/tool_outputs.txtar")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ToolFailed(files[i%len(files)].data)
		i++
	}
}

// BenchmarkToolFailedNoExitStatus runs ToolFailed over every output of
// the corpora without an exit status (testdata/corpus_*.txtar).
func BenchmarkToolFailedNoExitStatus(b *testing.B) {
	files := append(parseTxtar(b, "testdata/corpus_tune.txtar"), parseTxtar(b, "testdata/corpus_heldout.txtar")...)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ToolFailed(files[i%len(files)].data)
		i++
	}
}

// BenchmarkToolFailedLong runs ToolFailed over a 32 KiB successful output
// (a grep over a code base: every line is read, none is a failure).
func BenchmarkToolFailedLong(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 32<<10; i++ {
		fmt.Fprintf(&sb, "src/pkg%d/errors.go:%d:\tif err != nil { return fmt.Errorf(\"load %%s: %%w\", name, err) }\n", i%7, 10+i)
		fmt.Fprintf(&sb, "src/pkg%d/handler.go:%d:\tlog.Printf(\"error: request %%d failed\", id)\n", i%5, 20+i)
	}
	out := sb.String()
	if ToolFailed(out) {
		b.Fatal("flagged")
	}
	b.SetBytes(int64(len(out)))
	b.ReportAllocs()
	for b.Loop() {
		ToolFailed(out)
	}
}

// redactInputs are texts as Redact meets them: incident messages and tool
// outputs, most with no secret, a few with one.
func redactInputs() []string {
	long := strings.Repeat("2024-05-01T12:00:01Z INFO request id=4f2a1c3e path=/v1/orders status=200 took=12ms\n", 100)
	return []string{
		"Traceback (most recent call last):\n  File \"/app/x.py\", line 3, in <module>\n    main()\nValueError: bad value",
		"Rate limit reached for gpt-4o in organization org-4f9a on tokens per min (TPM): Limit 30000, Used 29750, Requested 1200.",
		"psql: error: connection to server at \"db\" (10.0.0.5), port 5432 failed: FATAL:  password authentication failed for user \"app\"",
		"dial postgres://app:pa55w0rd@db:5432/shop failed: connection refused",
		"curl -H \"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk\" https://api.example.com",
		"commit 3f2a9c1e5b7d4a8f9e0c1b2a3d4e5f6a7b8c9d0e\nAuthor: Dev <dev@example.com>\n\n    Fix error handling (id 123e4567-e89b-12d3-a456-426614174000)",
		long,
	}
}

func BenchmarkRedact(b *testing.B) {
	in := redactInputs()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		Redact(in[i%len(in)])
		i++
	}
}

// BenchmarkBlock renders a guard block of three entries, as each request
// of a storm of provider failures does (the count changes every time).
func BenchmarkBlock(b *testing.B) {
	entries := []Entry{
		{Pattern: "RATE LIMIT", Count: 1234, Provider: "openai", Example: "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29750."},
		{Pattern: labelNoProgress, Count: 57, Call: `run_tests {"path":"./..."}`, Example: "ok  github.com/acme/app 0.2s"},
		{Pattern: "REPEATED ERROR", Count: 3, Example: "KeyError: 'session_4' while loading /var/cache/app/x.json"},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		entries[0].Count = 1234 + i
		Block(entries)
	}
}
