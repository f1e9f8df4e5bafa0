package mcp

import (
	"context"
	"errors"
	"time"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// agentsIn is the agents tool's input. The agent it acts on is "agent",
// not "actor": no tool takes an actor, so a session acts as its caller
// only (internal/faces checks it).
type agentsIn struct {
	Action     string `json:"action,omitempty"`
	Agent      string `json:"agent,omitempty"`
	Message    string `json:"message,omitempty" jsonschema:"why"`
	AckSeconds int    `json:"ack_seconds,omitempty" jsonschema:"pause: ack due in"`
}

// agentLine is one agent of the list: its state and what it holds, the
// claims by task id and the leases by resource. action=get gives the
// whole summary (agents.Agent): a list of whole summaries, each with up
// to 20 events, would cost an agent's context tens of KB.
type agentLine struct {
	Actor     string       `json:"actor"`
	State     agents.State `json:"state"`
	LastSeen  time.Time    `json:"last_seen,omitzero"`
	Claims    []string     `json:"claims,omitempty"`
	Leases    []string     `json:"leases,omitempty"`
	Conflicts int          `json:"conflicts,omitempty"`
	Denials   int          `json:"denials,omitempty"`
}

func (s *Server) addAgentsTool() {
	tool(s, "agents", "Agents and their state",
		"Agents' state (working, stale, idle, gone) and what they hold: list (default) or get one; stop, pause or resume one (admin only).",
		map[string][]any{"action": {"list", "get", "stop", "pause", "resume"}}, s.agents)
}

// agents runs one action of the agents tool. Every one is a call of
// package agents or a batch op of the workspace, as the HTTP API, the
// dashboard and wsctl make it, acting as the caller: who may stop, pause
// or resume an agent is the engine's rule (the admin.tokens right; with
// no policy, a token needs the admin role), the same on every face.
func (s *Server) agents(ctx context.Context, actor string, in agentsIn) (any, error) {
	if in.Action == "" {
		in.Action = "list"
	}
	if len(in.Agent) > workspace.MaxActorLen {
		return nil, badArg("agent", "longer than %d bytes", workspace.MaxActorLen)
	}
	switch {
	case in.Action == "list" && in.Agent != "":
		return nil, badArg("agent", "action=list takes none: action=get gives one agent")
	case in.Action != "list" && in.Agent == "":
		return nil, badArg("agent", "action=%s needs the agent", in.Action)
	case in.Message != "" && (in.Action == "list" || in.Action == "get"):
		return nil, badArg("message", "only stop, pause and resume take one")
	case in.AckSeconds != 0 && in.Action != "pause":
		return nil, badArg("ack_seconds", "only pause takes it")
	}
	ack, err := seconds("ack_seconds", in.AckSeconds, 0, workspace.MaxTTL)
	if err != nil {
		return nil, err
	}
	var out any
	switch in.Action {
	case "list":
		out, err = s.listAgents(ctx)
	case "get":
		var a agents.Agent
		if a, err = agents.Get(ctx, s.ws, s.opts.Agents, in.Agent); err == nil {
			out, err = withFields(a, map[string]any{"rule": s.opts.Agents.Explain(a.State)})
		}
	case "stop":
		out, err = agents.Stop(ctx, s.ws, agents.StopRequest{Actor: in.Agent, By: actor, Message: in.Message})
	case "pause":
		out, err = s.pauseOp(ctx, actor, in.Agent, workspace.PauseActorOp{Actor: in.Agent, Message: in.Message, AckTimeout: ack})
	case "resume":
		out, err = s.pauseOp(ctx, actor, in.Agent, workspace.ResumeActorOp{Actor: in.Agent, Message: in.Message})
	default:
		return nil, badArg("action", "%q is not one of list, get, stop, pause, resume", in.Action)
	}
	if err != nil {
		return nil, agentField(err, actor)
	}
	return out, nil
}

// listAgents is agents.List, each agent as an agentLine.
func (s *Server) listAgents(ctx context.Context) (any, error) {
	all, err := agents.List(ctx, s.ws, s.opts.Agents)
	if err != nil {
		return nil, err
	}
	lines := make([]agentLine, 0, len(all))
	for _, a := range all {
		l := agentLine{Actor: a.Actor, State: a.State, LastSeen: a.LastSeen, Conflicts: a.Conflicts, Denials: a.Denials}
		for _, t := range a.Claims {
			l.Claims = append(l.Claims, t.ID)
		}
		for _, ls := range a.Leases {
			l.Leases = append(l.Leases, ls.Resource)
		}
		lines = append(lines, l)
	}
	return struct {
		Agents []agentLine `json:"agents"`
	}{lines}, nil
}

// pauseOp commits op (a pause or a resume of agent) as actor and answers
// what the HTTP API answers: the pause message (none for a resume) and
// the batch's events.
func (s *Server) pauseOp(ctx context.Context, actor, agent string, op workspace.Op) (wire.AgentPause, error) {
	res, err := s.ws.Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{op}})
	if err != nil {
		return wire.AgentPause{}, err
	}
	out := wire.AgentPause{Actor: agent, Events: res.Events}
	if out.Events == nil {
		out.Events = []workspace.Event{}
	}
	if len(res.Results) > 0 {
		out.Message = res.Results[0].Msg
	}
	return out, nil
}

// agentField names the tool's argument in the engine's refusal of the
// agent acted on: the engine calls it "actor", whose hint (how to give
// this server an actor) is about the caller. A caller without an actor
// keeps that refusal: it is about the caller then.
func agentField(err error, caller string) error {
	var inv *workspace.InvalidError
	if caller == "" || !errors.As(err, &inv) || inv.Field != "actor" {
		return err
	}
	named := *inv
	named.Field = "agent"
	return &named
}
