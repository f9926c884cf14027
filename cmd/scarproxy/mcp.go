package main

import (
	"context"
	"fmt"
	"io"
)

// cmdMCP serves the memory's MCP tools over stdin and stdout, for MCP
// clients that launch a command: the same configuration, store and tools
// as serve's /mcp, with full access (as the store commands), calls that
// name no workspace or project defaulting to --workspace and --project.
// Logs go to stderr; stdout carries the protocol only.
func cmdMCP(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("mcp")
	var f commonFlags
	f.register(fs, false)
	workspace := fs.String("workspace", "", "workspace of calls that name none (default: tenant.default_workspace)")
	project := fs.String("project", "", "project of calls that name none (default: none; incidents and the guard use tenant.default_project)")
	if err := fs.Parse(args); err != nil {
		return parseError(err, "mcp", fs, stdout)
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("mcp: unexpected argument %q", fs.Arg(0))}
	}
	cfg, err := f.load(fs, getenv)
	if err != nil {
		return err
	}
	// The tools never talk to providers, and credentials guard HTTP only:
	// whoever starts this process owns the store.
	cfg.Mock = true
	cfg.Gateway.Keys, cfg.Admin = nil, AdminConfig{}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	log := newLogger(cfg, stderr)
	st, err := openStore(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("%w (a running scarproxy holds the data directory; stop it, or connect the MCP client to its /mcp endpoint)", err)
	}
	defer st.Close()
	srv, err := buildServer(ctx, cfg, st, getenv, log)
	if err != nil {
		return err
	}
	defer srv.Close()
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { srv.Run(bg); close(done) }()
	defer func() { stopBG(); <-done }()

	return srv.ServeMCP(ctx, stdioTransport(stdin, stdout), *workspace, *project)
}
