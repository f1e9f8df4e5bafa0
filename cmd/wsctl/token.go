package main

import (
	"context"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/workspace"
)

func (a *app) tokenCmd() *cobra.Command {
	return group("token", "Create, list and revoke the bearer tokens 'wsctl serve' accepts",
		a.tokenCreateCmd(), a.tokenListCmd(), a.tokenRevokeCmd())
}

func (a *app) tokenCreateCmd() *cobra.Command {
	var actor, role, ttl string
	c := &cobra.Command{
		Use:   "create --actor NAME [--role R] [--ttl 30d]",
		Short: "Create a token and print it (the only time it is shown)",
		Long: `create makes a token for an agent and prints it once. Only its SHA-256 is
kept, in the workspace itself, so every server on the same store accepts it.
A request with the token acts as --actor and cannot act as anyone else.
--ttl takes Go durations or days (30d); 0 means it never expires.

The creation is recorded as the operator's who ran it (--as, else
AGENTSPACE_ACTOR, else the login name of the user running wsctl), with a
message naming the token's actor: the token's actor did not act.`,
		Args: cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			if actor == "" {
				return usageErrorf("token create needs --actor NAME: who the token acts as")
			}
			life, err := parseTTL(ttl)
			if err != nil {
				return err
			}
			by := a.operator()
			return a.with(ctx, func(ws *workspace.Workspace) error {
				secret, t, err := agents.NewTokens(ws).Create(ctx, agents.TokenRequest{Actor: actor, Role: role, TTL: life, By: by})
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(struct {
						Secret string `json:"token"`
						agents.Token
					}{secret, t})
				}
				fmt.Fprintln(a.stdout, secret)
				fmt.Fprintf(a.stderr, "token %s for %s, expires %s: shown once, keep it secret\n", t.ID, t.Actor, when(t.ExpiresAt))
				return nil
			})
		}),
	}
	c.Flags().StringVar(&actor, "actor", "", "who the token acts as (required)")
	c.Flags().StringVar(&role, "role", "", "a role recorded with the token")
	c.Flags().StringVar(&ttl, "ttl", "30d", "how long the token is valid (e.g. 12h, 30d; 0: never expires)")
	return c
}

func (a *app) tokenListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List tokens (never their secrets)",
		Args:    cobra.NoArgs,
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			return a.with(ctx, func(ws *workspace.Workspace) error {
				ts, err := agents.NewTokens(ws).List(ctx)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return printList(a, ts)
				}
				tw := a.table()
				fmt.Fprintln(tw, "ID\tACTOR\tROLE\tCREATED\tEXPIRES\tSTATE")
				for _, t := range ts {
					state := "active"
					switch {
					case t.Revoked:
						state = "revoked"
					case !t.ExpiresAt.IsZero() && !now().Before(t.ExpiresAt):
						state = "expired"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Actor, orDash(t.Role), stamp(t.CreatedAt), stamp(t.ExpiresAt), state)
				}
				return tw.Flush()
			})
		}),
	}
}

func (a *app) tokenRevokeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: every server refuses it from then on",
		Args:  cobra.ExactArgs(1),
		RunE: a.action(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			by := a.operator()
			return a.with(ctx, func(ws *workspace.Workspace) error {
				t, err := agents.NewTokens(ws).Revoke(ctx, by, args[0])
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(t)
				}
				fmt.Fprintf(a.stdout, "revoked token %s (%s)\n", t.ID, t.Actor)
				return nil
			})
		}),
	}
}

// operator is who runs a token command, recorded as the token write's
// actor: --as, else AGENTSPACE_ACTOR, else the login name of the user
// running wsctl (USER, then the system's account), else "operator".
func (a *app) operator() string {
	for _, name := range []string{a.actorFlag, a.getenv("AGENTSPACE_ACTOR"), a.getenv("USER")} {
		if name != "" {
			return name
		}
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "operator"
}

// parseTTL reads a Go duration or a number of days ("30d"); "0" is never.
func parseTTL(s string) (time.Duration, error) {
	if s == "0" {
		return -1, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n <= 0 {
			return 0, usageErrorf("--ttl %q: want a duration such as 12h or a number of days such as 30d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, usageErrorf("--ttl %q: want a duration such as 12h or a number of days such as 30d", s)
	}
	return d, nil
}
