package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/workspace"
)

func (a *app) agentPauseCmd() *cobra.Command {
	var (
		why     string
		timeout time.Duration
	)
	c := &cobra.Command{
		Use:   "pause ACTOR [--ack-timeout D] [-m WHY]",
		Short: "Pause an agent: its writes are refused until resumed; it must ack the pause",
		Long: `pause refuses every write of ACTOR (exit 11, problem "paused") until
'wsctl agent resume', except acks and the renewals that keep its claims and
leases alive (lock renew, task heartbeat) and releases. The pause reaches
ACTOR as a message of type pause that needs its ack: MCP tool results and
the Claude Code hooks surface it at its next call. With --ack-timeout, pause
waits that long for the ack and says whether it came; not in time, it exits
1 (ACTOR stays paused, and the message is escalated to role:admin). It
needs the admin "tokens" right. Pausing a paused agent answers with its
pause message.`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			by, err := a.actor()
			if err != nil {
				return err
			}
			if timeout < 0 {
				return usageErrorf("--ack-timeout %v is negative", timeout)
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				res, err := ws.Commit(ctx, workspace.Batch{Actor: by, Ops: []workspace.Op{
					workspace.PauseActorOp{Actor: args[0], Message: why, AckTimeout: timeout}}})
				if err != nil {
					return err
				}
				m := res.Results[0].Msg
				if m == nil {
					return fmt.Errorf("pause %s: the store answered without the pause message", args[0])
				}
				after := int64(0)
				if n := len(res.Events); n > 0 {
					after = res.Events[0].Seq - 1
				}
				var waitErr error
				if timeout > 0 {
					*m, waitErr = waitAcked(ctx, ws, *m, after, timeout)
				}
				if a.jsonOut {
					if err := a.printJSON(m); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(a.stdout, "paused %s (message %s)\n", args[0], m.ID)
					for _, k := range m.Acks {
						fmt.Fprintf(a.stdout, "acked by %s at %s%s\n", k.By, stamp(k.At), prefixed(": ", k.Reply))
					}
				}
				if errors.Is(waitErr, context.DeadlineExceeded) {
					return fmt.Errorf("%s did not ack the pause within %v: it stays paused ('wsctl agent resume %s' lifts it)", args[0], timeout, args[0])
				}
				return waitErr
			})
		}),
	}
	c.Flags().StringVarP(&why, "message", "m", "", "why: the pause message's body")
	c.Flags().DurationVar(&timeout, "ack-timeout", 0, "wait this long for the agent's ack (and escalate the pause message if it does not come)")
	return c
}

// waitAcked returns m once no ack is pending on it, or m as it is with
// context.DeadlineExceeded when timeout passes first. It follows m's
// events from after (at or before m's sending), so an ack committed
// before the wait began is seen too.
func waitAcked(ctx context.Context, ws *workspace.Workspace, m workspace.Msg, after int64, timeout time.Duration) (workspace.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1, Query: workspace.EventQuery{
		AfterSeq: after, Types: []string{workspace.EventMessageAcked}, SubjectKind: workspace.SubjectMessage, SubjectID: m.ID}})
	if err != nil {
		return m, err
	}
	defer sub.Close()
	for len(m.Pending) > 0 {
		ev, err := sub.Next(ctx)
		if err != nil {
			return m, err
		}
		if ev.Progress {
			continue
		}
		if m, err = ws.Messages().Get(context.WithoutCancel(ctx), m.ID); err != nil {
			return m, err
		}
	}
	return m, nil
}

func (a *app) agentResumeCmd() *cobra.Command {
	var why string
	c := &cobra.Command{
		Use:   "resume ACTOR [-m WHY]",
		Short: "Resume a paused agent: its writes are taken again",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			by, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				res, err := ws.Commit(ctx, workspace.Batch{Actor: by, Ops: []workspace.Op{
					workspace.ResumeActorOp{Actor: args[0], Message: why}}})
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(res)
				}
				fmt.Fprintf(a.stdout, "resumed %s\n", args[0])
				return nil
			})
		}),
	}
	c.Flags().StringVarP(&why, "message", "m", "", "why, kept on the event")
	return c
}
