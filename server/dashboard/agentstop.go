package dashboard

import (
	"net/http"

	"github.com/agentspace/agentspace/workspace"
)

// stopAgent stops the agent the form names (Options.StopAgent): its
// tokens revoked, its leases ended, its claims returned, in one batch
// recorded as the operator's.
func (h *Handler) stopAgent(r *http.Request, w workspace.Write) (string, error) {
	actor := r.PostForm.Get("actor")
	if actor == "" {
		return "", invalid("actor: missing")
	}
	if h.opts.StopAgent == nil {
		return "", invalid("stopping an agent is not available on this dashboard")
	}
	return h.opts.StopAgent(r.Context(), w.Actor, actor, w.Message)
}
