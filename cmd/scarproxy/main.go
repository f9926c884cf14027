// Command scarproxy is an OpenAI-compatible reverse proxy that gives LLM
// agents a failure memory (the repeat-failure guard) and a success memory
// (recall). Point an agent's OPENAI_BASE_URL at it.
//
// Usage:
//
//	scarproxy serve [--config FILE] [--listen ADDR] [--data DIR] [--mock]
//	scarproxy demo guard|persist|recall|loop
//	scarproxy solutions add|list|rm ...
//	scarproxy recall "goal text"
//	scarproxy incidents list
//	scarproxy guard show
//	scarproxy fixes list|rm ...
//	scarproxy mcp [--config FILE] [--workspace W] [--project P]
//	scarproxy version
//
// Every command prints its usage with -h or --help.
//
// main is thin: it calls run, which end-to-end tests call in-process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(os.Stderr, "scarproxy:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "scarproxy:", err)
		os.Exit(1)
	}
}

// usageError is a command line mistake (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// run is the whole program. ctx ends it (SIGINT/SIGTERM in main). A
// command asked for its usage (-h, --help) prints it on stdout and
// returns nil.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// dispatch runs the command args name.
func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return usageError{"no command given"}
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return cmdServe(ctx, rest, getenv, stdout, stderr)
	case "demo":
		return cmdDemo(ctx, rest, getenv, stdout, stderr)
	case "solutions":
		return cmdSolutions(ctx, rest, getenv, stdout, stderr)
	case "recall":
		return cmdRecall(ctx, rest, getenv, stdout, stderr)
	case "incidents":
		return cmdIncidents(ctx, rest, getenv, stdout, stderr)
	case "guard":
		return cmdGuard(ctx, rest, getenv, stdout, stderr)
	case "fixes":
		return cmdFixes(ctx, rest, getenv, stdout, stderr)
	case "mcp":
		return cmdMCP(ctx, rest, getenv, os.Stdin, stdout, stderr)
	case "version", "--version", "-v":
		if len(rest) > 0 && isHelp(rest[0]) {
			return printHelp(stdout, "version", nil)
		}
		fmt.Fprintln(stdout, versionLine(buildInfo))
		return nil
	case "help", "--help", "-h", "-help":
		if len(rest) > 0 && len(synopsisOf(rest[0])) > 0 {
			return printHelp(stdout, rest[0], nil)
		}
		fmt.Fprint(stdout, usage())
		return nil
	default:
		fmt.Fprint(stderr, usage())
		return usageError{fmt.Sprintf("unknown command %q", cmd)}
	}
}
