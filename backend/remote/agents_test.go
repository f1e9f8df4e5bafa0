package remote_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// TestStopAgentThroughTheServer: agents.Stop over a served workspace
// (as wsctl agent stop --dsn http://… calls it) has the server do the
// stop, tokens included: the agent's token is refused afterwards, its
// lease is ended with its fence revoked and its claim is returned.
func TestStopAgentThroughTheServer(t *testing.T) {
	ctx := context.Background()
	store := sqliteDSN(t)
	local, err := workspace.Open(ctx, store)
	require.NoError(t, err)
	t.Cleanup(func() { _ = local.Close() })
	secret, info, err := agents.NewTokens(local).Create(ctx, agents.TokenRequest{Actor: "zombie"})
	require.NoError(t, err)
	url := serve(t, store, false, server.Options{})

	agent, err := workspace.Open(ctx, url+"?ws_token="+secret)
	require.NoError(t, err)
	t.Cleanup(func() { _ = agent.Close() })
	_, err = agent.Tasks().Create(ctx, workspace.Write{Actor: "zombie"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	task, err := agent.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "zombie", Lease: time.Hour})
	require.NoError(t, err)
	lease, err := agent.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a", Owner: "zombie", TTL: time.Hour})
	require.NoError(t, err)

	op, err := workspace.Open(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = op.Close() })
	r, err := agents.Stop(ctx, op, agents.StopRequest{Actor: "zombie", By: "operator", Message: "runaway"})
	require.NoError(t, err)
	assert.Equal(t, []string{info.ID}, r.Tokens)
	assert.Equal(t, []string{"file:a"}, r.Leases)
	assert.Equal(t, []string{task.ID}, r.Tasks)

	_, err = agent.Tasks().Heartbeat(ctx, workspace.Write{Actor: "zombie"}, task.ID, time.Hour)
	assert.ErrorIs(t, err, wire.ErrUnauthorized, "its token is refused")
	_, err = op.Locks().Renew(ctx, lease, time.Hour)
	assert.ErrorIs(t, err, workspace.ErrLockLost)
	got, err := op.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskPending, got.Status)

	all, err := agents.List(ctx, op, agents.Rule{})
	require.NoError(t, err)
	for _, a := range all {
		assert.Empty(t, a.Tokens, "a served workspace's tokens are its server's to read")
	}
}
