package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/store"
)

// TestKill9DuringA429Storm kills serve with SIGKILL while clients receive
// a storm of the provider's 429s, then counts the incidents in the store
// against the 429s the clients received (each named by its request id):
// with store.durability sync none is lost; with async at most
// memory.AsyncLossBound.
func TestKill9DuringA429Storm(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 storm skipped in -short")
	}
	stores := []struct {
		name  string
		store func(t *testing.T) string // the config's store keys
	}{
		{"bolt", func(t *testing.T) string { return "" }},
		{"postgres", func(t *testing.T) string {
			return fmt.Sprintf("  driver: postgres\n  dsn: %q\n", schemaDSN(t, postgresDSN(t)))
		}},
	}
	for _, st := range stores {
		for _, durability := range []string{"sync", "async"} {
			t.Run(st.name+"/"+durability, func(t *testing.T) {
				cfgText := fmt.Sprintf("data_dir: %s\nstore:\n%s  durability: %s\n", t.TempDir(), st.store(t), durability)
				got := killDuringStorm(t, cfgText)
				lost := got.lost()
				t.Logf("%s, durability %s: %d 429s received (%d degraded), %d stored, %d lost",
					st.name, durability, len(got.received), got.degraded, got.stored, lost)
				bound := memory.AsyncLossBound
				if durability == "sync" {
					bound = 0
				}
				if lost > bound {
					t.Fatalf("%d of the %d 429s the clients received are not in the store, want at most %d", lost, len(got.received), bound)
				}
			})
		}
	}
}

// stormOutcome is what the clients received and the store kept.
type stormOutcome struct {
	received map[string]bool // request ids the clients got a 429 for, without X-Scar-Degraded
	degraded int             // 429s that said X-Scar-Degraded: store
	found    map[string]bool // request ids named by a stored incident
	stored   int
}

// lost counts the 429s a client received whose incident is not stored.
func (o stormOutcome) lost() int {
	n := 0
	for id := range o.received {
		if !o.found[id] {
			n++
		}
	}
	return n
}

// Storm sizes: the clients sending at once, and the 429s they receive
// before serve is killed.
const (
	stormClients = 32
	storm429s    = 3000
)

// killDuringStorm starts serve with the configuration lines given (the
// store's), its provider an upstream that answers every request with a
// 429 naming the request's id; clients send requests until storm429s
// were answered, then serve is killed while they go on, and its store
// opened.
func killDuringStorm(t *testing.T, storeLines string) stormOutcome {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"Rate limit reached for request %s","type":"requests","code":"rate_limit_exceeded"}}`, r.Header.Get("X-Request-Id"))
	}))
	t.Cleanup(up.Close)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	cfgText := storeLines + fmt.Sprintf("log:\n  level: error\nproviders:\n  - name: up\n    type: openai\n    base_url: %s/v1\n", up.URL)
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, base := startServeProcess(t, "--config", cfgPath, "--listen", "127.0.0.1:0")

	var (
		mu  sync.Mutex
		out = stormOutcome{received: map[string]bool{}}
	)
	answered := atomic.Int64{}
	enough := make(chan struct{})
	var once sync.Once
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: stormClients}}
	defer hc.CloseIdleConnections()
	var wg sync.WaitGroup
	for c := range stormClients {
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				id := fmt.Sprintf("storm-%d-%d", c, n)
				status, degraded, err := stormRequest(ctx, hc, base, id)
				if err != nil {
					return // serve is gone
				}
				if status != http.StatusTooManyRequests {
					t.Errorf("request %s: status %d, want 429", id, status)
					return
				}
				mu.Lock()
				if degraded {
					out.degraded++
				} else {
					out.received[id] = true
				}
				mu.Unlock()
				if answered.Add(1) >= storm429s {
					once.Do(func() { close(enough) })
				}
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(2 * time.Minute):
		t.Error("the storm did not reach its size")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	stop()
	wg.Wait()

	cfg := Default()
	if err := cfg.loadFile(cfgPath); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	incs, err := st.ListIncidents(context.Background(), store.IncidentQuery{Workspace: "default", Project: "default", Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	out.stored, out.found = len(incs), make(map[string]bool, len(incs))
	idRe := regexp.MustCompile(`storm-\d+-\d+`)
	for _, inc := range incs {
		if id := idRe.FindString(inc.Message); id != "" {
			out.found[id] = true
		}
	}
	return out
}

// stormRequest sends one chat request named id and reads its whole answer.
func stormRequest(ctx context.Context, hc *http.Client, base, id string) (status int, degraded bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-x","messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		return 0, false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	res, err := hc.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return 0, false, err
	}
	return res.StatusCode, res.Header.Get("X-Scar-Degraded") != "", nil
}

// startServeProcess runs serve as a subprocess of the test binary (see
// TestMain) with args and returns it once it listens, with its base URL.
// It is killed when the test ends, if it still runs.
func startServeProcess(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), "SCARPROXY_TEST_MAIN=1")
	// A pipe of our own: Wait closes that of StdoutPipe under its reader.
	stdout, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdout.Close() })
	cmd.Stdout, cmd.Stderr = outW, os.Stderr
	err = cmd.Start()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	first, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(first, "listening on ") {
		t.Fatalf("serve did not start: %q %v", first, err)
	}
	go io.Copy(io.Discard, stdout)
	addr := strings.Fields(first[strings.Index(first, "listening on ")+len("listening on "):])[0]
	return cmd, strings.TrimSuffix(addr, "/v1")
}
