package dashboard

import (
	"fmt"
	"net/http"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/workspace"
)

// stopAgent stops the agent the form names (agents.Stop): its tokens
// revoked, its leases ended, its claims returned, in one batch recorded
// as the operator's.
func (h *Handler) stopAgent(r *http.Request, w workspace.Write) (string, error) {
	actor := r.PostForm.Get("actor")
	if actor == "" {
		return "", invalid("actor: missing")
	}
	res, err := agents.Stop(r.Context(), h.ws, agents.StopRequest{Actor: actor, By: w.Actor, Message: w.Message})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("stopped %s: %d tokens revoked, %d leases ended, %d claims returned",
		res.Actor, len(res.Tokens), len(res.Leases), len(res.Tasks)), nil
}
