package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

func (a *app) initCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init",
		Short: "Create the workspace (the current schema) if it does not exist",
		Long: `Create the workspace (the current schema) if it does not exist. A
workspace under .agentspace/ inside a git repository is added to the
repository's .gitignore, so that 'git add -A' never commits it.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.withNew(ctx, func(ws *workspace.Workspace) error {
				head, err := ws.Events().Head(ctx)
				if err != nil {
					return err
				}
				var out io.Writer = a.stdout
				if a.jsonOut {
					out = io.Discard
				}
				if err := ignoreStore(ctx, a.dsn, setup{out: out}); err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(map[string]any{"dsn": workspace.RedactDSN(a.dsn), "head": head})
				}
				_, err = fmt.Fprintf(a.stdout, "workspace ready: %s (event head %d)\n", workspace.RedactDSN(a.dsn), head)
				return err
			})
		}),
	}
}

func (a *app) migrateCmd() *cobra.Command {
	var all bool
	down := &cobra.Command{
		Use:   "down (N | --all)",
		Short: "Undo the last N migrations (or --all of them)",
		Args:  cobra.MaximumNArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			n := 0
			switch {
			case len(args) == 1 && !all:
				v, err := strconv.Atoi(args[0])
				if err != nil || v < 1 {
					return usageErrorf("down %q: want a number of migrations from 1", args[0])
				}
				n = v
			case len(args) == 0 && all:
			default:
				return usageErrorf("say how far down: 'migrate down N' or 'migrate down --all' (which drops every table)")
			}
			return a.migrate(ctx, false, func(m workspace.Migrator) error { return m.Down(ctx, n) })
		}),
	}
	down.Flags().BoolVar(&all, "all", false, "undo every migration: the store is left empty")
	return group("migrate", "Move the store's schema: up, down, goto, version, force",
		&cobra.Command{
			Use:   "up",
			Short: "Migrate to the newest schema this wsctl knows (nothing to do is success)",
			Args:  cobra.NoArgs,
			RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
				return a.migrate(ctx, true, func(m workspace.Migrator) error { return m.Up(ctx) })
			}),
		},
		down,
		&cobra.Command{
			Use:   "goto V",
			Short: "Migrate up or down to version V",
			Args:  cobra.ExactArgs(1),
			RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
				v, err := strconv.ParseUint(args[0], 10, 32)
				if err != nil {
					return usageErrorf("goto %q: want a version number", args[0])
				}
				return a.migrate(ctx, true, func(m workspace.Migrator) error { return m.Goto(ctx, uint(v)) })
			}),
		},
		&cobra.Command{
			Use:   "version",
			Short: "Print the schema version, the newest known, and whether it is dirty",
			Args:  cobra.NoArgs,
			RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
				return a.migrate(ctx, false, nil)
			}),
		},
		&cobra.Command{
			Use:   "force V",
			Short: "Set the version without migrating and clear the dirty flag (after checking the store by hand)",
			Args:  cobra.ExactArgs(1),
			RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
				v, err := strconv.Atoi(args[0])
				if err != nil || v < -1 {
					return usageErrorf("force %q: want a version number (or -1 for none)", args[0])
				}
				return a.migrate(ctx, false, func(m workspace.Migrator) error { return m.Force(ctx, v) })
			}),
		},
	)
}

// migrate opens the store's migrator, runs fn (if any) and prints where the
// schema stands. Only up and goto (create) may create the store.
func (a *app) migrate(ctx context.Context, create bool, fn func(m workspace.Migrator) error) error {
	res, err := a.resolve()
	if err != nil {
		return err
	}
	a.dsn = res.DSN
	m, err := workspace.OpenMigrator(ctx, res.DSN, workspace.Options{MustExist: !create})
	if err != nil {
		return err
	}
	defer m.Close()
	if fn != nil {
		if err := fn(m); err != nil {
			return err
		}
	}
	v, dirty, err := m.Version(ctx)
	if err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(map[string]any{"version": v, "latest": m.Latest(), "dirty": dirty})
	}
	switch {
	case dirty:
		_, err = fmt.Fprintf(a.stdout, "schema version %d (dirty: a migration failed half-way; check the store, then run 'wsctl migrate force %d')\n", v, v)
	case v == m.Latest():
		_, err = fmt.Fprintf(a.stdout, "schema version %d (latest)\n", v)
	default:
		_, err = fmt.Fprintf(a.stdout, "schema version %d (latest is %d)\n", v, m.Latest())
	}
	return err
}
