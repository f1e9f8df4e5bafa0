package mcp_test

import (
	"sync"
	"testing"
	"time"

	"github.com/agentspace/agentspace/workspace/touch"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/workspace"
)

// TestToolCallsAreTheActorsHeartbeat: with Options.Touch, a tool call of
// any kind renews the claim of the actor it acts as, at most once per
// Every (a controlled clock); without it, a call renews nothing.
func TestToolCallsAreTheActorsHeartbeat(t *testing.T) {
	ctx := testCtx(t)
	ws := openWS(t, sqliteBackend.dsn(t))
	for range 2 {
		_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t"})
		require.NoError(t, err)
	}
	var (
		mu  sync.Mutex
		now = time.Now()
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	touch := touch.New(ws, touch.Options{Every: time.Minute, Now: clock})
	s := mcp.NewServer(ws, mcp.Options{Actor: "ann", Touch: touch})
	t.Cleanup(func() { _ = s.Close() })
	cs := connect(t, s, "", nil)

	claimed, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "ann", Lease: time.Hour})
	require.NoError(t, err)
	// Every after the claim: a claim granted less than Every ago is not
	// renewed (the cap is the actor's, whichever process renews).
	mu.Lock()
	now = time.Now().Add(time.Minute)
	mu.Unlock()
	version := func() int64 {
		got, err := ws.Tasks().Get(ctx, claimed.ID)
		require.NoError(t, err)
		return got.Version
	}
	ok(t, cs, "status", map[string]any{})
	renewed := version()
	assert.Greater(t, renewed, claimed.Version, "the call renewed the claim")
	ok(t, cs, "task_list", map[string]any{})
	assert.Equal(t, renewed, version(), "not again within Every")
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	ok(t, cs, "artifact_list", map[string]any{})
	assert.Greater(t, version(), renewed, "again after Every")

	plain := newServer(t, ws, "bob")
	other, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob", Lease: time.Hour})
	require.NoError(t, err)
	ok(t, connect(t, plain, "", nil), "status", map[string]any{})
	got, err := ws.Tasks().Get(ctx, other.ID)
	require.NoError(t, err)
	assert.Equal(t, other.Version, got.Version, "no renewal without Touch")
}
