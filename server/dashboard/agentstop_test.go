package dashboard_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// TestOperatorStopsAnAgentFromTheAgentsPage: the agents page offers an
// admin a stop button per agent; pressing it for "planner" ends its lease
// and returns its claim in one batch recorded as the admin's. Without the
// admin role there is no button and the action is refused.
func TestOperatorStopsAnAgentFromTheAgentsPage(t *testing.T) {
	e := newEnv(t, server.Options{})
	s := seed(t, e.ws)
	admin := e.token("ops", policy.AdminRole)
	reader := e.token("watcher", "")
	form := url.Values{"actor": {"planner"}}

	_, page := e.get("/ui/agents", "Authorization", "Bearer "+reader)
	assert.NotContains(t, page, "/ui/action/agent/stop")
	code, _ := e.post("/ui/action/agent/stop", form, "Authorization", "Bearer "+reader)
	assert.Equal(t, http.StatusForbidden, code)
	_, page = e.get("/ui/agents", "Authorization", "Bearer "+admin)
	assert.Contains(t, page, "/ui/action/agent/stop")
	code, _ = e.post("/ui/action/agent/stop", url.Values{}, "Authorization", "Bearer "+admin)
	assert.Equal(t, http.StatusBadRequest, code, "a stop names its agent")

	code, body := e.post("/ui/action/agent/stop", form, "Authorization", "Bearer "+admin)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "stopped planner: 0 tokens revoked, 1 leases ended, 1 claims returned")
	ctx := context.Background()
	_, err := e.ws.Locks().Get(ctx, s.lease.Resource)
	assert.ErrorIs(t, err, workspace.ErrNotFound)
	tk, err := e.ws.Tasks().Get(ctx, s.running.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskPending, tk.Status)
	assert.Equal(t, "ops", tk.UpdatedBy, "recorded as the operator's")
}
