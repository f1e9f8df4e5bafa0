package server

import (
	"context"
	"errors"

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
		Agents:       s.opts.Agents,
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
