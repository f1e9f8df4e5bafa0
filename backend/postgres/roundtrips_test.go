package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// TestRoundTripsPerWrite counts the round trips of the benchmark's writes
// once their statements are prepared: a conditional artifact update, a
// lock's acquire and release (each one round trip: the store knows what
// they read from its last write, see predict.go), a claim and a
// completion (two: tasks are read from the database).
func TestRoundTripsPerWrite(t *testing.T) {
	ctx := ctxFor(t)
	cfg, err := pgxpool.ParseConfig(pgtest.ServerDSN(t))
	require.NoError(t, err)
	rt := &postgres.RoundTrips{}
	cfg.ConnConfig.Tracer = rt
	cfg.MaxConns = 1
	// pgxpool pings a connection idle for a second before handing it out:
	// on a loaded machine (CI, four packages at once) a second can pass
	// between two writes, and the ping is the pool's, not the write's.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// The policy's head is read at most once per PolicyRecheck: on a loaded
	// machine the default 100ms can lapse between two writes and add that
	// read to a count that is about the writes.
	ws, err := postgres.OpenPool(ctx, pool, postgres.Options{Schema: pgtest.Schema(t), NoListen: true}, workspace.Options{PolicyRecheck: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	w := workspace.Write{Actor: "a"}

	a, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "doc", Content: []byte("v1")})
	require.NoError(t, err)
	update := func(i int) {
		w := workspace.Write{Actor: "a", IfVersion: a.Version}
		a, err = ws.Artifacts().Update(ctx, w, workspace.ArtifactRef{Name: "doc"}, workspace.ArtifactChange{Content: []byte{byte(i)}})
		require.NoError(t, err)
	}
	update(0)
	before := rt.N.Load()
	for i := 1; i <= 4; i++ {
		update(i)
	}
	assert.Equal(t, int64(4), rt.N.Load()-before, "round trips per conditional update: one, the lock, the guard of what was predicted, the writes and the commit")

	_, err = ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "doc"}) // prepares the statement
	require.NoError(t, err)
	before = rt.N.Load()
	got, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "doc"})
	require.NoError(t, err)
	assert.Equal(t, []byte{4}, got.Content)
	assert.Equal(t, int64(1), rt.N.Load()-before, "a get of the head: one statement")

	_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "db", Body: "pg"})
	require.NoError(t, err)
	for range 2 { // the first prepares the statement
		before = rt.N.Load()
		n, err := ws.Notes().Get(ctx, "decision", "db")
		require.NoError(t, err)
		assert.Equal(t, "pg", n.Body)
	}
	assert.Equal(t, int64(1), rt.N.Load()-before, "a get of a note: one statement")

	for range 3 {
		_, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "t"})
		require.NoError(t, err)
	}
	claimDone := func() (claim, done int64) {
		n0 := rt.N.Load()
		task, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "a", Lease: time.Minute})
		require.NoError(t, err)
		n1 := rt.N.Load()
		_, err = ws.Tasks().Complete(ctx, w, task.ID, workspace.TaskResult{Summary: "ok"})
		require.NoError(t, err)
		return n1 - n0, rt.N.Load() - n1
	}
	claimDone()
	claim, done := claimDone()
	assert.Equal(t, int64(2), claim, "claim: the lock with the lapsed claims and the ready task read ahead, the commit")
	assert.Equal(t, int64(2), done, "complete: the lock with the task read ahead, the commit")

	lockCycle := func() (acquire, release int64) {
		n0 := rt.N.Load()
		l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:lead", Owner: "a", TTL: time.Minute})
		require.NoError(t, err)
		n1 := rt.N.Load()
		require.NoError(t, ws.Locks().Release(ctx, l))
		return n1 - n0, rt.N.Load() - n1
	}
	lockCycle()
	acquire, release := lockCycle()
	assert.Equal(t, int64(1), acquire, "acquire: the lease predicted")
	assert.Equal(t, int64(1), release, "release: the lease predicted")
}
