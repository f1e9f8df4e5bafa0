package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/wire"
)

// AgentPath names an agent.
type AgentPath struct {
	Actor string `path:"actor" doc:"The agent's actor name, URL-escaped."`
}

// agentRoutes serves the agents' summaries and the stop.
func (s *Server) agentRoutes() {
	type agentsOut struct {
		Body struct {
			Agents []agents.Agent `json:"agents"`
		}
	}
	huma.Register(s.api, s.op("listAgents", http.MethodGet, "/v1/agents", "Every agent's state, claims, leases, tokens, recent events and conflict count", "agents", 0),
		func(ctx context.Context, _ *struct{}) (*agentsOut, error) {
			all, err := agents.List(ctx, s.ws, s.opts.Agents)
			out := &agentsOut{}
			out.Body.Agents = all
			return answer(s, ctx, out, err)
		})
	huma.Register(s.api, s.op("getAgent", http.MethodGet, "/v1/agents/{actor}", "One agent's state, claims, leases, tokens, recent events and conflict count", "agents", 0),
		func(ctx context.Context, in *AgentPath) (*struct{ Body agents.Agent }, error) {
			a, err := agents.Get(ctx, s.ws, s.opts.Agents, in.Actor)
			return answer(s, ctx, &struct{ Body agents.Agent }{a}, err)
		})
	stop := s.op("stopAgent", http.MethodPost, "/v1/agents/{actor}/stop", "Stop an agent: revoke its tokens, end its leases, return its claims, in one batch", "agents", 0)
	stop.Description = "Needs the admin.tokens right. Afterwards the agent's tokens are refused and its fenced writes fail with stale_fence."
	huma.Register(s.api, stop, func(ctx context.Context, in *struct {
		AgentPath
		Body wire.StopAgentBody
	}) (*struct{ Body wire.AgentStop }, error) {
		by, err := actorFor(ctx, in.Body.Actor)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		r, err := agents.Stop(ctx, s.ws, agents.StopRequest{Actor: in.Actor, By: by, Message: in.Body.Message})
		return answer(s, ctx, &struct{ Body wire.AgentStop }{r}, err)
	})
}

// touched renews actor's claims and leases when Options.TouchEvery asks
// for it. A failure is logged, never the request's.
func (s *Server) touched(ctx context.Context, actor string) {
	if s.touch == nil || actor == "" {
		return
	}
	if _, err := s.touch.Touch(ctx, actor); err != nil && ctx.Err() == nil {
		s.log.Warn("agentspace server: renewing on use failed", "actor", actor, "err", s.opts.Redact(err))
	}
}
