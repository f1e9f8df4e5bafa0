package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/workspace"
)

// agentView is one agent as the dashboard shows it: package agents'
// summary, and the rule that gave its state with its thresholds.
type agentView struct {
	agents.Agent
	Rule string
}

// StateRule is one line of the agents' state rule.
type StateRule struct {
	State, Rule string
}

// stateRules states the rule, one line per state.
func stateRules(rule agents.Rule) []StateRule {
	var out []StateRule
	for _, st := range []agents.State{agents.Working, agents.Stale, agents.Idle, agents.Gone} {
		out = append(out, StateRule{State: string(st), Rule: rule.Explain(st)})
	}
	return out
}

// listAgents reads every agent's summary (agents.List) as the dashboard
// shows it.
func (h *Handler) listAgents(ctx context.Context) ([]agentView, error) {
	all, err := agents.List(ctx, h.ws, h.opts.Agents)
	if err != nil {
		return nil, err
	}
	out := make([]agentView, len(all))
	for i, a := range all {
		out[i] = agentView{Agent: a, Rule: h.opts.Agents.Explain(a.State)}
	}
	return out, nil
}

// agentPage is the agent view's data.
type agentPage struct {
	agentView
	Name  string // the actor, format characters shown (visible)
	Rules []StateRule
	// Stop is set when the page offers the stop action; PauseAction when
	// it offers pause or resume (an operator's, decided by the engine).
	Stop, PauseAction bool
	// Inbox is its inbox as the viewer may read it; Pause whether it is
	// paused, by whom and since when.
	Inbox inboxView
	Pause pauseView
	// Messages is the page of the team's messages that await an ack.
	Messages string
	// Feed links: all its events, its conflicts, its denials.
	Feed, ConflictFeed, DenialFeed string
}

// agentsWithState is the agents list's data.
type agentsWithState struct {
	Agents []agentView
	Rules  []StateRule
}

// loadAgents reads every agent, most recently seen first.
func (h *Handler) loadAgents(ctx context.Context, _ *http.Request, _ Identity) (any, error) {
	all, err := h.listAgents(ctx)
	if err != nil {
		return nil, err
	}
	all = slices.Clone(all)
	slices.SortStableFunc(all, func(x, y agentView) int {
		if c := y.LastSeen.Compare(x.LastSeen); c != 0 {
			return c
		}
		return strings.Compare(x.Actor, y.Actor)
	})
	return agentsWithState{Agents: all, Rules: stateRules(h.opts.Agents)}, nil
}

// loadAgent reads one agent's page: /ui/agent?actor=NAME.
func (h *Handler) loadAgent(ctx context.Context, r *http.Request, id Identity) (any, error) {
	actor := r.URL.Query().Get("actor")
	if actor == "" {
		return nil, invalid("actor: missing")
	}
	if len(actor) > 1024 {
		return nil, invalid("actor: longer than 1024 bytes")
	}
	all, err := h.listAgents(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(all, func(a agentView) bool { return a.Actor == actor })
	if i < 0 {
		return nil, &badRequest{status: http.StatusNotFound, msg: "agent " + visible(truncate(actor, 64)) + ": nothing held or written by it"}
	}
	a := all[i]
	if !id.Operator() {
		// Tokens are the operator's to see, as on the notes page (which
		// never lists them) and /v1/agents.
		a.Tokens = nil
	}
	inbox, paused, err := h.loadInbox(ctx, a.Actor)
	if err != nil {
		return nil, err
	}
	var known *bool
	if inbox.Refused == "" {
		known = &paused
	}
	pause, err := h.loadPause(ctx, a.Actor, known)
	if err != nil {
		return nil, err
	}
	return agentPage{
		agentView:    a,
		Name:         visible(a.Actor),
		Rules:        stateRules(h.opts.Agents),
		Stop:         id.Operator(),
		PauseAction:  id.Operator(),
		Inbox:        inbox,
		Pause:        pause,
		Messages:     "/ui/messages",
		Feed:         "/ui/feed?" + encode("actor", a.Actor),
		ConflictFeed: "/ui/feed?" + encode("actor", a.Actor, "type", workspace.EventConflict),
		DenialFeed:   "/ui/feed?" + encode("actor", a.Actor, "type", workspace.EventDenied),
	}, nil
}

// agentLink is the page of an agent.
func agentLink(actor string) string { return "/ui/agent?" + encode("actor", actor) }
