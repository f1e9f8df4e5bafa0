package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/internal/linediff"
	"github.com/agentspace/agentspace/shadow"
	"github.com/agentspace/agentspace/workspace"
)

func (a *app) changesetCmd() *cobra.Command {
	return group("changeset", "Stage artifact changes in a named set, invisible to reads; validate, promote as one batch, or discard",
		a.changesetBeginCmd(),
		a.changesetStageCmd("create", shadow.OpCreate, "create SET NAME [--file F]", "Stage a new artifact (content from --file, or stdin)", 2),
		a.changesetStageCmd("update", shadow.OpUpdate, "update SET NAME [--file F]", "Stage new content for an artifact", 2),
		a.changesetStageCmd("rename", shadow.OpRename, "rename SET NAME NEW", "Stage a rename", 3),
		a.changesetStageCmd("rm", shadow.OpDelete, "rm SET NAME", "Stage a delete", 2),
		a.changesetLsCmd(),
		a.changesetDiffCmd(),
		a.changesetValidateCmd(),
		a.changesetPromoteCmd(),
		a.changesetDiscardCmd(),
		a.changesetUnpinCmd(),
		a.changesetPinPromotedCmd(),
	)
}

// setAction is the RunE of a changeset command: it resolves the actor
// (when withActor) and opens the workspace's change sets with [shadow]'s
// validators, as shadowAction does for shadows.
func (a *app) setAction(withActor bool, fn func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error) func(*cobra.Command, []string) error {
	return a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
		actor, err := a.actorIf(withActor)
		if err != nil {
			return err
		}
		opts, _, err := a.shadowSettings(shadowFlags{})
		if err != nil {
			return err
		}
		return a.with(ctx, func(ws *workspace.Workspace) error {
			return fn(ctx, args, actor, shadow.NewChangeSets(ws, opts))
		})
	})
}

func (a *app) changesetBeginCmd() *cobra.Command {
	var task string
	cmd := &cobra.Command{
		Use:   "begin SET [--task T]",
		Short: "Start a change set",
		Args:  cobra.ExactArgs(1),
		RunE: a.setAction(true, func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error {
			cs, err := sets.Begin(ctx, args[0], actor, task)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(cs)
			}
			_, err = fmt.Fprintln(a.stdout, cs.Name)
			return err
		}),
	}
	taskFlag(cmd, &task, "names")
	return cmd
}

func (a *app) changesetStageCmd(name, op, use, short string, nargs int) *cobra.Command {
	var file, kind, ctype string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(nargs),
		RunE: a.setAction(true, func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error {
			r := shadow.StageRequest{Op: op, Name: args[1], Kind: kind, ContentType: ctype}
			if op == shadow.OpRename {
				r.NewName = args[2]
			}
			if op == shadow.OpCreate || op == shadow.OpUpdate {
				content, err := a.readInput(file)
				if err != nil {
					return err
				}
				r.Content = content
			}
			cs, err := sets.Stage(ctx, args[0], actor, r)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(cs)
			}
			_, err = fmt.Fprintf(a.stdout, "%s: %d staged\n", cs.Name, len(cs.Staged))
			return err
		}),
	}
	if op == shadow.OpCreate || op == shadow.OpUpdate {
		cmd.Flags().StringVar(&file, "file", "-", "read the content from FILE (- for stdin)")
	}
	if op == shadow.OpCreate {
		cmd.Flags().StringVar(&kind, "kind", "", "the artifact's kind (default output)")
		cmd.Flags().StringVar(&ctype, "content-type", "", "the content's media type")
	}
	return cmd
}

func (a *app) changesetLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the change sets",
		Args:  cobra.NoArgs,
		RunE: a.setAction(false, func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error {
			list, err := sets.List(ctx)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printList(a, list)
			}
			tw := a.table()
			fmt.Fprintln(tw, "SET\tSTATE\tACTOR\tTASK\tCREATED")
			for _, cs := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cs.Name, cs.State, cs.Actor, orDash(cs.Task), stamp(cs.CreatedAt))
			}
			return tw.Flush()
		}),
	}
}

func (a *app) changesetDiffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff SET",
		Short: "Show the set's changes against the versions they started from",
		Args:  cobra.ExactArgs(1),
		RunE: a.setAction(false, func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error {
			d, err := sets.Diff(ctx, args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(d)
			}
			for _, c := range d.Changes {
				from := fmt.Sprintf("%s@%d", c.Name, c.BaseVersion)
				to := c.Name
				switch c.Op {
				case shadow.OpCreate:
					from = "/dev/null"
				case shadow.OpDelete:
					to = "/dev/null"
				case shadow.OpRename:
					to = c.NewName
				}
				fmt.Fprintf(a.stdout, "%s %s\n", c.Op, c.Name)
				if c.Op != shadow.OpDelete || c.Old != nil {
					fmt.Fprint(a.stdout, linediff.Unified(from, to, string(c.Old), string(c.New), 3))
				}
			}
			return nil
		}),
	}
}

func (a *app) changesetValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate SET",
		Short: "Check the set against task areas, roles, others' leases and the [shadow] validate commands",
		Args:  cobra.ExactArgs(1),
		RunE: a.setAction(true, func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error {
			v, err := sets.Validate(ctx, args[0], actor)
			if err != nil {
				return err
			}
			return a.printValidation(v)
		}),
	}
}

func (a *app) changesetPromoteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "promote SET",
		Short: "Commit the whole validated set as one batch, if no artifact it touches moved",
		Args:  cobra.ExactArgs(1),
		RunE: a.setAction(true, func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error {
			res, err := sets.Promote(ctx, args[0], actor)
			var ce *shadow.ConflictError
			if errors.As(err, &ce) {
				return &cliError{code: exitConflict, err: ce, hint: "discard the set, or begin it again from the new heads"}
			}
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			_, err = fmt.Fprintf(a.stdout, "promoted: %d events\n", len(res.Events))
			return err
		}),
	}
}

func (a *app) changesetDiscardCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "discard SET",
		Short: "Drop the set's staged changes",
		Args:  cobra.ExactArgs(1),
		RunE: a.setAction(true, func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error {
			return sets.Discard(ctx, args[0], actor)
		}),
	}
}

func (a *app) changesetUnpinCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unpin SET",
		Short: "Remove the pins of the versions the set promoted, so gc may remove them (needs the right to delete pin notes)",
		Args:  cobra.ExactArgs(1),
		RunE: a.setAction(true, func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error {
			removed, gone, err := sets.Unpin(ctx, args[0], actor)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"removed": removed, "gone": gone})
			}
			_, err = fmt.Fprintf(a.stdout, "unpinned: %d versions; %d deleted, renamed or already removed\n", removed, len(gone))
			return err
		}),
	}
}

func (a *app) changesetPinPromotedCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "pin-promoted",
		Short: "Upgrade step: pin the versions sets promoted before promotions pinned them (run once, before the first gc)",
		Args:  cobra.NoArgs,
		RunE: a.setAction(true, func(ctx context.Context, args []string, actor string, sets *shadow.ChangeSets) error {
			r, err := sets.PinPromoted(ctx, actor)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(r)
			}
			_, err = fmt.Fprintf(a.stdout, "pinned: %d versions (%d were); %d of deleted artifacts or already removed\n", r.Pinned, r.Already, len(r.Gone))
			return err
		}),
	}
}
