package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scarproxy/scarproxy/guard"
	"github.com/scarproxy/scarproxy/proxy/memoryapi"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// storeCmd parses the flags of a store command and opens the memory:
// the store of the configuration, or a running proxy's memory API (--url).
type storeCmd struct {
	name      string // "fixes rm"
	fs        *flag.FlagSet
	common    commonFlags
	workspace string // the flag, else tenant.default_workspace (--url: the proxy's)
	project   string // the flag, else as projectFlag says
	url       string // --url: the proxy whose memory API to use
	asJSON    bool
	args      []string // positional arguments
	projects  projectFlag
	// checkArgs, when set, checks the positional arguments before the
	// memory is opened.
	checkArgs func(pos []string) error
}

// projectFlag says whether a store command takes --project and what its
// absence means.
type projectFlag int

const (
	noProject      projectFlag = iota // no --project
	defaultProject                    // absent: tenant.default_project
	anyProject                        // absent: "" (every project, or workspace-wide)
)

// adminTokenEnv is the variable the store commands read the memory API's
// credential from with --url (else the one admin.token_env names).
const adminTokenEnv = "SCARPROXY_ADMIN_TOKEN"

func newStoreCmd(name string, projects projectFlag) *storeCmd {
	c := &storeCmd{name: name, fs: newFlagSet(name), projects: projects}
	c.common.register(c.fs, false)
	c.fs.StringVar(&c.workspace, "workspace", "", "workspace (default: tenant.default_workspace of the configuration)")
	switch projects {
	case defaultProject:
		c.fs.StringVar(&c.project, "project", "", "project (default: tenant.default_project of the configuration)")
	case anyProject:
		c.fs.StringVar(&c.project, "project", "", "project (default: none)")
	}
	c.fs.StringVar(&c.url, "url", "", "act through the memory API of the proxy at this address (e.g. http://127.0.0.1:8080) instead of opening the store; "+
		"the admin token or a gateway key comes from "+adminTokenEnv+", else from the variable admin.token_env names")
	c.fs.BoolVar(&c.asJSON, "json", false, "print JSON")
	return c
}

// parseInterspersed parses flags wherever they stand among the positional
// arguments ("rm ID --workspace W" as well as "rm --workspace W ID") and
// returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		args = fs.Args()
		pos, args = append(pos, args[0]), args[1:]
	}
}

// open parses args and opens the memory the command acts on.
func (c *storeCmd) open(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (memoryAccess, error) {
	pos, err := parseInterspersed(c.fs, args)
	if err != nil {
		return nil, parseError(err, c.name, c.fs, stdout)
	}
	c.args = pos
	if c.checkArgs != nil {
		if err := c.checkArgs(pos); err != nil {
			return nil, err
		}
	}
	cfg, err := c.common.load(c.fs, getenv)
	if err != nil {
		return nil, err
	}
	if c.url != "" {
		// The proxy applies its own defaults to what is not named.
		return newAPIAccess(c.url, apiToken(cfg, getenv))
	}
	if c.workspace == "" {
		c.workspace = cfg.Tenant.DefaultWorkspace
	}
	if c.project == "" && c.projects == defaultProject {
		c.project = cfg.Tenant.DefaultProject
	}
	cfg.Mock = true // store commands never talk to providers
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	st, err := openStore(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return nil, fmt.Errorf("%w (a running scarproxy holds the data directory; stop it or use --url with its address)", err)
	}
	return &storeAccess{st: st, cfg: cfg}, nil
}

// apiToken returns the credential for the memory API: SCARPROXY_ADMIN_TOKEN,
// else the variable the configuration's admin.token_env names.
func apiToken(cfg Config, getenv func(string) string) string {
	if tok := getenv(adminTokenEnv); tok != "" {
		return tok
	}
	if cfg.Admin.TokenEnv != "" {
		return getenv(cfg.Admin.TokenEnv)
	}
	return ""
}

// subcommand splits a command's arguments into its subcommand and the
// rest. No subcommand, or one of -h and --help, prints the command's usage.
func subcommand(command string, args []string, stdout io.Writer, want string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, usageError{command + ": want " + want + " (see scarproxy " + command + " --help)"}
	}
	if isHelp(args[0]) {
		return "", nil, printHelp(stdout, command, nil)
	}
	return args[0], args[1:], nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

func cmdSolutions(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("solutions", args, stdout, "add, list, rm or wrong")
	if err != nil {
		return err
	}
	if sub != "add" && sub != "list" && sub != "rm" && sub != "wrong" {
		return usageError{fmt.Sprintf("solutions: unknown subcommand %q (want add, list, rm or wrong)", sub)}
	}
	projects := noProject
	if sub == "add" {
		projects = anyProject // none: a solution of the whole workspace
	}
	c := newStoreCmd("solutions "+sub, projects)
	var in solutionIn
	if sub == "add" {
		c.fs.StringVar(&in.Goal, "goal", "", "what was asked (required)")
		c.fs.StringVar(&in.Approach, "approach", "", "how it was solved (required)")
		c.fs.StringVar(&in.Outcome, "outcome", "", "how it ended (required)")
		c.fs.Float64Var(&in.Confidence, "confidence", 0.9, "confidence in [0,1], or a percentage up to 100")
	}
	var mark wrongFlags
	if sub == "wrong" {
		mark.define(c)
	}
	c.checkArgs = func(pos []string) error {
		if (sub == "rm" || sub == "wrong") && len(pos) != 1 {
			return usageError{"solutions " + sub + ": want exactly one ID"}
		}
		return nil
	}
	m, err := c.open(ctx, args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	switch sub {
	case "add":
		return addSolution(ctx, m, c, in, stdout)
	case "list":
		return listSolutions(ctx, m, c, stdout)
	case "wrong":
		sol, err := m.MarkSolution(ctx, c.workspace, c.args[0], !mark.undo, mark.note)
		if err != nil {
			return err
		}
		return mark.report(c, stdout, sol.ID, sol.Wrong, sol)
	}
	if err := m.DeleteSolution(ctx, c.workspace, c.args[0]); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "deleted", c.args[0])
	return nil
}

func addSolution(ctx context.Context, m memoryAccess, c *storeCmd, in solutionIn, stdout io.Writer) error {
	for _, f := range []struct{ name, v string }{{"--goal", in.Goal}, {"--approach", in.Approach}, {"--outcome", in.Outcome}} {
		if strings.TrimSpace(f.v) == "" {
			return usageError{"solutions add: " + f.name + " is required"}
		}
	}
	conf, err := memoryapi.ParseConfidence(in.Confidence)
	if err != nil {
		return usageError{"solutions add: --" + err.Error()}
	}
	in.Workspace, in.Project, in.Confidence = c.workspace, c.project, conf
	in.Goal, in.Approach, in.Outcome = strings.TrimSpace(in.Goal), strings.TrimSpace(in.Approach), strings.TrimSpace(in.Outcome)
	sol, err := m.AddSolution(ctx, in)
	if err != nil {
		return err
	}
	if c.asJSON {
		return printJSON(stdout, sol)
	}
	fmt.Fprintln(stdout, sol.ID)
	return nil
}

func listSolutions(ctx context.Context, m memoryAccess, c *storeCmd, stdout io.Writer) error {
	sols, err := m.ListSolutions(ctx, c.workspace)
	if err != nil {
		return err
	}
	if c.asJSON {
		if sols == nil {
			sols = []store.Solution{}
		}
		return printJSON(stdout, map[string]any{"solutions": sols})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSOURCE\tCONF\tGOAL")
	for _, s := range sols {
		fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%s%s\n", s.ID, s.Source, s.Confidence*100, wrongTag(s.Wrong), oneLine(s.Goal, 70))
	}
	return tw.Flush()
}

func cmdRecall(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newStoreCmd("recall", anyProject)
	k := c.fs.Int("k", 0, "number of matches (1-5; default recall.max_results)")
	m, err := c.open(ctx, args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	goal := strings.Join(c.args, " ")
	if strings.TrimSpace(goal) == "" {
		return usageError{`recall: give the goal text, e.g. scarproxy recall "parse the config file"`}
	}
	// No --project: solutions of every project, as GET /scar/v1/recall.
	matches, minSim, err := m.Recall(ctx, recall.Query{Workspace: c.workspace, Project: c.project, Goal: goal, K: *k})
	if err != nil {
		return err
	}
	if c.asJSON {
		if matches == nil {
			matches = []recall.Match{}
		}
		return printJSON(stdout, map[string]any{"matches": matches, "block": recall.Block(matches)})
	}
	if len(matches) == 0 {
		fmt.Fprintln(stdout, "no similar solution (threshold", minSim, ")")
		return nil
	}
	fmt.Fprintln(stdout, recall.Block(matches))
	return nil
}

func cmdIncidents(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("incidents", args, stdout, "list")
	if err != nil {
		return err
	}
	if sub != "list" {
		return usageError{fmt.Sprintf("incidents: unknown subcommand %q (want list)", sub)}
	}
	c := newStoreCmd("incidents list", defaultProject)
	session := c.fs.String("session", "", "only this session")
	limit := c.fs.Int("limit", 50, "how many, newest first")
	m, err := c.open(ctx, args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	incs, err := m.ListIncidents(ctx, store.IncidentQuery{Workspace: c.workspace, Project: c.project, Session: *session, Limit: *limit})
	if err != nil {
		return err
	}
	if c.asJSON {
		if incs == nil {
			incs = []store.Incident{}
		}
		return printJSON(stdout, map[string]any{"incidents": incs})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTYPE\tSTATUS\tSESSION\tMESSAGE")
	for _, in := range incs {
		status := fmt.Sprint(in.StatusCode)
		if in.Code != "" { // an error code such as ECONNRESET, with the status if any
			status = strings.TrimPrefix(status+" "+in.Code, "0 ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Time.Local().Format(time.DateTime), in.Type, status, in.Session, oneLine(in.Message, 80))
	}
	return tw.Flush()
}

func cmdGuard(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("guard", args, stdout, "show")
	if err != nil {
		return err
	}
	if sub != "show" {
		return usageError{fmt.Sprintf("guard: unknown subcommand %q (want show)", sub)}
	}
	c := newStoreCmd("guard show", defaultProject)
	session := c.fs.String("session", "", "narrow to one session (--url: the guard of that conversation's next request)")
	m, err := c.open(ctx, args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	g, err := m.Guard(ctx, c.workspace, c.project, *session)
	if err != nil {
		return err
	}
	if c.asJSON {
		if g.Patterns == nil {
			g.Patterns = []guard.Entry{}
		}
		return printJSON(stdout, map[string]any{"patterns": g.Patterns, "block": g.Block})
	}
	switch {
	case len(g.Patterns) > 0:
		fmt.Fprintln(stdout, g.Block)
	case g.Incidents >= 0:
		fmt.Fprintf(stdout, "no repeated failure in the last %s (%d incidents)\n", g.Window, g.Incidents)
	default:
		fmt.Fprintf(stdout, "no repeated failure in the last %s\n", g.Window)
	}
	return nil
}

func cmdFixes(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("fixes", args, stdout, "list, rm or wrong")
	if err != nil {
		return err
	}
	if sub != "list" && sub != "rm" && sub != "wrong" {
		return usageError{fmt.Sprintf("fixes: unknown subcommand %q (want list, rm or wrong)", sub)}
	}
	c := newStoreCmd("fixes "+sub, defaultProject)
	var limit *int
	if sub == "list" {
		limit = c.fs.Int("limit", 100, "how many, most recently updated first")
	}
	var mark wrongFlags
	if sub == "wrong" {
		mark.define(c)
	}
	c.checkArgs = func(pos []string) error {
		switch {
		case (sub == "rm" || sub == "wrong") && len(pos) != 1:
			return usageError{"fixes " + sub + ": want exactly one ID"}
		case sub == "list" && len(pos) != 0:
			return usageError{"fixes list: takes no arguments"}
		}
		return nil
	}
	m, err := c.open(ctx, args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	switch sub {
	case "rm":
		if err := m.DeleteFix(ctx, c.workspace, c.project, c.args[0]); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "deleted", c.args[0])
		return nil
	case "wrong":
		f, err := m.MarkFix(ctx, c.workspace, c.project, c.args[0], !mark.undo, mark.note)
		if err != nil {
			return err
		}
		return mark.report(c, stdout, f.ID, f.Wrong, f)
	}
	fixes, err := m.ListFixes(ctx, store.FixQuery{Workspace: c.workspace, Project: c.project, Limit: *limit})
	if err != nil {
		return err
	}
	if c.asJSON {
		if fixes == nil {
			fixes = []store.Fix{}
		}
		return printJSON(stdout, map[string]any{"fixes": fixes})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tUPDATED\tTOOL\tPATTERN\tFAILURES\tCALL")
	for _, f := range fixes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s%s\n", f.ID, f.Updated.Local().Format(time.DateTime), oneLine(f.Tool, 30),
			oneLine(f.Pattern, 30), f.Failures, wrongTag(f.Wrong), oneLine(f.Call, 60))
	}
	return tw.Flush()
}

// wrongFlags are the flags of "fixes wrong" and "solutions wrong".
type wrongFlags struct {
	note string
	undo bool
}

func (w *wrongFlags) define(c *storeCmd) {
	c.fs.StringVar(&w.note, "note", "", "why it is wrong (kept with the mark, redacted)")
	c.fs.BoolVar(&w.undo, "undo", false, "remove the mark: shown to agents again")
}

// report prints what a mark did: rec as JSON with --json, else a line.
func (w *wrongFlags) report(c *storeCmd, stdout io.Writer, id string, mark *store.Wrong, rec any) error {
	if c.asJSON {
		return printJSON(stdout, rec)
	}
	if mark == nil {
		fmt.Fprintln(stdout, "not marked:", id)
		return nil
	}
	fmt.Fprintln(stdout, "marked wrong:", id, "(kept, never shown to an agent)")
	return nil
}

// wrongTag opens a listed memory marked wrong.
func wrongTag(w *store.Wrong) string {
	if w == nil {
		return ""
	}
	return "[wrong] "
}
