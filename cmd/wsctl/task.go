package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/workspace"
)

func (a *app) taskCmd() *cobra.Command {
	return group("task", "The work queue: add, claim, heartbeat, done, fail, release, cancel, block, unblock, reopen, edit, ls, show",
		a.taskAddCmd(),
		a.taskClaimCmd(),
		a.taskHeartbeatCmd(),
		a.taskFinishCmd("done", "Mark a claimed task done with its result", workspace.TaskDone),
		a.taskFinishCmd("fail", "Mark a claimed task failed with its result", workspace.TaskFailed),
		a.taskReleaseCmd(),
		a.taskMoveCmd("cancel", "Cancel a task: it will not be done (final)", workspace.TaskCancelled, ""),
		a.taskMoveCmd("block", "Set a pending or claimed task aside until it is unblocked", workspace.TaskBlocked, ""),
		a.taskMoveCmd("unblock", "Return a blocked task to pending", workspace.TaskPending, workspace.TaskBlocked),
		a.taskMoveCmd("reopen", "Return a failed task to pending, to be claimed again", workspace.TaskPending, workspace.TaskFailed),
		a.taskEditCmd(),
		a.taskLsCmd(),
		a.taskShowCmd(),
	)
}

// printTask prints the task as JSON, or its id for people and scripts.
func (a *app) printTaskID(t workspace.Task) error {
	if a.jsonOut {
		return a.printJSON(t)
	}
	_, err := fmt.Fprintln(a.stdout, t.ID)
	return err
}

func (a *app) taskAddCmd() *cobra.Command {
	var (
		n       workspace.NewTask
		labels  []string
		message string
	)
	cmd := &cobra.Command{
		Use:   "add TITLE",
		Short: "Add a pending task; prints its id",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			if n.Labels, err = parseLabels("label", labels); err != nil {
				return err
			}
			n.Title = args[0]
			return a.with(ctx, func(ws *workspace.Workspace) error {
				var err error
				if n.DependsOn, err = resolveTaskIDs(ctx, ws, n.DependsOn); err != nil {
					return err
				}
				if n.ParentID, err = resolveOptionalTaskID(ctx, ws, n.ParentID); err != nil {
					return err
				}
				t, err := ws.Tasks().Create(ctx, workspace.Write{Actor: actor, Message: message}, n)
				if err != nil {
					return err
				}
				return a.printTaskID(t)
			})
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&n.Description, "description", "d", "", "what is to be done, in detail")
	f.IntVar(&n.Priority, "priority", 0, "higher is claimed first")
	f.StringArrayVar(&n.DependsOn, "depends-on", nil, "id of a task that must be done first (repeatable)")
	f.StringArrayVar(&n.Areas, "area", nil, "a path the task expects to touch, e.g. src/api/ (repeatable; see claim --avoid-overlap)")
	f.StringVar(&n.ParentID, "parent", "", "id of the parent task")
	f.StringVar(&n.Assignee, "assignee", "", "suggested assignee")
	f.StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable)")
	f.StringVarP(&message, "message", "m", "", "why: kept in the event log")
	return cmd
}

func (a *app) taskClaimCmd() *cobra.Command {
	var (
		lease   time.Duration
		wait    bool
		timeout time.Duration
		labels  []string
		parent  string
		avoid   bool
		wt      worktreeFlags
	)
	cmd := &cobra.Command{
		Use:   "claim",
		Short: "Claim the best ready task; prints its id (exit 6 if none is ready)",
		Long: `Claim the best ready task (pending, every dependency done; highest priority,
then oldest) for yourself, under a lease: heartbeat before it lapses or the
task returns to pending. Prints the task id; exit 6 if no task is ready,
unless --wait. With --worktree, also makes the task's git worktree (as
'wsctl work start') and prints "ID<TAB>PATH"; if that fails the claim is
given back.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			lbl, err := parseLabels("label", labels)
			if err != nil {
				return err
			}
			if wt.perAgent && !wt.on {
				return usageErrorf("--per-agent needs --worktree")
			}
			open := a.with
			var m *gitwork.Manager
			if wt.on {
				open = func(ctx context.Context, fn func(*workspace.Workspace) error) error {
					return a.withWork(ctx, wt.repo, func(ws *workspace.Workspace, wm *gitwork.Manager) error {
						m = wm
						return fn(ws)
					})
				}
			}
			return open(ctx, func(ws *workspace.Workspace) error {
				// The timeout bounds the wait, not opening the store.
				ctx := ctx
				if timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, timeout)
					defer cancel()
				}
				parent, err := resolveOptionalTaskID(ctx, ws, parent)
				if err != nil {
					return err
				}
				t, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor, Lease: lease, Labels: lbl, ParentID: parent, Wait: wait, AvoidOverlap: avoid})
				if err != nil {
					if wait && timeout > 0 && ctx.Err() == context.DeadlineExceeded {
						return fmt.Errorf("no task became ready within %s: %w", timeout, workspace.ErrNoTask)
					}
					return err
				}
				if m != nil {
					return a.claimWorktree(context.WithoutCancel(ctx), m, wt, actor, t)
				}
				return a.printTaskID(t)
			})
		}),
	}
	f := cmd.Flags()
	wt.register(cmd)
	f.DurationVar(&lease, "lease", workspace.DefaultClaimLease, "how long the claim lives without a heartbeat")
	f.BoolVar(&wait, "wait", false, "wait until a task is ready instead of exiting 6")
	f.DurationVar(&timeout, "timeout", 0, "with --wait: give up (exit 6) after this long")
	f.StringArrayVar(&labels, "label", nil, "only tasks with label KEY=VALUE (repeatable)")
	f.StringVar(&parent, "parent", "", "only subtasks of this task")
	f.BoolVar(&avoid, "avoid-overlap", false, "prefer a task whose --area paths overlap no task in progress")
	return cmd
}

func (a *app) taskHeartbeatCmd() *cobra.Command {
	var lease time.Duration
	cmd := &cobra.Command{
		Use: "heartbeat ID",
		Long: `Extend your claim on the task ID (the whole id, or a unique prefix of at
least 4 characters, as with commit hashes) and print the new lease expiry.`,
		Short: "Extend your claim on a task; prints the new lease expiry (exit 4 if it lapsed)",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				id, err := resolveTaskID(ctx, ws, args[0])
				if err != nil {
					return err
				}
				t, err := ws.Tasks().Heartbeat(ctx, workspace.Write{Actor: actor}, id, lease)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(t)
				}
				_, err = fmt.Fprintln(a.stdout, stamp(t.LeaseExpiresAt))
				return err
			})
		}),
	}
	cmd.Flags().DurationVar(&lease, "lease", workspace.DefaultClaimLease, "new lease length from now")
	return cmd
}

func (a *app) taskFinishCmd(use, short string, status workspace.TaskStatus) *cobra.Command {
	var (
		wf        writeFlags
		summary   string
		artifacts []string
	)
	cmd := &cobra.Command{
		Use:   use + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			res := workspace.TaskResult{Summary: summary, Artifacts: artifacts}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				id, err := resolveTaskID(ctx, ws, args[0])
				if err != nil {
					return err
				}
				var t workspace.Task
				if status == workspace.TaskDone {
					t, err = ws.Tasks().Complete(ctx, wf.write(actor), id, res)
				} else {
					t, err = ws.Tasks().Fail(ctx, wf.write(actor), id, res)
				}
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(t)
				}
				return nil
			})
		}),
	}
	wf.add(cmd)
	cmd.Flags().StringVar(&summary, "summary", "", "what came of it")
	cmd.Flags().StringArrayVar(&artifacts, "artifact", nil, "name of an artifact it produced (repeatable)")
	return cmd
}

func (a *app) taskReleaseCmd() *cobra.Command {
	var wf writeFlags
	cmd := &cobra.Command{
		Use:   "release ID",
		Short: "Give a claimed task back: it returns to pending",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				id, err := resolveTaskID(ctx, ws, args[0])
				if err != nil {
					return err
				}
				t, err := ws.Tasks().Release(ctx, wf.write(actor), id)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(t)
				}
				return nil
			})
		}),
	}
	wf.add(cmd)
	return cmd
}

func (a *app) taskLsCmd() *cobra.Command {
	var (
		f      workspace.TaskFilter
		status string
		ready  bool
		labels []string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List tasks, oldest first",
		Long: `List tasks, oldest first. A pending task that waits on a dependency not
yet done shows as "pending (waits on ID, ...)": claim passes it over until
those are done. --ready lists only the tasks claim would take.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			lbl, err := parseLabels("label", labels)
			if err != nil {
				return err
			}
			statuses, err := parseStatuses(status)
			if err != nil {
				return err
			}
			if ready {
				if len(statuses) > 0 && !slices.Equal(statuses, []workspace.TaskStatus{workspace.TaskPending}) {
					return usageErrorf("--ready lists pending tasks only: leave out --status")
				}
				statuses = []workspace.TaskStatus{workspace.TaskPending}
			}
			f.Labels = lbl
			if len(statuses) == 1 {
				f.Status = statuses[0]
			}
			if limit < 0 {
				return usageErrorf("--limit %d is negative", limit)
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				var err error
				if f.ParentID, err = resolveOptionalTaskID(ctx, ws, f.ParentID); err != nil {
					return err
				}
				var (
					all   []workspace.Task
					waits map[string][]workspace.Task // none for a ready task
				)
				if ready {
					if all, err = listReady(ctx, ws, f, limit); err != nil {
						return err
					}
				} else {
					keep := func(t workspace.Task) bool { return len(statuses) < 2 || slices.Contains(statuses, t.Status) }
					lim := limit
					if len(statuses) > 1 {
						lim = 0 // filtered here: read them all, then cut
					}
					all, err = listAll(lim, func(n int, after string) ([]workspace.Task, string, error) {
						f.Limit, f.After = n, after
						page, err := ws.Tasks().List(ctx, f)
						return page.Tasks, page.Next, err
					})
					if err != nil {
						return err
					}
					all = slices.DeleteFunc(all, func(t workspace.Task) bool { return !keep(t) })
					if waits, err = waitingOn(ctx, ws, all); err != nil {
						return err
					}
				}
				if limit > 0 && len(all) > limit {
					all = all[:limit]
				}
				if a.jsonOut {
					return printList(a, all)
				}
				tw := a.table()
				fmt.Fprintln(tw, "ID\tSTATUS\tPRIORITY\tASSIGNEE\tTITLE")
				for _, t := range all {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", t.ID, statusCell(t, waits[t.ID]), t.Priority, orDash(t.Assignee), t.Title)
				}
				return tw.Flush()
			})
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&status, "status", "", "only these statuses, comma-separated: pending, in_progress, blocked, done, failed, cancelled")
	fl.BoolVar(&ready, "ready", false, "only tasks claim would take: pending, every dependency done")
	fl.StringVar(&f.Assignee, "assignee", "", "only tasks assigned to this actor")
	fl.StringVar(&f.ParentID, "parent", "", "only subtasks of this task")
	fl.StringArrayVar(&labels, "label", nil, "only tasks with label KEY=VALUE (repeatable)")
	fl.IntVar(&limit, "limit", 0, "at most N (default: all)")
	return cmd
}

func (a *app) taskShowCmd() *cobra.Command {
	return &cobra.Command{
		Use: "show ID",
		// get, as artifact get and note get.
		Aliases: []string{"get"},
		Short:   "Show one task in full",
		Args:    cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				id, err := resolveTaskID(ctx, ws, args[0])
				if err != nil {
					return err
				}
				t, err := ws.Tasks().Get(ctx, id)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(t)
				}
				tw := a.table()
				fmt.Fprintf(tw, "id:\t%s\n", t.ID)
				fmt.Fprintf(tw, "title:\t%s\n", t.Title)
				fmt.Fprintf(tw, "status:\t%s\n", t.Status)
				fmt.Fprintf(tw, "assignee:\t%s\n", orDash(t.Assignee))
				if t.Status == workspace.TaskInProgress {
					fmt.Fprintf(tw, "lease expires:\t%s\n", when(t.LeaseExpiresAt))
				}
				fmt.Fprintf(tw, "priority:\t%d\n", t.Priority)
				fmt.Fprintf(tw, "attempts:\t%d\n", t.Attempts)
				fmt.Fprintf(tw, "parent:\t%s\n", orDash(t.ParentID))
				fmt.Fprintf(tw, "depends on:\t%s\n", orDash(strings.Join(t.DependsOn, ", ")))
				waits, err := waitingOn(ctx, ws, []workspace.Task{t})
				if err != nil {
					return err
				}
				for _, d := range waits[t.ID] {
					fmt.Fprintf(tw, "waits on:\t%s (%s: %s)\n", d.ID, d.Status, d.Title)
				}
				fmt.Fprintf(tw, "areas:\t%s\n", orDash(strings.Join(t.Areas, ", ")))
				fmt.Fprintf(tw, "labels:\t%s\n", formatLabels(t.Labels))
				fmt.Fprintf(tw, "version:\t%d\n", t.Version)
				fmt.Fprintf(tw, "created:\t%s by %s\n", when(t.CreatedAt), t.CreatedBy)
				fmt.Fprintf(tw, "updated:\t%s by %s\n", when(t.UpdatedAt), t.UpdatedBy)
				if t.Result.Summary != "" || len(t.Result.Artifacts) > 0 {
					fmt.Fprintf(tw, "result:\t%s\n", orDash(t.Result.Summary))
					fmt.Fprintf(tw, "result artifacts:\t%s\n", orDash(strings.Join(t.Result.Artifacts, ", ")))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if t.Description != "" {
					_, err = fmt.Fprintf(a.stdout, "\n%s\n", strings.TrimRight(t.Description, "\n"))
				}
				return err
			})
		}),
	}
}
