package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestTeamFinishesTheRun runs the simulated team twice on one fresh store:
// every task of each run is done once, every artifact written, and the log
// holds each run's events.
func TestTeamFinishesTheRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "team.db")
	require.NoError(t, run(ctx, dsn))
	time.Sleep(time.Second) // the run id has one-second resolution
	require.NoError(t, run(ctx, dsn))

	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer ws.Close()
	st, err := ws.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, 8, st.Tasks[workspace.TaskDone])
	assert.Equal(t, 10, st.Artifacts)
	assert.Equal(t, 2, st.Notes)
	assert.Empty(t, st.Locks, "every lock was released")

	claims, err := ws.Events().Read(ctx, workspace.EventQuery{Types: []string{workspace.EventTaskClaimed}})
	require.NoError(t, err)
	assert.Len(t, claims.Events, 8, "each task claimed once")
}
