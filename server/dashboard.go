package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentspace/agentspace/server/dashboard"
	"github.com/agentspace/agentspace/wire"
)

// mountDashboard serves the web dashboard at / and under /ui/, with the
// server's tokens: an operator action there is a write as the token's
// actor and role, decided by the workspace's policy (without one, only an
// admin-role token acts).
func (s *Server) mountDashboard() error {
	d, err := dashboard.New(s.ws, dashboard.Options{
		Verify: func(ctx context.Context, token string) (dashboard.Identity, error) {
			t, err := s.verifyDashboard(ctx, token)
			if errors.Is(err, wire.ErrUnauthorized) {
				return dashboard.Identity{}, dashboard.ErrBadToken
			}
			if err != nil {
				return dashboard.Identity{}, err
			}
			return dashboard.Identity{Actor: t.Actor, Role: t.Role, TokenID: t.ID}, nil
		},
		RequireToken: s.opts.RequireToken,
		Heartbeat:    s.opts.Heartbeat,
		Logger:       s.log,
		Redact:       s.opts.Redact,
		StopAgent: func(ctx context.Context, by, actor, message string) (string, error) {
			r, err := StopAgent(ctx, s.ws, StopRequest{Actor: actor, By: by, Message: message})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("stopped %s: %d tokens revoked, %d leases ended, %d claims returned",
				r.Actor, len(r.Tokens), len(r.Leases), len(r.Tasks)), nil
		},
		Agents: func(ctx context.Context) ([]dashboard.Agent, error) {
			all, err := Agents(ctx, s.ws, s.opts.Agents)
			if err != nil {
				return nil, err
			}
			out := make([]dashboard.Agent, len(all))
			for i, a := range all {
				out[i] = dashboardAgent(a, s.opts.Agents)
			}
			return out, nil
		},
		AgentRules: agentRules(s.opts.Agents),
	})
	if err != nil {
		return err
	}
	s.dash = d
	s.mux.Handle("GET /{$}", d)
	s.mux.Handle("/ui/", d)
	return nil
}

// dashboardAgent is a as the dashboard shows it: its tokens without
// anything secret.
func dashboardAgent(a Agent, rule AgentRule) dashboard.Agent {
	d := dashboard.Agent{Actor: a.Actor, State: string(a.State), Rule: rule.Explain(a.State), LastSeen: a.LastSeen,
		Claims: a.Claims, Leases: a.Leases, Recent: a.Recent, Conflicts: a.Conflicts, Denials: a.Denials}
	for _, t := range a.Tokens {
		d.Tokens = append(d.Tokens, dashboard.AgentToken{ID: t.ID, Role: t.Role, ExpiresAt: t.ExpiresAt, Revoked: t.Revoked})
	}
	return d
}

// agentRules states the state rule, a line per state.
func agentRules(rule AgentRule) []dashboard.StateRule {
	var out []dashboard.StateRule
	for _, st := range []AgentState{AgentWorking, AgentStale, AgentIdle, AgentGone} {
		out = append(out, dashboard.StateRule{State: string(st), Rule: rule.Explain(st)})
	}
	return out
}
