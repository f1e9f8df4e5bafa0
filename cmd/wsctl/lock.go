package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

func (a *app) lockCmd() *cobra.Command {
	return group("lock", "Leases with fencing tokens: acquire, renew, release, ls",
		a.lockAcquireCmd(),
		a.lockRenewCmd(),
		a.lockReleaseCmd(),
		a.lockLsCmd(),
	)
}

func (a *app) lockAcquireCmd() *cobra.Command {
	var (
		ttl     time.Duration
		wait    bool
		timeout time.Duration
		message string
	)
	cmd := &cobra.Command{
		Use:   "acquire RESOURCE --ttl 30s",
		Short: "Take a lease on RESOURCE; prints its fencing token (exit 4 if held by another)",
		Long: `Take a lease on RESOURCE (e.g. artifact:plans/api.md, file:src/api.go,
role:orchestrator) for --ttl. Prints the fencing token: pass it to writes as
--fence and to renew/release as --token. Acquiring a lease you hold extends
it and keeps the token. Held by someone else: exit 4, unless --wait.`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				// The timeout bounds the wait, not opening the store.
				ctx := ctx
				if timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: args[0], Owner: actor, TTL: ttl, Wait: wait, Message: message})
				if err != nil {
					if wait && timeout > 0 && ctx.Err() == context.DeadlineExceeded {
						return &cliError{code: exitLocked, err: fmt.Errorf("lock %q was not free within %s", args[0], timeout)}
					}
					return err
				}
				if a.jsonOut {
					return a.printJSON(l)
				}
				_, err = fmt.Fprintln(a.stdout, l.Token)
				return err
			})
		}),
	}
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", 30*time.Second, "how long the lease lives without a renewal")
	f.BoolVar(&wait, "wait", false, "wait until the lease is free instead of exiting 4")
	f.DurationVar(&timeout, "timeout", 0, "with --wait: give up (exit 4) after this long")
	f.StringVarP(&message, "message", "m", "", "why: kept in the event log")
	return cmd
}

func (a *app) lockRenewCmd() *cobra.Command {
	var (
		ttl   time.Duration
		token int64
	)
	cmd := &cobra.Command{
		Use:   "renew RESOURCE --token T --ttl 30s",
		Short: "Extend your live lease; prints the new expiry (exit 4 if it was lost)",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			if token < 1 {
				return usageErrorf("renew needs --token T (the token acquire printed)")
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				l, err := ws.Locks().Renew(ctx, workspace.Lease{Resource: args[0], Owner: actor, Token: token}, ttl)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(l)
				}
				_, err = fmt.Fprintln(a.stdout, stamp(l.ExpiresAt))
				return err
			})
		}),
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Second, "new lease length from now")
	cmd.Flags().Int64Var(&token, "token", 0, "the lease's fencing token")
	return cmd
}

func (a *app) lockReleaseCmd() *cobra.Command {
	var (
		token   int64
		force   bool
		message string
	)
	cmd := &cobra.Command{
		Use:   "release RESOURCE (--token T | --force)",
		Short: "Free your lease (or, with --force, whoever holds it: recorded)",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			if force == (token > 0) {
				return usageErrorf("release needs --token T (your lease) or --force (anyone's), not both")
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				var err error
				if force {
					err = ws.Locks().ForceRelease(ctx, workspace.Write{Actor: actor, Message: message}, args[0])
				} else {
					err = ws.Locks().Release(ctx, workspace.Lease{Resource: args[0], Owner: actor, Token: token})
					if errors.Is(err, workspace.ErrLockLost) {
						err = releaseLost(ctx, ws, args[0], actor, token, err)
					}
				}
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(workspace.Subject{Kind: workspace.SubjectLock, ID: args[0], Name: args[0]})
				}
				return nil
			})
		}),
	}
	cmd.Flags().Int64Var(&token, "token", 0, "the lease's fencing token")
	cmd.Flags().BoolVar(&force, "force", false, "free the lease whoever holds it")
	cmd.Flags().StringVarP(&message, "message", "m", "", "with --force: why, kept in the event log")
	return cmd
}

func (a *app) lockLsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List live leases, by resource",
		Args:  cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				ls, err := ws.Locks().List(ctx)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return printList(a, ls)
				}
				a.printLeases(ls)
				return nil
			})
		}),
	}
}

func (a *app) printLeases(ls []workspace.Lease) {
	tw := a.table()
	fmt.Fprintln(tw, "RESOURCE\tOWNER\tTOKEN\tEXPIRES")
	for _, l := range ls {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", l.Resource, l.Owner, l.Token, when(l.ExpiresAt))
	}
	_ = tw.Flush() // a failed write to the terminal has nowhere better to go
}

// releaseLost says why a release found no lease of the caller's: nobody
// holds the lock (released already, or expired: exit 5), or someone holds
// it under a newer token (exit 4). "Lease lost" alone sent a user who
// released twice looking for a takeover.
func releaseLost(ctx context.Context, ws *workspace.Workspace, resource, actor string, token int64, lost error) error {
	cur, err := ws.Locks().Get(ctx, resource)
	switch {
	case errors.Is(err, workspace.ErrNotFound):
		return &cliError{code: exitNotFound, err: fmt.Errorf("lock %q is not held: released already, or its lease expired: %w", resource, workspace.ErrNotFound),
			hint: "nothing to release"}
	case err != nil:
		return lost
	case cur.Owner != actor:
		return &cliError{code: exitLocked, err: fmt.Errorf("lock %q is held by %q now (token %d), not by %q with token %d: %w", resource, cur.Owner, cur.Token, actor, token, workspace.ErrNotHolder),
			hint: "your lease expired and was taken; it is not yours to release"}
	}
	return lost
}
