package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

// taskOrder is the order statuses are shown in.
var taskOrder = []workspace.TaskStatus{
	workspace.TaskPending, workspace.TaskInProgress, workspace.TaskBlocked,
	workspace.TaskDone, workspace.TaskFailed, workspace.TaskCancelled,
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "The dashboard: counts, active tasks, live locks, recent events",
		Args:  cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				st, err := ws.Status(ctx)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(st)
				}
				tw := a.table()
				fmt.Fprintf(tw, "workspace:\t%s\n", workspace.RedactDSN(a.dsn))
				fmt.Fprintf(tw, "events:\thead %d, floor %d\n", st.Head, st.Floor)
				fmt.Fprintf(tw, "artifacts:\t%d\n", st.Artifacts)
				fmt.Fprintf(tw, "notes:\t%d\n", st.Notes)
				var counts []string
				for _, s := range taskOrder {
					counts = append(counts, fmt.Sprintf("%s %d", s, st.Tasks[s]))
				}
				fmt.Fprintf(tw, "tasks:\t%s\n", strings.Join(counts, ", "))
				if err := tw.Flush(); err != nil {
					return err
				}
				if len(st.ActiveTasks) > 0 {
					fmt.Fprintln(a.stdout, "\nActive tasks:")
					tw = a.table()
					fmt.Fprintln(tw, "ID\tASSIGNEE\tLEASE EXPIRES\tTITLE")
					for _, t := range st.ActiveTasks {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Assignee, when(t.LeaseExpiresAt), t.Title)
					}
					if err := tw.Flush(); err != nil {
						return err
					}
				}
				if len(st.Locks) > 0 {
					fmt.Fprintln(a.stdout, "\nLocks:")
					a.printLeases(st.Locks)
				}
				if len(st.RecentEvents) > 0 {
					fmt.Fprintln(a.stdout, "\nRecent events:")
					for _, ev := range st.RecentEvents {
						fmt.Fprintln(a.stdout, formatEvent(ev))
					}
				}
				return nil
			})
		}),
	}
}
