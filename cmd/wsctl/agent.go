package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/workspace"
)

func (a *app) agentCmd() *cobra.Command {
	return group("agent", "See each agent's state and what it holds; stop one that has gone wrong",
		a.agentListCmd(), a.agentShowCmd(), a.agentStopCmd(), a.agentPauseCmd(), a.agentResumeCmd())
}

// agentRuleFlags are the state rule's thresholds.
func agentRuleFlags(c *cobra.Command, r *agents.Rule) {
	c.Flags().DurationVar(&r.StaleAfter, "stale-after", agents.DefaultStaleAfter, "an agent holding work that wrote nothing for this long is stale")
	c.Flags().DurationVar(&r.GoneAfter, "gone-after", agents.DefaultGoneAfter, "an agent holding nothing that wrote nothing for this long is gone")
}

func (a *app) agentListCmd() *cobra.Command {
	var rule agents.Rule
	c := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List agents with their state (working, idle, stale, gone) and what they hold",
		Long: `ls lists every actor that holds a claim, a lease or a token, or wrote one of
the newest 10,000 events, with its state: working (holds a live claim or
lease and wrote within --stale-after), stale (holds work but wrote nothing
within --stale-after, or holds a lapsed claim), idle (holds nothing, wrote
within --gone-after) or gone (neither, or every token it had is revoked).
See docs/agents.md.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				all, err := agents.List(ctx, ws, rule)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return printList(a, all)
				}
				tw := a.table()
				fmt.Fprintln(tw, "ACTOR\tSTATE\tLAST SEEN\tCLAIMS\tLEASES\tTOKENS\tCONFLICTS\tDENIALS")
				for _, ag := range all {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", ag.Actor, ag.State, seen(ag.LastSeen),
						len(ag.Claims), len(ag.Leases), liveTokens(ag.Tokens), ag.Conflicts, ag.Denials)
				}
				return tw.Flush()
			})
		}),
	}
	agentRuleFlags(c, &rule)
	return c
}

func (a *app) agentShowCmd() *cobra.Command {
	var rule agents.Rule
	c := &cobra.Command{
		Use:   "show ACTOR",
		Short: "Show an agent's state and its rule, claims, leases, tokens, recent events, conflicts and denials",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				ag, err := agents.Get(ctx, ws, rule, args[0])
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(ag)
				}
				w := a.stdout
				fmt.Fprintf(w, "%s: %s, last seen %s, %d conflicts, %d denials\n", ag.Actor, ag.State, seen(ag.LastSeen), ag.Conflicts, ag.Denials)
				fmt.Fprintf(w, "rule   %s: %s\n", ag.State, rule.Explain(ag.State))
				for _, t := range ag.Claims {
					fmt.Fprintf(w, "claim  %s %q, lease until %s\n", t.ID, t.Title, stamp(t.LeaseExpiresAt))
				}
				for _, l := range ag.Leases {
					fmt.Fprintf(w, "lease  %s token %d, until %s\n", l.Resource, l.Token, stamp(l.ExpiresAt))
				}
				for _, t := range ag.Tokens {
					state := "active"
					if t.Revoked {
						state = "revoked"
					}
					fmt.Fprintf(w, "token  %s %s, expires %s\n", t.ID, state, when(t.ExpiresAt))
				}
				for _, e := range ag.Recent {
					fmt.Fprintf(w, "event  %d %s %s %s %s\n", e.Seq, stamp(e.Time), e.Type, orDash(e.Subject.Name), e.Message)
				}
				return nil
			})
		}),
	}
	agentRuleFlags(c, &rule)
	return c
}

func (a *app) agentStopCmd() *cobra.Command {
	var message string
	c := &cobra.Command{
		Use:   "stop ACTOR [-m WHY]",
		Short: "Stop an agent: revoke its tokens, end its leases, return its claims, in one batch",
		Long: `stop ends everything ACTOR holds, in one batch recorded as events: every
token of its is revoked (every server refuses it, and ends the streams and
MCP sessions it opened), every lease it holds is force-released with its
fencing token revoked (a later write fenced with it fails), and every task
it claimed goes back to pending for another agent. It needs the admin
"tokens" right. A process still running as ACTOR without a token (in
process, or through the CLI) can still make unfenced writes: stop the
process too.`,
		Args: cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			by, err := a.actor()
			if err != nil {
				return err
			}
			return a.with(ctx, func(ws *workspace.Workspace) error {
				r, err := agents.Stop(ctx, ws, agents.StopRequest{Actor: args[0], By: by, Message: message})
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(r)
				}
				fmt.Fprintf(a.stdout, "stopped %s: %d tokens revoked, %d leases ended, %d claims returned\n",
					r.Actor, len(r.Tokens), len(r.Leases), len(r.Tasks))
				for _, l := range r.Leases {
					fmt.Fprintf(a.stdout, "lease  %s\n", l)
				}
				for _, t := range r.Tasks {
					fmt.Fprintf(a.stdout, "task   %s\n", t)
				}
				if len(r.Tokens) > 0 {
					fmt.Fprintf(a.stdout, "tokens %s\n", strings.Join(r.Tokens, " "))
				}
				return nil
			})
		}),
	}
	c.Flags().StringVarP(&message, "message", "m", "", "why, kept on each event")
	return c
}

func seen(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return stamp(t)
}

func liveTokens(ts []agents.Token) int {
	n := 0
	for _, t := range ts {
		if !t.Revoked {
			n++
		}
	}
	return n
}
