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
	"github.com/scarproxy/scarproxy/proxy/memory"
	"github.com/scarproxy/scarproxy/proxy/memoryapi"
	"github.com/scarproxy/scarproxy/recall"
	"github.com/scarproxy/scarproxy/store"
)

// storeCmd parses the flags of a store command and opens the store.
type storeCmd struct {
	fs        *flag.FlagSet
	common    commonFlags
	workspace string // the flag, else tenant.default_workspace
	project   string // the flag, else as projectFlag says
	asJSON    bool
	args      []string // positional arguments
	projects  projectFlag
	// checkArgs, when set, checks the positional arguments before the
	// store is opened.
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

func newStoreCmd(name string, stderr io.Writer, projects projectFlag) *storeCmd {
	c := &storeCmd{fs: flag.NewFlagSet(name, flag.ContinueOnError), projects: projects}
	c.fs.SetOutput(stderr)
	c.common.register(c.fs, false)
	c.fs.StringVar(&c.workspace, "workspace", "", "workspace (default: tenant.default_workspace of the configuration)")
	switch projects {
	case defaultProject:
		c.fs.StringVar(&c.project, "project", "", "project (default: tenant.default_project of the configuration)")
	case anyProject:
		c.fs.StringVar(&c.project, "project", "", "project (default: none)")
	}
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

func (c *storeCmd) open(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) (Config, store.Store, error) {
	pos, err := parseInterspersed(c.fs, args)
	if err != nil {
		return Config{}, nil, usageError{err.Error()}
	}
	c.args = pos
	if c.checkArgs != nil {
		if err := c.checkArgs(pos); err != nil {
			return Config{}, nil, err
		}
	}
	cfg, err := c.common.load(c.fs, getenv)
	if err != nil {
		return cfg, nil, err
	}
	if c.workspace == "" {
		c.workspace = cfg.Tenant.DefaultWorkspace
	}
	if c.project == "" && c.projects == defaultProject {
		c.project = cfg.Tenant.DefaultProject
	}
	cfg.Mock = true // store commands never talk to providers
	if err := cfg.Validate(); err != nil {
		return cfg, nil, fmt.Errorf("config: %w", err)
	}
	st, err := openStore(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return cfg, nil, fmt.Errorf("%w (a running scarproxy holds the data directory; stop it or use the HTTP API at /scar/v1)", err)
	}
	return cfg, st, nil
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
	if len(args) == 0 {
		return usageError{"solutions: want add, list or rm"}
	}
	sub, args := args[0], args[1:]
	projects := noProject
	if sub == "add" {
		projects = anyProject // none: a solution of the whole workspace
	}
	c := newStoreCmd("solutions "+sub, stderr, projects)
	var goal, approach, outcome string
	var confidence float64
	if sub == "add" {
		c.fs.StringVar(&goal, "goal", "", "what was asked (required)")
		c.fs.StringVar(&approach, "approach", "", "how it was solved (required)")
		c.fs.StringVar(&outcome, "outcome", "", "how it ended (required)")
		c.fs.Float64Var(&confidence, "confidence", 0.9, "confidence in [0,1], or a percentage up to 100")
	}
	_, st, err := c.open(ctx, args, getenv, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "add":
		for _, f := range []struct{ name, v string }{{"--goal", goal}, {"--approach", approach}, {"--outcome", outcome}} {
			if strings.TrimSpace(f.v) == "" {
				return usageError{"solutions add: " + f.name + " is required"}
			}
		}
		conf, err := memoryapi.ParseConfidence(confidence)
		if err != nil {
			return usageError{"solutions add: --" + err.Error()}
		}
		now := time.Now()
		sol := store.Solution{
			Workspace: c.workspace, Project: c.project, Key: recall.GoalKey(goal),
			Goal: strings.TrimSpace(goal), Approach: strings.TrimSpace(approach), Outcome: strings.TrimSpace(outcome),
			Confidence: conf, Source: store.SourceAPI, Verified: true, Created: now, Updated: now,
		}
		if err := st.PutSolution(ctx, &sol); err != nil {
			return err
		}
		if c.asJSON {
			return printJSON(stdout, sol)
		}
		fmt.Fprintln(stdout, sol.ID)
		return nil
	case "list":
		sols, err := st.ListSolutions(ctx, c.workspace)
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
			fmt.Fprintf(tw, "%s\t%s\t%.0f%%\t%s\n", s.ID, s.Source, s.Confidence*100, oneLine(s.Goal, 70))
		}
		return tw.Flush()
	case "rm":
		if len(c.args) != 1 {
			return usageError{"solutions rm: want exactly one ID"}
		}
		if err := st.DeleteSolution(ctx, c.workspace, c.args[0]); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "deleted", c.args[0])
		return nil
	}
	return usageError{fmt.Sprintf("solutions: unknown subcommand %q (want add, list or rm)", sub)}
}

func cmdRecall(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c := newStoreCmd("recall", stderr, anyProject)
	k := c.fs.Int("k", 0, "number of matches (1-5; default recall.max_results)")
	cfg, st, err := c.open(ctx, args, getenv, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	goal := strings.Join(c.args, " ")
	if strings.TrimSpace(goal) == "" {
		return usageError{`recall: give the goal text, e.g. scarproxy recall "parse the config file"`}
	}
	ix := recall.NewIndex()
	if _, _, err := ix.Follow(ctx, st, 0); err != nil {
		return err
	}
	n := cfg.Recall.MaxResults
	if *k > 0 {
		n = *k
	}
	// No --project: solutions of every project, as GET /scar/v1/recall.
	matches := ix.Search(recall.Query{Workspace: c.workspace, Project: c.project, Goal: goal, K: n, MinSimilarity: cfg.Recall.MinSimilarity})
	if c.asJSON {
		if matches == nil {
			matches = []recall.Match{}
		}
		return printJSON(stdout, map[string]any{"matches": matches, "block": recall.Block(matches)})
	}
	if len(matches) == 0 {
		fmt.Fprintln(stdout, "no similar solution (threshold", cfg.Recall.MinSimilarity, ")")
		return nil
	}
	fmt.Fprintln(stdout, recall.Block(matches))
	return nil
}

func cmdIncidents(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "list" {
		return usageError{"incidents: want list"}
	}
	c := newStoreCmd("incidents list", stderr, defaultProject)
	session := c.fs.String("session", "", "only this session")
	limit := c.fs.Int("limit", 50, "how many, newest first")
	_, st, err := c.open(ctx, args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	incs, err := st.ListIncidents(ctx, store.IncidentQuery{Workspace: c.workspace, Project: c.project, Session: *session, Limit: *limit})
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
	if len(args) == 0 || args[0] != "show" {
		return usageError{"guard: want show"}
	}
	c := newStoreCmd("guard show", stderr, defaultProject)
	session := c.fs.String("session", "", "narrow to one session")
	cfg, st, err := c.open(ctx, args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	g, err := guard.New(cfg.Guard)
	if err != nil {
		return err
	}
	now := time.Now()
	incs, err := st.ListIncidents(ctx, store.IncidentQuery{
		Workspace: c.workspace, Project: c.project, Session: *session,
		Since: now.Add(-cfg.Guard.Window), Limit: memory.DefaultGuardReadLimit,
	})
	if err != nil {
		return err
	}
	entries := g.Detect(incs, now)
	if c.asJSON {
		if entries == nil {
			entries = []guard.Entry{}
		}
		return printJSON(stdout, map[string]any{"patterns": entries, "block": guard.Block(entries)})
	}
	if len(entries) == 0 {
		fmt.Fprintf(stdout, "no repeated failure in the last %s (%d incidents)\n", cfg.Guard.Window, len(incs))
		return nil
	}
	fmt.Fprintln(stdout, guard.Block(entries))
	return nil
}

func cmdFixes(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"fixes: want list or rm"}
	}
	sub, args := args[0], args[1:]
	if sub != "list" && sub != "rm" {
		return usageError{fmt.Sprintf("fixes: unknown subcommand %q (want list or rm)", sub)}
	}
	c := newStoreCmd("fixes "+sub, stderr, defaultProject)
	var limit *int
	if sub == "list" {
		limit = c.fs.Int("limit", 100, "how many, most recently updated first")
	}
	c.checkArgs = func(pos []string) error {
		switch {
		case sub == "rm" && len(pos) != 1:
			return usageError{"fixes rm: want exactly one ID"}
		case sub == "list" && len(pos) != 0:
			return usageError{"fixes list: takes no arguments"}
		}
		return nil
	}
	_, st, err := c.open(ctx, args, getenv, stderr)
	if err != nil {
		return err
	}
	defer st.Close()
	if sub == "rm" {
		if err := st.DeleteFix(ctx, c.workspace, c.project, c.args[0]); err != nil {
			return err
		}
		fmt.Fprintln(stdout, "deleted", c.args[0])
		return nil
	}
	fixes, err := st.ListFixes(ctx, store.FixQuery{Workspace: c.workspace, Project: c.project, Limit: *limit})
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", f.ID, f.Updated.Local().Format(time.DateTime), oneLine(f.Tool, 30),
			oneLine(f.Pattern, 30), f.Failures, oneLine(f.Call, 60))
	}
	return tw.Flush()
}
