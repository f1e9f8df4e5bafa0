package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// app is one invocation of wsctl: its streams, environment and global flags.
type app struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string

	dsnFlag    string
	configFlag string
	envFlag    string
	actorFlag  string
	jsonOut    bool

	// dsn is the resolved DSN once a command asked for it, for redacting errors.
	dsn string
	// workDir, when set, is where the workspace is looked for instead of
	// the working directory: setup's --dir.
	workDir string
}

// run executes wsctl with args and returns the process's exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := a.rootFor(args)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code, msg := a.report(err)
	if a.jsonOut {
		a.printProblem(err, code, msg)
		return code
	}
	fmt.Fprintln(stderr, "wsctl: "+msg)
	return code
}

// rootCmd is wsctl's whole command tree.
func (a *app) rootCmd() *cobra.Command {
	return a.root(a.commands()...)
}

// rootFor is the command tree args need: when they name one of wsctl's
// top-level commands (after only the root's own flags), the root holds
// that command alone, so a call builds one command's subtree instead of
// all of them (about 4% of a short call's CPU). Invariant: whatever args
// name a top-level command run the same command, with the same flags,
// help, usage errors and suggestions, as in the whole tree, since none of
// them reads its siblings; anything else (no command, help, completion,
// --version, a mistyped or unknown name, another flag first) gets the
// whole tree.
func (a *app) rootFor(args []string) *cobra.Command {
	if mk := a.commandNamed(args); mk != nil {
		return a.root(mk())
	}
	return a.rootCmd()
}

// rootValueFlags are the root's flags that take a value, which may stand
// before the command's name; --json is its only other flag.
var rootValueFlags = []string{"--dsn", "--config", "--env", "--as"}

// commandNamed returns the constructor of the top-level command args name
// after the root's own flags, or nil when they name none that way.
func (a *app) commandNamed(args []string) func() *cobra.Command {
	for len(args) > 0 {
		arg := args[0]
		if !strings.HasPrefix(arg, "-") {
			return a.topLevel()[arg]
		}
		name, _, hasValue := strings.Cut(arg, "=")
		switch {
		case name == "--json":
			args = args[1:]
		case slices.Contains(rootValueFlags, name) && hasValue:
			args = args[1:]
		case slices.Contains(rootValueFlags, name) && len(args) > 1:
			args = args[2:]
		default:
			return nil
		}
	}
	return nil
}

// topLevel maps each top-level command's name to its constructor, in the
// order of the whole tree's commands (TestTopLevelIsTheWholeTree checks
// the names against the commands the constructors build).
func (a *app) topLevel() map[string]func() *cobra.Command {
	return map[string]func() *cobra.Command{
		"config": a.configCmd, "init": a.initCmd, "migrate": a.migrateCmd,
		"artifact": a.artifactCmd, "task": a.taskCmd, "note": a.noteCmd,
		"lock": a.lockCmd, "events": a.eventsCmd, "status": a.statusCmd,
		"export": a.exportCmd, "import": a.importCmd, "verify": a.verifyCmd,
		"gc": a.gcCmd, "backup": a.backupCmd, "restore": a.restoreCmd,
		"bench": a.benchCmd, "serve": a.serveCmd, "dashboard": a.dashboardCmd,
		"token": a.tokenCmd, "agent": a.agentCmd,
		"send": a.sendCmd, "inbox": a.inboxCmd, "ack": a.ackCmd,
		"work": a.workCmd, "merge": a.mergeCmd,
		"policy": a.policyCmd, "role": a.roleCmd, "check": a.checkCmd, "hook": a.hookCmd,
		"mcp": a.mcpCmd, "prime": a.primeCmd, "setup": a.setupCmd,
		"shadow": a.shadowCmd, "changeset": a.changesetCmd,
		"version": a.versionCmd,
	}
}

// commands builds every top-level command, in the order help lists them.
func (a *app) commands() []*cobra.Command {
	return []*cobra.Command{
		a.configCmd(),
		a.initCmd(),
		a.migrateCmd(),
		a.artifactCmd(),
		a.taskCmd(),
		a.noteCmd(),
		a.lockCmd(),
		a.eventsCmd(),
		a.statusCmd(),
		a.exportCmd(),
		a.importCmd(),
		a.verifyCmd(),
		a.gcCmd(),
		a.backupCmd(),
		a.restoreCmd(),
		a.benchCmd(),
		a.serveCmd(),
		a.dashboardCmd(),
		a.tokenCmd(),
		a.agentCmd(),
		a.sendCmd(), a.inboxCmd(), a.ackCmd(),
		a.workCmd(),
		a.mergeCmd(),
		a.policyCmd(), a.roleCmd(), a.checkCmd(), a.hookCmd(),
		a.mcpCmd(),
		a.primeCmd(),
		a.setupCmd(),
		a.shadowCmd(), a.changesetCmd(),
		a.versionCmd(),
	}
}

// root is wsctl's root command holding cmds.
func (a *app) root(cmds ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "wsctl",
		Short: "Read and write an agentspace workspace",
		Long: `wsctl reads and writes an agentspace workspace: artifacts (versioned content),
tasks (a claimable queue), notes (shared context), locks (leases with fencing
tokens) and the event log.

The workspace is chosen by --dsn, else AGENTSPACE_DSN, else agentspace.toml
(in the working directory or --config; environment from --env or
AGENTSPACE_ENV), else ` + workspace.DefaultDSN + `. Writes need an actor:
--as or AGENTSPACE_ACTOR.

Only init, import, migrate up/goto and setup create a workspace; every
other command needs one that exists.

Exit codes: 0 ok, 1 error, 2 usage, 3 conflict, 4 locked, 5 not found,
6 no task ready, 7 forbidden by the policy, 8 no workspace there, 9 verify found the log or a content broken,
10 unauthorized (the server wants a token: AGENTSPACE_TOKEN), 11 paused (ack the pause message), 75 unavailable (try again).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.dsnFlag, "dsn", "", "workspace DSN, e.g. sqlite:ws.db, json:./ws, postgres://host/db (env AGENTSPACE_DSN)")
	pf.StringVar(&a.configFlag, "config", "", "config file (default: agentspace.toml in the working directory or its nearest parent that has one)")
	pf.StringVar(&a.envFlag, "env", "", "environment of the config file to use (env AGENTSPACE_ENV)")
	pf.StringVar(&a.actorFlag, "as", "", "who is acting: the agent's id, required for writes (env AGENTSPACE_ACTOR)")
	pf.BoolVar(&a.jsonOut, "json", false, "machine-readable output: one JSON document, or NDJSON for streams")
	root.Version = readBuildInfo().String()
	root.SetVersionTemplate("{{.Version}}")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErrorf("%v; usage: %s; see '%s --help'", err, c.UseLine(), c.CommandPath())
	})

	root.AddCommand(cmds...)
	explainArgs(root)
	a.addCompletions(root)
	return root
}

// group returns a command that only holds subcommands: alone it prints its
// help; with an unknown subcommand it is a usage error.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(cmd, args[0])
			}
			return cmd.Help()
		},
	}
	c.AddCommand(subs...)
	return c
}

// unknownCommand is the usage error of a mistyped subcommand of cmd, with
// the commands it is close to.
func unknownCommand(cmd *cobra.Command, arg string) error {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(arg); len(s) > 0 {
		return usageErrorf("unknown command %q for %q; did you mean %s? see '%s --help'", arg, cmd.CommandPath(), strings.Join(quoteAll(s), " or "), cmd.CommandPath())
	}
	return usageErrorf("unknown command %q for %q; see '%s --help'", arg, cmd.CommandPath(), cmd.CommandPath())
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = "'" + x + "'"
	}
	return out
}

// action adapts a command body to cobra, classifying its error so that run
// can tell it from cobra's own (usage) errors.
func (a *app) action(fn func(ctx context.Context, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if who := a.declaredActor(); who != "" {
			// Reads leave out what this actor may not read (see docs/policy.md).
			ctx = workspace.AsActor(ctx, who)
		}
		if err := fn(ctx, cmd, args); err != nil {
			return classify(err)
		}
		return nil
	}
}

// open resolves the DSN and opens the workspace: one that exists, unless
// create. Diagnostics from the library (retries of a live tail) go to
// stderr at warning level.
func (a *app) open(ctx context.Context, create bool) (*workspace.Workspace, error) {
	res, err := a.resolve()
	if err != nil {
		return nil, err
	}
	a.dsn = a.withToken(res.DSN)
	logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return workspace.Open(ctx, a.dsn, workspace.Options{Logger: logger, MustExist: !create})
}

// withToken adds AGENTSPACE_TOKEN to a server's DSN as its ws_token, unless
// the DSN carries one already: the library reads no environment.
func (a *app) withToken(dsn string) string {
	tok := a.getenv("AGENTSPACE_TOKEN")
	if tok == "" || !isServerDSN(dsn) || strings.Contains(dsn, "ws_token=") {
		return dsn
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + "ws_token=" + url.QueryEscape(tok)
}

// isServerDSN reports whether dsn names a workspace served by wsctl serve.
func isServerDSN(dsn string) bool {
	scheme, _, _ := strings.Cut(dsn, ":")
	switch strings.ToLower(scheme) {
	case "http", "https", "http+unix":
		return true
	}
	return false
}

// with opens the existing workspace, runs fn, and closes it. A DSN that
// names no workspace is an error (exit 8): a mistyped path must not leave
// an empty store behind, nor send writes where no one else looks.
func (a *app) with(ctx context.Context, fn func(ws *workspace.Workspace) error) error {
	return a.withStore(ctx, false, fn)
}

// withNew is with for the commands that create the workspace if need be:
// init and import.
func (a *app) withNew(ctx context.Context, fn func(ws *workspace.Workspace) error) error {
	return a.withStore(ctx, true, fn)
}

func (a *app) withStore(ctx context.Context, create bool, fn func(ws *workspace.Workspace) error) error {
	ws, err := a.open(ctx, create)
	if err != nil {
		return err
	}
	err = fn(ws)
	if cerr := ws.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

// declaredActor is the actor --as or AGENTSPACE_ACTOR names, if any.
func (a *app) declaredActor() string {
	if a.actorFlag != "" {
		return a.actorFlag
	}
	return a.getenv("AGENTSPACE_ACTOR")
}

// actor returns who is acting, or a usage error saying how to say it.
func (a *app) actor() (string, error) {
	if a.actorFlag != "" {
		return a.actorFlag, nil
	}
	if v := a.getenv("AGENTSPACE_ACTOR"); v != "" {
		return v, nil
	}
	// Behind a token the server acts as the token's actor: no name needed.
	if res, err := a.resolve(); err == nil && isServerDSN(res.DSN) && strings.Contains(a.withToken(res.DSN), "ws_token=") {
		return "", nil
	}
	return "", usageErrorf("this command writes: say who you are with --as NAME or AGENTSPACE_ACTOR=NAME")
}

// printJSON writes v as one indented JSON document. Records print in the
// shape their workspace types define (docs/schema/workspace.schema.json).
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printList writes records as one JSON array, [] when there are none.
func printList[T any](a *app, records []T) error {
	if records == nil {
		records = []T{}
	}
	return a.printJSON(records)
}

// table returns a tabwriter on stdout; the caller flushes it.
func (a *app) table() *tabwriter.Writer {
	return tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
}

// stamp formats a time for people: UTC, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// orDash shows an empty string as "-" in tables.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseLabels turns repeated k=v flags into a map.
func parseLabels(flag string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--%s %q: want KEY=VALUE", flag, p)
		}
		m[k] = v
	}
	return m, nil
}

// formatLabels shows labels as k=v,k=v in key order.
func formatLabels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}
