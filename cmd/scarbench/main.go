// Command scarbench measures what scarproxy costs an agent, side by side
// with the floor any proxy pays.
//
// It starts, as child processes on loopback addresses: a fast fake
// upstream (small fixed JSON and SSE answers of the chat, Responses,
// Messages and Gemini APIs, each in its own shape), a bare
// httputil.ReverseProxy in front of it, and the scarproxy binary with its
// default configuration and memory on (a bbolt store seeded with 100k
// incidents and 10k solutions in the benchmarked tenant; guard and recall
// on). It then drives a closed loop of -c concurrent clients for -d per
// run against (a) the upstream directly, (b) the bare proxy and (c)
// scarproxy, interleaved over -rounds rounds, and prints requests/s,
// latency p50/p90/p99 (and time to first byte with -stream), the ratio
// (c)/(b) of throughputs and the latency (c) adds over (b), and the CPU
// time each process used per request answered (from /proc/PID/stat):
// what (c) adds to (b) there is its own work, and hardly moves with the
// rest of the machine's load, unlike throughput on a shared machine.
//
// Requests are realistic agent turns: a ~20 KB body with a system prompt,
// tool definitions, fifteen tool rounds (four of them failures), and a new
// tool result in every request. -api chooses their wire API: chat
// (POST /v1/chat/completions, the default), responses (POST /v1/responses,
// as Codex CLI sends it), messages (POST /v1/messages, as Claude Code
// sends it) or gemini (POST /v1beta/models/{model}:generateContent, and
// :streamGenerateContent?alt=sse for streams, as the Gemini CLI sends
// it); the turn is the same in each.
//
// -system KB pads the system prompt (about 2 KB) with more guidance, as the
// coding agents' prompts are 12 to 53 KB.
//
// With -one-task every client runs the same task: the conversations share
// their head (system prompt and first user message) and differ from the
// first tool round on, as the runs of a script that starts an agent with
// one prompt several times at once.
//
// With -soak N it instead opens N concurrent streams through scarproxy,
// holds them open, and reports scarproxy's resident memory and goroutine
// count while they are open and after they close; then the same through
// the bare proxy, for reference.
//
// Usage:
//
//	scarbench [-api chat] [-c 1] [-d 5s] [-rounds 3] [-stream] [-final-every 5] [-out result.json]
//	scarbench -storm [-postgres DSN] [-c 32]
//	scarbench [-api chat] -soak 1000
//
// The default mix makes one answer in five final (-final-every 5): an
// agent's user turn runs a few tool calls and ends in a final answer, and
// a final answer after tool use is what scarproxy captures as a solution;
// a workload of tool calls only (-final-every 0) never reaches the write
// path. -storm makes every answer a 429, so every request through
// scarproxy records an incident; at the end scarproxy is shut down
// gracefully and its store is read: every 429 it answered must be there
// (the count check).
//
// scarbench builds scarproxy with the go tool (run it inside the module) or
// uses -scarproxy PATH. Everything listens on 127.0.0.1 and the whole run is
// bounded in time.
//
// # Imports
//
// scarbench uses the store package to seed the benchmark's data file and
// the guard and recall packages to shape the seeded records; it never
// imports the proxy package: scarproxy is measured as the shipped binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "scarbench:", err)
		if errors.As(err, new(usageError)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a command line mistake (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// options are scarbench's flags.
type options struct {
	conc       int
	dur        time.Duration
	warmup     time.Duration
	rounds     int
	stream     bool
	out        string
	soak       int
	incidents  int
	solutions  int
	targets    []string
	scarproxy  string
	failEvery  int
	finalEvery int
	keep       bool
	api        string
	storm      bool
	retries    int
	postgres   string
	portBase   int
	history    int
	grow       int
	prefix     string
	oneTask    bool
	system     int
	startWait  time.Duration
}

var allTargets = []string{"direct", "bare", "scar"}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("scarbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.conc, "c", 1, "concurrent clients (closed loop)")
	fs.DurationVar(&o.dur, "d", 5*time.Second, "measured duration of each run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up before each run")
	fs.IntVar(&o.rounds, "rounds", 3, "interleaved rounds (each round runs every target once)")
	fs.BoolVar(&o.stream, "stream", false, "streaming requests (SSE); also reports time to first byte")
	fs.StringVar(&o.out, "out", "", "write the results as JSON to this file")
	fs.IntVar(&o.soak, "soak", 0, "instead of the load test, hold this many concurrent streams open through scarproxy, then the bare proxy, and report their RSS (and scarproxy's goroutines)")
	fs.IntVar(&o.incidents, "incidents", 100_000, "incidents seeded in the benchmarked tenant")
	fs.IntVar(&o.solutions, "solutions", 10_000, "solutions seeded in the benchmarked workspace")
	targets := fs.String("targets", strings.Join(allTargets, ","), "comma-separated targets to run: direct, bare, scar")
	fs.StringVar(&o.scarproxy, "scarproxy", "", "scarproxy binary to measure (default: go build it into a temporary directory)")
	fs.IntVar(&o.failEvery, "fail-every", 0, "every Nth request of a client carries a new failed tool result (an incident write); 0 never")
	fs.IntVar(&o.finalEvery, "final-every", defaultFinalEvery, "every Nth answer is final (finish_reason stop: scarproxy auto-captures a solution); 0 never (every answer a tool call)")
	fs.BoolVar(&o.storm, "storm", false, "every answer is a 429 (a rate-limit storm: every request an incident); reports incidents stored per second and checks at the end that every 429 scarproxy answered is in its store")
	fs.IntVar(&o.retries, "retries", 0, "with -storm, each client sends every request this many times more, the same bytes, before its next one, as an agent retries a 429 (Codex CLI's default is 4, the OpenAI and Anthropic SDKs' 2); 0: every request a new round")
	fs.IntVar(&o.portBase, "port-base", 0, "listen on fixed loopback ports: the upstream on this one, the bare proxy on the next, scarproxy on the one after (0: any free ports)")
	fs.StringVar(&o.postgres, "postgres", "", "run scarproxy on this PostgreSQL DSN (seeded first; give it an empty schema, e.g. with search_path) instead of a bbolt file")
	fs.StringVar(&o.api, "api", "chat", "wire API of the requests: chat (/v1/chat/completions), responses (/v1/responses, as Codex CLI), messages (/v1/messages, as Claude Code) or gemini (/v1beta/models/{model}:generateContent, as the Gemini CLI)")
	fs.IntVar(&o.history, "history", 0, "pad every conversation with older tool rounds (directory listings that succeeded) to about this many KB (0: as it is, about 20 KB)")
	fs.IntVar(&o.grow, "grow", defaultGrow, "each client's conversation grows by one round per request, as an agent's run does (every request extends the one before it), for this many requests, then goes back to its first round; 0: every request replaces the newest round (a branch from the turn before)")
	fs.StringVar(&o.prefix, "prefix", "agent", "what each request sends before its task: agent (the system prompt and tools of a request the API's usual agent sent, from the captures in proxy/*/testdata/agents: qwen-code for chat, Codex CLI for responses, Claude Code for messages, the Gemini CLI for gemini) or synthetic (scarbench's own 2 KB prompt, padded by -system, and seven tools)")
	fs.BoolVar(&o.oneTask, "one-task", false, "every client runs the same task (the same system prompt and first user message, as a script that starts an agent with one prompt several times at once); each is still its own run, with its own calls and run id")
	fs.IntVar(&o.system, "system", 0, "with -prefix synthetic, pad the system prompt with more guidance to about this many KB (0: as it is, about 2 KB; coding agents send 12 to 53 KB)")
	fs.DurationVar(&o.startWait, "start-timeout", time.Minute, "how long scarproxy may take to start listening and be ready (longer under valgrind or a profiler)")
	fs.BoolVar(&o.keep, "keep", false, "keep the working directory (server logs, store, config) and print its path")
	if err := fs.Parse(args); err != nil {
		return o, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return o, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	switch {
	case o.conc < 1 || o.conc > 4096:
		return o, usageError{"-c: must be 1..4096"}
	case o.dur <= 0 || o.dur > 10*time.Minute:
		return o, usageError{"-d: must be in (0, 10m]"}
	case o.startWait <= 0 || o.startWait > 30*time.Minute:
		return o, usageError{"-start-timeout: must be in (0, 30m]"}
	case o.warmup < 0 || o.warmup > time.Minute:
		return o, usageError{"-warmup: must be in [0, 1m]"}
	case o.rounds < 1 || o.rounds > 50:
		return o, usageError{"-rounds: must be 1..50"}
	case o.soak < 0 || o.soak > 10_000:
		return o, usageError{"-soak: must be 0..10000"}
	case o.incidents < 0 || o.solutions < 0:
		return o, usageError{"-incidents and -solutions must not be negative"}
	case o.portBase < 0 || o.portBase > 65533:
		return o, usageError{"-port-base: must be 0..65533"}
	case o.history < 0 || o.history > 16<<10:
		return o, usageError{"-history: must be 0..16384 (KB)"}
	case o.system < 0 || o.system > 1024:
		return o, usageError{"-system: must be 0..1024 (KB)"}
	case o.prefix != "agent" && o.prefix != "synthetic":
		return o, usageError{fmt.Sprintf("-prefix: %q is not agent or synthetic", o.prefix)}
	case o.system > 0 && o.prefix != "synthetic":
		return o, usageError{"-system: pads scarbench's own system prompt; give -prefix synthetic with it"}
	case o.grow < 0 || o.grow > 1000:
		return o, usageError{"-grow: must be 0..1000"}
	case o.retries < 0 || o.retries > 100:
		return o, usageError{"-retries: must be 0..100"}
	case o.retries > 0 && !o.storm:
		return o, usageError{"-retries: only with -storm (only a 429 is retried)"}
	case o.failEvery < 0 || o.finalEvery < 0:
		return o, usageError{"-fail-every and -final-every must not be negative"}
	case apiByName(o.api) == nil:
		return o, usageError{fmt.Sprintf("-api: %q is not chat, responses, messages or gemini", o.api)}
	}
	for _, t := range strings.Split(*targets, ",") {
		t = strings.TrimSpace(t)
		if !slices.Contains(allTargets, t) {
			return o, usageError{fmt.Sprintf("-targets: %q is not direct, bare or scar", t)}
		}
		if !slices.Contains(o.targets, t) {
			o.targets = append(o.targets, t)
		}
	}
	return o, nil
}

// run is the whole program. A role in the environment makes it one of the
// child servers instead.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if role := getenv(envRole); role != "" {
		return serveRole(ctx, role, getenv, stdout)
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// Bound the whole run: set-up (build, seed, start) plus the runs.
	budget := 5*time.Minute + o.startWait
	if o.soak > 0 {
		budget += 5 * time.Minute
	} else {
		budget += time.Duration(2*o.rounds*len(o.targets)) * (o.warmup + o.dur)
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()

	env, err := setUp(ctx, o, stdout)
	if env != nil {
		defer func() {
			env.close(o.keep)
			if o.keep {
				fmt.Fprintf(stdout, "working directory kept: %s\n", env.dir)
			}
		}()
	}
	if err != nil {
		return err
	}
	rep := &report{Machine: machineInfo(), Options: optionsReport(o)}
	if o.soak > 0 {
		s, err := soak(ctx, env, o, stdout)
		if err != nil {
			return err
		}
		rep.Soak = s
	} else {
		if err := loadTest(ctx, env, o, rep, stdout); err != nil {
			return err
		}
	}
	if o.out != "" {
		if err := writeJSON(o.out, rep); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "results written to %s\n", o.out)
	}
	return nil
}

// defaultGrow is how many requests a run of the default workload lasts:
// each extends the one before it by a round, as an agent's turns do, and
// the twentieth goes back to the run's first round.
const defaultGrow = 20

// defaultFinalEvery is the default mix: one answer in five is final. A
// coding agent's turn is a few tool calls (read, edit, test) and then an
// answer in words; the final answers are what scarproxy captures.
const defaultFinalEvery = 5
