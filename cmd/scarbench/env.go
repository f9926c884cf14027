package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/scarproxy/scarproxy/store"
)

// benchEnv is the running set-up: the children and what they serve.
type benchEnv struct {
	dir      string
	api      *api
	upstream *child
	bare     *child
	scar     *child
	pre      prefix // what the conversations send before their tasks
	convs    []conversation
	children []*child
	dataFile string // scarproxy's bbolt file (without -postgres)
}

// base returns the root of a target, below which each API's paths are
// (/v1/chat/completions, /v1beta/models/...).
func (e *benchEnv) base(name string) string {
	switch name {
	case "direct":
		return "http://" + e.upstream.addr
	case "bare":
		return "http://" + e.bare.addr
	default:
		return "http://" + e.scar.addr
	}
}

// pid is the process that serves target name: the fake upstream for
// "direct", or the proxy.
func (e *benchEnv) pid(name string) int {
	switch name {
	case "direct":
		return e.upstream.pid()
	case "bare":
		return e.bare.pid()
	default:
		return e.scar.pid()
	}
}

// metricsURL is scarproxy's Prometheus endpoint.
func (e *benchEnv) metricsURL() string { return "http://" + e.scar.addr + "/metrics" }

// close stops the children (newest first) and removes the working
// directory unless keep.
func (e *benchEnv) close(keep bool) {
	for i := len(e.children) - 1; i >= 0; i-- {
		e.children[i].stop()
	}
	if !keep {
		os.RemoveAll(e.dir)
	}
}

var scarAddr = regexp.MustCompile(`listening on http://(\S+)/v1`)

// setUp starts the upstream, seeds the store, starts scarproxy and the bare
// proxy. On error the returned env (when not nil) must still be closed.
func setUp(ctx context.Context, o options, progress io.Writer) (*benchEnv, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	pre, err := prefixOf(o.prefix, o.api, o.system, wd)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "scarbench-*")
	if err != nil {
		return nil, err
	}
	e := &benchEnv{dir: dir, api: apiByName(o.api), pre: pre}
	self, err := os.Executable()
	if err != nil {
		return e, fmt.Errorf("find own binary: %w", err)
	}
	need := func(t string) bool { return o.soak > 0 && t != "direct" || slices.Contains(o.targets, t) }

	listen := func(i int) string {
		if o.portBase == 0 {
			return "127.0.0.1:0"
		}
		return "127.0.0.1:" + strconv.Itoa(o.portBase+i)
	}
	e.upstream, err = startChild(ctx, "upstream", self, nil, childEnv(os.Environ(), envRole+"=upstream", envListen+"="+listen(0)),
		filepath.Join(dir, "upstream.log"), roleAddr, 10*time.Second)
	if err != nil {
		return e, err
	}
	e.children = append(e.children, e.upstream)
	upstreamRoot := "http://" + e.upstream.addr

	if need("bare") {
		e.bare, err = startChild(ctx, "bare proxy", self, nil, childEnv(os.Environ(), envRole+"=bareproxy", envTarget+"="+"http://"+e.upstream.addr, envListen+"="+listen(1)),
			filepath.Join(dir, "bare.log"), roleAddr, 10*time.Second)
		if err != nil {
			return e, err
		}
		e.children = append(e.children, e.bare)
	}

	solutions := seedSolutions(o.solutions, time.Now())
	if need("scar") {
		bin := o.scarproxy
		if bin == "" {
			fmt.Fprintln(progress, "building scarproxy…")
			if bin, err = buildScarproxy(ctx, dir); err != nil {
				return e, err
			}
		}
		data := filepath.Join(dir, "data")
		fmt.Fprintf(progress, "seeding %d incidents and %d solutions…\n", o.incidents, o.solutions)
		if o.postgres != "" {
			err = seedPostgres(ctx, o.postgres, o.incidents, o.solutions, time.Now(), progress)
		} else {
			e.dataFile = filepath.Join(data, "scarproxy.db")
			err = seedStore(ctx, e.dataFile, o.incidents, o.solutions, time.Now(), progress)
		}
		if err != nil {
			return e, err
		}
		cfg := filepath.Join(dir, "scarproxy.yaml")
		// One provider, the fake upstream.
		provider := "    type: openai\n    base_url: " + strconv.Quote(upstreamRoot+"/v1") + "\n"
		switch o.api {
		case "chat":
			// Trees before the Responses and Messages formats refuse the
			// apis key (and serve only chat), so a chat run writes the
			// configuration every tree reads alike.
		case "gemini":
			// A gemini provider's root is the host: the Gemini API's
			// paths name their version.
			provider = "    type: gemini\n    base_url: " + strconv.Quote(upstreamRoot) + "\n"
		default:
			provider += "    apis: [chat, responses, messages]\n"
		}
		yaml := "# scarbench: default configuration, one provider (the fake upstream).\n" +
			"providers:\n  - name: upstream\n" + provider
		if o.postgres != "" {
			yaml += "store:\n  driver: postgres\n  dsn: " + strconv.Quote(o.postgres) + "\n"
		}
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			return e, err
		}
		e.scar, err = startChild(ctx, "scarproxy", bin, []string{"serve", "--config", cfg, "--listen", listen(2), "--data", data},
			childEnv(os.Environ()), filepath.Join(dir, "scarproxy.log"), scarAddr, o.startWait)
		if err != nil {
			return e, err
		}
		e.children = append(e.children, e.scar)
		if err := waitReady(ctx, "http://"+e.scar.addr+"/readyz", o.startWait); err != nil {
			return e, fmt.Errorf("scarproxy: %w: %s", err, e.scar.logTail())
		}
	}

	pad := historyPad(e.api, o.history<<10, solutions, pre)
	e.convs = clientConversations(e.api, max(o.conc, 32), o.stream || o.soak > 0, solutions, pad, o.oneTask, pre)
	return e, nil
}

// clientConversations builds the conversations of n clients in a's shape,
// after the prefix pre: each client's task is a reworded goal of
// one of the solutions (see clientGoal), the first one's for every client
// with oneTask.
func clientConversations(a *api, n int, stream bool, solutions []store.Solution, pad int, oneTask bool, pre prefix) []conversation {
	if oneTask {
		solutions = solutions[:min(len(solutions), 1)]
	}
	convs := make([]conversation, n)
	for i := range convs {
		convs[i] = a.newConv(i, stream, solutions, pad, pre)
	}
	return convs
}

// historyPad is the fewest rounds of history (historyRounds) that make
// a's requests at least size bytes long; 0 when they are that long
// already.
func historyPad(a *api, size int, solutions []store.Solution, pre prefix) int {
	body := func(pad int) int {
		return len(a.newConv(0, false, solutions, pad, pre).requestBody(nil, 0, 1, false))
	}
	base := body(0)
	if size <= base {
		return 0
	}
	// A round is at least its listing, about 4 KB: hi is enough.
	lo, hi := 0, (size-base)/(2<<10)+1
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if body(mid) >= size {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// waitReady polls url until it answers 200.
func waitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d %s", res.StatusCode, strings.TrimSpace(string(b)))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s (last answer: %s)", timeout, last)
		case <-tick.C:
		}
	}
}

// scrape reads the named unlabelled series of a Prometheus text endpoint.
func scrape(ctx context.Context, url string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Close = true // leave no idle connection behind (the soak counts goroutines)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	out := make(map[string]float64, len(names))
	for _, line := range strings.Split(string(b), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %s: %w", url, name, err)
		}
		out[name] = v
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("scrape %s: no series %s", url, n)
		}
	}
	return out, nil
}
