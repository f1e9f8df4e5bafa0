package dashboard

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Agent is one agent as the dashboard shows it: server.Agent, whose
// package the dashboard cannot import (the server imports the dashboard).
type Agent struct {
	Actor string
	// State is working, idle, stale or gone; Rule states the rule that
	// gave it, with its thresholds.
	State, Rule string
	LastSeen    time.Time // its newest event among those scanned (zero: none)
	Claims      []workspace.Task
	Leases      []workspace.Lease
	// Tokens are its tokens, revoked ones included. A token's secret is
	// never here: AgentToken has no field for it.
	Tokens    []AgentToken
	Recent    []workspace.Event // its newest events, newest first
	Conflicts int               // its conflict events among those scanned
	Denials   int               // its denied events among those scanned
}

// AgentToken is what the dashboard shows of one token: never its secret.
type AgentToken struct {
	ID        string
	Role      string
	ExpiresAt time.Time // zero: never
	Revoked   bool
}

// StateRule is one line of the agents' state rule.
type StateRule struct {
	State, Rule string
}

// agentPage is the agent view's data.
type agentPage struct {
	Agent
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

// agentsWithState is the agents list's data when Options.Agents is set.
type agentsWithState struct {
	Agents []Agent
	Rules  []StateRule
}

// loadAgentsWithState reads every agent through Options.Agents, most
// recently seen first.
func (h *Handler) loadAgentsWithState(ctx context.Context) (any, error) {
	all, err := h.opts.Agents(ctx)
	if err != nil {
		return nil, err
	}
	all = slices.Clone(all)
	slices.SortStableFunc(all, func(x, y Agent) int {
		if c := y.LastSeen.Compare(x.LastSeen); c != 0 {
			return c
		}
		return strings.Compare(x.Actor, y.Actor)
	})
	return agentsWithState{Agents: all, Rules: h.opts.AgentRules}, nil
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
	if h.opts.Agents == nil {
		return nil, &badRequest{status: http.StatusNotFound, msg: "agent pages are not available on this dashboard"}
	}
	all, err := h.opts.Agents(ctx)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(all, func(a Agent) bool { return a.Actor == actor })
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
		Agent:        a,
		Name:         visible(a.Actor),
		Rules:        h.opts.AgentRules,
		Stop:         id.Operator() && h.opts.StopAgent != nil,
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
