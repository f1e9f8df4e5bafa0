package remote

import (
	"context"
	"net/http"

	"github.com/agentspace/agentspace/wire"
)

// StopAgent stops actor on the server (POST /v1/agents/{actor}/stop): the
// server revokes its tokens, ends its leases and returns its claims in one
// batch, with the caller's admin.tokens right.
func (c *Client) StopAgent(ctx context.Context, by, actor, message string) (wire.AgentStop, error) {
	var out wire.AgentStop
	seg, err := segment("actor", actor)
	if err != nil {
		return out, err
	}
	err = c.call(ctx, http.MethodPost, "/v1/agents/"+seg+"/stop", nil,
		wire.StopAgentBody{Actor: by, Message: message}, &out)
	return out, err
}
