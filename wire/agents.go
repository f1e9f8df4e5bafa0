package wire

import "github.com/agentspace/agentspace/workspace"

// StopAgentBody is the body of POST /v1/agents/{actor}/stop.
type StopAgentBody struct {
	Actor   string `json:"actor,omitempty" doc:"Who stops the agent (the operator); behind a token, the token's actor."`
	Message string `json:"message,omitempty" doc:"Why, kept on each event the stop records."`
}

// AgentStop is what stopping an agent did, in the one batch that did it.
type AgentStop struct {
	Actor  string            `json:"actor"`
	Tokens []string          `json:"tokens"` // ids of the tokens revoked
	Leases []string          `json:"leases"` // resources whose leases were force-released
	Tasks  []string          `json:"tasks"`  // ids of the tasks returned to pending
	Events []workspace.Event `json:"events"`
}

// AgentStopOf reads what a stop did from the events of its batch.
func AgentStopOf(actor string, tokens []string, evs []workspace.Event) AgentStop {
	out := AgentStop{Actor: actor, Tokens: tokens, Leases: []string{}, Tasks: []string{}, Events: evs}
	if out.Tokens == nil {
		out.Tokens = []string{}
	}
	for _, e := range evs {
		switch e.Type {
		case workspace.EventLockForced:
			out.Leases = append(out.Leases, e.Subject.ID)
		case workspace.EventTaskReleased:
			out.Tasks = append(out.Tasks, e.Subject.ID)
		}
	}
	return out
}
