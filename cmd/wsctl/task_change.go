package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// taskMoveCmd is a status change the state machine allows (see
// workspace.TaskStatus): cancel, block, unblock, reopen. from, when set, is
// the status the move starts from, so that "unblock" a failed task says
// "use reopen" instead of quietly retrying it.
func (a *app) taskMoveCmd(use, short string, to workspace.TaskStatus, from workspace.TaskStatus) *cobra.Command {
	var wf writeFlags
	cmd := &cobra.Command{
		Use:   use + " ID",
		Short: short,
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
				if from != "" {
					cur, err := ws.Tasks().Get(ctx, id)
					if err != nil {
						return err
					}
					if cur.Status != from {
						return usageErrorf("task %s is %s, not %s: %s", id, cur.Status, from, moveAdvice(cur.Status))
					}
				}
				status := to
				t, err := ws.Tasks().Update(ctx, wf.write(actor), id, workspace.TaskChange{Status: &status})
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

// moveAdvice says which command moves a task on from status.
func moveAdvice(status workspace.TaskStatus) string {
	switch status {
	case workspace.TaskBlocked:
		return "'wsctl task unblock' returns it to pending"
	case workspace.TaskFailed:
		return "'wsctl task reopen' returns it to pending"
	case workspace.TaskInProgress:
		return "its assignee releases it with 'wsctl task release'"
	case workspace.TaskDone, workspace.TaskCancelled:
		return "it is final; add a new task instead"
	}
	return "it is pending already"
}

func (a *app) taskEditCmd() *cobra.Command {
	var (
		wf          writeFlags
		title, desc string
		priority    int
		assignee    string
		labels      []string
		noLabels    bool
	)
	cmd := &cobra.Command{
		Use:   "edit ID",
		Short: "Change a task's title, description, priority, assignee or labels",
		Long: `Change the fields named by flags and leave the others as they are.
--label replaces every label the task has (repeat it for several);
--no-labels removes them all. With --if-version N the change happens only
if the task's version is N (exit 3 otherwise).`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			var c workspace.TaskChange
			fl := cmd.Flags()
			if fl.Changed("title") {
				c.Title = &title
			}
			if fl.Changed("description") {
				c.Description = &desc
			}
			if fl.Changed("priority") {
				c.Priority = &priority
			}
			if fl.Changed("assignee") {
				c.Assignee = &assignee
			}
			if fl.Changed("label") && noLabels {
				return usageErrorf("--label and --no-labels: give one")
			}
			if fl.Changed("label") {
				if c.Labels, err = parseLabels("label", labels); err != nil {
					return err
				}
			}
			if noLabels {
				c.Labels = map[string]string{}
			}
			if c.Title == nil && c.Description == nil && c.Priority == nil && c.Assignee == nil && c.Labels == nil {
				return usageErrorf("nothing to change: give --title, --description, --priority, --assignee, --label or --no-labels")
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				id, err := resolveTaskID(ctx, ws, args[0])
				if err != nil {
					return err
				}
				t, err := ws.Tasks().Update(ctx, wf.write(actor), id, c)
				if err != nil {
					return err
				}
				return a.printTaskID(t)
			})
		}),
	}
	wf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&title, "title", "", "the new title")
	f.StringVarP(&desc, "description", "d", "", "the new description")
	f.IntVar(&priority, "priority", 0, "the new priority (higher is claimed first)")
	f.StringVar(&assignee, "assignee", "", "the new suggested assignee ('' for none)")
	f.StringArrayVar(&labels, "label", nil, "label KEY=VALUE, replacing all labels (repeatable)")
	f.BoolVar(&noLabels, "no-labels", false, "remove every label")
	return cmd
}

// parseStatuses reads --status a,b,c.
func parseStatuses(s string) ([]workspace.TaskStatus, error) {
	if s == "" {
		return nil, nil
	}
	var out []workspace.TaskStatus
	for _, part := range strings.Split(s, ",") {
		st := workspace.TaskStatus(strings.TrimSpace(part))
		if !st.Valid() {
			return nil, usageErrorf("--status %q is not a task status: pending, in_progress, blocked, done, failed, cancelled", part)
		}
		out = append(out, st)
	}
	return out, nil
}

// waitingOn returns, for each pending task in tasks with a dependency that
// is not done, those dependencies: what keeps it from being claimed.
// Dependencies outside tasks are read one by one, once each.
func waitingOn(ctx context.Context, ws *workspace.Workspace, tasks []workspace.Task) (map[string][]workspace.Task, error) {
	known := make(map[string]workspace.Task, len(tasks))
	for _, t := range tasks {
		known[t.ID] = t
	}
	out := map[string][]workspace.Task{}
	for _, t := range tasks {
		if t.Status != workspace.TaskPending {
			continue
		}
		for _, dep := range t.DependsOn {
			d, ok := known[dep]
			if !ok {
				var err error
				if d, err = ws.Tasks().Get(ctx, dep); err != nil {
					return nil, fmt.Errorf("dependency %s of %s: %w", dep, t.ID, err)
				}
				known[dep] = d
			}
			if d.Status != workspace.TaskDone {
				out[t.ID] = append(out[t.ID], d)
			}
		}
	}
	return out, nil
}

// readyLister is what a local workspace's Tasks offers for task ls
// --ready: the store finds the ready tasks from an index and stops at the
// limit (see driver.ReadyLister).
type readyLister interface {
	ListReady(ctx context.Context, f workspace.TaskFilter) (workspace.TaskPage, error)
}

// listReady lists the tasks f matches (its Status pending) that claim
// would take, oldest first, at most limit (0: all). Without a
// readyLister (a server), it pages the pending tasks and stops once it
// has limit ready ones.
func listReady(ctx context.Context, ws *workspace.Workspace, f workspace.TaskFilter, limit int) ([]workspace.Task, error) {
	if rl, ok := ws.Tasks().(readyLister); ok {
		return listAll(limit, func(n int, after string) ([]workspace.Task, string, error) {
			f.Limit, f.After = n, after
			page, err := rl.ListReady(ctx, f)
			return page.Tasks, page.Next, err
		})
	}
	// Pages start small, for the first pending tasks are most often
	// ready, and double up to the server's largest.
	out := []workspace.Task{}
	f.Limit = 1000
	if limit > 0 {
		f.Limit = min(max(2*limit, 10), 1000)
	}
	for {
		page, err := ws.Tasks().List(ctx, f)
		if err != nil {
			return nil, err
		}
		waits, err := waitingOn(ctx, ws, page.Tasks)
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tasks {
			if len(waits[t.ID]) == 0 {
				out = append(out, t)
				if len(out) == limit {
					return out, nil
				}
			}
		}
		if page.Next == "" {
			return out, nil
		}
		f.After, f.Limit = page.Next, min(2*f.Limit, 1000)
	}
}

// statusCell is a task's STATUS in task ls: a pending task held back by a
// dependency says by which.
func statusCell(t workspace.Task, waits []workspace.Task) string {
	if len(waits) == 0 {
		return string(t.Status)
	}
	ids := make([]string, len(waits))
	for i, d := range waits {
		ids[i] = d.ID
	}
	return fmt.Sprintf("pending (waits on %s)", strings.Join(ids, ", "))
}
