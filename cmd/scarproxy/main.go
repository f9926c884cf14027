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
// main is thin: it calls run, which end-to-end tests call in-process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

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

const usage = `scarproxy — an OpenAI-compatible proxy with failure and success memory

Usage:
  scarproxy serve [--config FILE] [--listen ADDR] [--data DIR] [--mock]
  scarproxy demo guard|persist|recall|loop
  scarproxy solutions add --goal G --approach A --outcome O [--confidence C] [--workspace W] [--project P]
  scarproxy solutions list [--workspace W]
  scarproxy solutions rm ID [--workspace W]
  scarproxy recall [--workspace W] [--project P] [-k N] "goal text"
  scarproxy incidents list [--workspace W] [--project P] [--session S] [--limit N]
  scarproxy guard show [--workspace W] [--project P] [--session S]
  scarproxy fixes list [--workspace W] [--project P] [--limit N]
  scarproxy fixes rm ID [--workspace W] [--project P]
  scarproxy mcp [--config FILE] [--data DIR] [--workspace W] [--project P]
  scarproxy version

Store commands (solutions, recall, incidents, guard, fixes, mcp) accept --config,
--data and the SCARPROXY_* variables like serve, and work on bbolt and
PostgreSQL. mcp serves the memory's MCP tools on stdin and stdout, for MCP
clients that launch a command (serve has them at /mcp).
--workspace and --project default to tenant.default_workspace and
tenant.default_project of the configuration; without --project, recall
searches every project and solutions add stores for the whole workspace.
`

// run is the whole program. ctx ends it (SIGINT/SIGTERM in main).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
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
		fmt.Fprintln(stdout, "scarproxy", version)
		return nil
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return usageError{fmt.Sprintf("unknown command %q", cmd)}
	}
}
