package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// synopses are the command lines of every command, in the order the
// usage lists them, without the leading "scarproxy ".
var synopses = []string{
	"serve [--config FILE] [--listen ADDR] [--data DIR] [--mock] [--log-format text|json]",
	"demo guard|persist|recall|loop [--url URL]",
	"solutions add --goal G --approach A --outcome O [--confidence C] [--workspace W] [--project P]",
	"solutions list [--workspace W]",
	"solutions rm ID [--workspace W]",
	"solutions wrong ID [--note TEXT] [--undo] [--workspace W]",
	`recall [--workspace W] [--project P] [-k N] "goal text"`,
	"incidents list [--workspace W] [--project P] [--session S] [--limit N]",
	"guard show [--workspace W] [--project P] [--session S]",
	"fixes list [--workspace W] [--project P] [--limit N]",
	"fixes rm ID [--workspace W] [--project P]",
	"fixes wrong ID [--note TEXT] [--undo] [--workspace W] [--project P]",
	"mcp [--config FILE] [--data DIR] [--workspace W] [--project P]",
	"version",
}

// storeNote explains the flags every store command shares.
const storeNote = `Store commands (solutions, recall, incidents, guard, fixes) open the store of
the configuration: they accept --config, --data and the SCARPROXY_* variables
like serve, and work on bbolt and PostgreSQL. With --url URL they act through
a running proxy's memory API instead (while serve holds a bbolt store, the
only way), with the admin token or a gateway key from SCARPROXY_ADMIN_TOKEN,
else from the variable the configuration's admin.token_env names. All take
--json.
--workspace and --project default to tenant.default_workspace and
tenant.default_project of the configuration; without --project, recall
searches every project and solutions add stores for the whole workspace.
`

// usage is the program's usage, printed by `scarproxy help`.
func usage() string {
	var b strings.Builder
	b.WriteString("scarproxy — a reverse proxy for LLM APIs with failure and success memory\n\nUsage:\n")
	for _, s := range synopses {
		b.WriteString("  scarproxy " + s + "\n")
	}
	b.WriteString("\nEvery command prints its flags with -h or --help.\n\n")
	b.WriteString(storeNote)
	b.WriteString(`
mcp serves the memory's MCP tools on stdin and stdout, for MCP clients that
launch a command (serve has them at /mcp).
`)
	return b.String()
}

// synopsisOf returns the usage lines of a command ("fixes") or of one of
// its subcommands ("fixes rm").
func synopsisOf(command string) []string {
	var out []string
	for _, s := range synopses {
		if s == command || strings.HasPrefix(s, command+" ") {
			out = append(out, "scarproxy "+s)
		}
	}
	return out
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// printHelp prints the usage of command (see synopsisOf) on w, with the
// flags of fs when it is not nil, and returns flag.ErrHelp: run answers
// it with exit status 0.
func printHelp(w io.Writer, command string, fs *flag.FlagSet) error {
	fmt.Fprintln(w, "Usage:")
	for _, s := range synopsisOf(command) {
		fmt.Fprintln(w, "  "+s)
	}
	if fs != nil {
		fmt.Fprintln(w, "\nFlags:")
		out := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
	}
	return flag.ErrHelp
}

// newFlagSet returns a flag set for command that prints nothing itself:
// parseError says what went wrong, and -h prints the usage on stdout.
func newFlagSet(command string) *flag.FlagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseError turns an error of fs.Parse into run's: for -h or --help the
// command's usage, printed on stdout (flag.ErrHelp, exit status 0); any
// other a usageError naming the command.
func parseError(err error, command string, fs *flag.FlagSet, stdout io.Writer) error {
	if errors.Is(err, flag.ErrHelp) {
		return printHelp(stdout, command, fs)
	}
	return usageError{command + ": " + err.Error() + " (see scarproxy " + command + " --help)"}
}
