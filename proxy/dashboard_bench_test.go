package proxy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/providers"
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/store"
	"github.com/scarproxy/scarproxy/store/bolt"
	"github.com/scarproxy/scarproxy/store/postgres"
)

// dashIncidents is the size of the tenant BenchmarkDashboardOverview
// renders: spread over 30 days, so the 30-day overview counts all of them
// and the 24-hour one about 3,300.
const dashIncidents = 100_000

// BenchmarkDashboardOverview renders the overview of a tenant holding
// 100,000 incidents, on bbolt and (with SCARPROXY_TEST_POSTGRES_DSN) on
// PostgreSQL, for the last 24 hours and the last 30 days. It reports the
// page's HTML bytes and, with its stylesheet, the page weight.
//
//	go test -run '^$' -bench DashboardOverview -benchtime 20x ./proxy/
func BenchmarkDashboardOverview(b *testing.B) {
	now := time.Now().UTC()
	b.Run("bolt", func(b *testing.B) {
		dir := ""
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
			dir = "/dev/shm" // bbolt fsyncs every write: seed in memory
		}
		d, err := os.MkdirTemp(dir, "scarproxy-dash-*")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		st, err := bolt.Open(filepath.Join(d, "scarproxy.db"), bolt.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		benchOverview(b, st, "default", now)
	})
	b.Run("postgres", func(b *testing.B) {
		dsn := os.Getenv("SCARPROXY_TEST_POSTGRES_DSN")
		if dsn == "" {
			b.Skip("SCARPROXY_TEST_POSTGRES_DSN is not set")
		}
		st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		// A workspace of its own keeps the shared database's other
		// tenants out of the figures, and is deleted afterwards.
		var r [4]byte
		_, _ = rand.Read(r[:])
		ws := "dash-bench-" + hex.EncodeToString(r[:])
		b.Cleanup(func() { st.DeleteIncidents(context.Background(), ws, "default") })
		benchOverview(b, st, ws, now)
	})
}

func benchOverview(b *testing.B, st store.Store, ws string, now time.Time) {
	ctx := context.Background()
	start := time.Now()
	if err := seedDashBench(ctx, st, ws, now); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d incidents in %s", dashIncidents, time.Since(start).Round(time.Millisecond))
	g, err := guard.New(guard.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	router, err := providers.NewRouter([]providers.Config{providerAt("up", "http://127.0.0.1:9")}, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(ctx, Options{Router: router, Options: memory.Options{Store: st, Guard: g, Now: func() time.Time { return now }, StoreTimeout: time.Minute}})
	if err != nil {
		b.Fatal(err)
	}
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
		}
		return rec
	}
	css := get("/ui/static/app.css").Body.Len()
	for _, rng := range []string{"24h", "30d"} {
		b.Run(rng, func(b *testing.B) {
			path := "/ui/?workspace=" + ws + "&project=default&range=" + rng
			page := get(path).Body.String()
			if !strings.Contains(page, "<rect") {
				b.Fatal("no chart")
			}
			b.ResetTimer()
			for b.Loop() {
				get(path)
			}
			b.ReportMetric(float64(len(page)), "html-bytes")
			b.ReportMetric(float64(len(page)+css), "page-bytes")
		})
	}
}

// seedDashBench stores dashIncidents incidents of a tenant over 30 days:
// tool failures of a few kinds in many conversations, rate limits and
// timeouts, loops; several writers at once.
func seedDashBench(ctx context.Context, st store.Store, ws string, now time.Time) error {
	msgs := []string{
		"run_shell:   File \"/work/app/module_%d.py\", line %d\n    def handler(:\n               ^\nSyntaxError: invalid syntax",
		"apply_patch: <tool_use_error>String to replace not found in file.\nString:     return nil%d%d\n</tool_use_error>",
		"run_tests: KeyError: 'session_%d' while loading /var/cache/app/%08x.json",
		"run_tests: assertion failed in test case %d: expected %d",
		"read_file: ENOENT: no such file or directory, open 'src/components/Widget%d.tsx' (%d)",
		"npm run build: TS2322: Type 'string' is not assignable to type 'number' at src/app%d.ts:%d",
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < dashIncidents; i += writers {
				inc := store.Incident{
					Time:      now.Add(-time.Duration(i) * 30 * 24 * time.Hour / dashIncidents),
					Workspace: ws, Project: "default", Session: fmt.Sprintf("c:%016x", i/40), Model: "gpt-5",
					Type: store.TypeToolError, Message: fmt.Sprintf(msgs[i%len(msgs)], i%5, i*7),
				}
				switch i % 20 {
				case 7, 17:
					inc.Type, inc.StatusCode, inc.Provider = store.TypeHTTPError, 429, "openai"
					inc.Message = "Rate limit reached for gpt-5 on tokens per min (TPM): Limit 30000, Used 29750. Please try again in 2.4s."
				case 11:
					inc.Type, inc.StatusCode, inc.Provider, inc.Message = store.TypeTimeout, 504, "anthropic", "no response from provider within 60s"
				case 13:
					inc.Type, inc.Code = store.TypeLoop, []string{"guard", "stop", "hard-stop", "broken"}[i/20%4]
					inc.Message = "run_tests called 4 times with the same arguments"
				}
				inc.Fingerprint = guard.Fingerprint(inc.Message)
				if err := st.AddIncident(ctx, &inc); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
