package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testForceReleaseRevokesTheFence: a forced release revokes the holder's
// token. The resource's fence moves past it, so a write the old holder
// still makes with that token as its fence (a paused agent resuming after
// an operator freed its lock) is refused with ErrStaleFence and stores
// nothing, even before anyone else acquires the lock; the next holder's
// token is newer still, and its fenced write goes through.
func testForceReleaseRevokesTheFence(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	a, err := ws1.Artifacts().Create(ctx, as("stuck"), workspace.NewArtifact{Name: "plans/fenced.md", Content: []byte("v1")})
	require.NoError(t, err)
	res := workspace.ArtifactResource(a.Name)
	old := acquire(t, ws1, res, "stuck", time.Hour)
	fenced := workspace.Write{Actor: "stuck", Fence: old.Token}
	_, err = ws1.Artifacts().Update(ctx, fenced, workspace.ByName(a.Name), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err, "the holder's fenced write before the forced release")

	require.NoError(t, ws2.Locks().ForceRelease(ctx, as("operator"), res))

	stale := func(when string) {
		t.Helper()
		_, err := ws1.Artifacts().Update(ctx, fenced, workspace.ByName(a.Name), workspace.ArtifactChange{Content: []byte("late")})
		require.ErrorIs(t, err, workspace.ErrStaleFence, when)
		var se *workspace.StaleFenceError
		require.ErrorAs(t, err, &se, when)
		assert.Equal(t, old.Token, se.Fence, when)
		assert.Greater(t, se.Newest, old.Token, when)
		got, err := ws2.Artifacts().Get(ctx, workspace.ByName(a.Name))
		require.NoError(t, err)
		assert.Equal(t, "v2", string(got.Content), "%s: nothing stored", when)
		assert.Equal(t, int64(2), got.Version, when)
	}
	stale("after the forced release, the lock free")
	_, err = ws1.Commit(ctx, workspace.Batch{Actor: "stuck", Ops: []workspace.Op{
		workspace.UpdateArtifactOp{Ref: workspace.ByName(a.Name), Change: workspace.ArtifactChange{Content: []byte("late")},
			Cond: workspace.Cond{Fence: old.Token}},
	}})
	require.ErrorIs(t, err, workspace.ErrStaleFence, "in a batch")
	_, err = ws1.Locks().Renew(ctx, old, time.Minute)
	assert.ErrorIs(t, err, workspace.ErrLockLost)

	next := acquire(t, ws2, res, "fresh", time.Minute)
	assert.Greater(t, next.Token, old.Token)
	stale("after another actor acquired the lock")
	_, err = ws2.Artifacts().Update(ctx, workspace.Write{Actor: "fresh", Fence: next.Token}, workspace.ByName(a.Name),
		workspace.ArtifactChange{Content: []byte("v3")})
	require.NoError(t, err, "the new holder's fenced write")
}

// testFencedCreateAfterRevokeIsStale: a fence guards a create as it guards
// an update. An agent that holds the lock of a name no artifact has yet
// creates it fenced with its token; once its lease is revoked, by a forced
// release or by a stop of the agent, its fenced create of a new file, alone
// or in a batch, is refused with ErrStaleFence and stores nothing, before
// anyone else takes the lock and after. A fence older than the newest
// token is stale on a create too, and the current holder's create goes
// through.
func testFencedCreateAfterRevokeIsStale(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	op := open(t, dsn)
	create := func(w workspace.Write, name string) error {
		_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: name, Content: []byte("late")})
		return err
	}
	batch := func(actor string, fence int64, name string) error {
		_, err := ws.Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: name + ".log", Content: []byte("unfenced")}},
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: name, Content: []byte("late batch")}, Fence: fence},
		}})
		return err
	}
	stale := func(err error, fence int64, what string) {
		t.Helper()
		require.ErrorIs(t, err, workspace.ErrStaleFence, what)
		var se *workspace.StaleFenceError
		require.ErrorAs(t, err, &se, what)
		assert.Equal(t, fence, se.Fence, what)
		assert.Greater(t, se.Newest, fence, what)
	}
	absent := func(name, what string) {
		t.Helper()
		for _, n := range []string{name, name + ".log"} {
			_, err := op.Artifacts().Get(ctx, workspace.ByName(n))
			assert.ErrorIs(t, err, workspace.ErrNotFound, "%s: %s was not stored", what, n)
		}
	}

	// The holder's fenced create goes through, alone and in a batch.
	held := acquire(t, ws, workspace.ArtifactResource("out/held.md"), "worker", time.Hour)
	require.NoError(t, create(workspace.Write{Actor: "worker", Fence: held.Token}, "out/held.md"))
	heldBatch := acquire(t, ws, workspace.ArtifactResource("out/batch.md"), "worker", time.Hour)
	require.NoError(t, batch("worker", heldBatch.Token, "out/batch.md"), "the holder's fenced batch create")

	// Forced release: the old holder's token is revoked.
	forced := acquire(t, ws, workspace.ArtifactResource("out/z.md"), "zombie", time.Hour)
	require.NoError(t, op.Locks().ForceRelease(ctx, as("operator"), forced.Resource))
	before := snap(t, op)
	stale(create(workspace.Write{Actor: "zombie", Fence: forced.Token}, "out/z.md"), forced.Token, "a create after a forced release")
	stale(batch("zombie", forced.Token, "out/z.md"), forced.Token, "a batch create after a forced release")
	absent("out/z.md", "after a forced release")
	assert.Equal(t, before, snap(t, op), "the refused creates wrote nothing")

	// A stop of the agent revokes every token it holds, of names no
	// artifact has as of one that has.
	a1 := acquire(t, ws, workspace.ArtifactResource("out/y1.md"), "stopped", time.Hour)
	a2 := acquire(t, ws, workspace.ArtifactResource("out/y2.md"), "stopped", time.Hour)
	_, err := op.Commit(ctx, workspace.Batch{Actor: "operator", Ops: []workspace.Op{workspace.StopActorOp{Actor: "stopped"}}})
	require.NoError(t, err)
	stale(create(workspace.Write{Actor: "stopped", Fence: a1.Token}, "out/y1.md"), a1.Token, "a create after a stop")
	stale(batch("stopped", a2.Token, "out/y2.md"), a2.Token, "a batch create after a stop")
	absent("out/y1.md", "after a stop")
	absent("out/y2.md", "after a stop")

	// Another takes the lock: the old token is older than the newest, and
	// the new holder's fenced create goes through.
	next := acquire(t, op, forced.Resource, "successor", time.Hour)
	stale(create(workspace.Write{Actor: "zombie", Fence: forced.Token}, "out/z.md"), forced.Token, "a create after another acquired the lock")
	require.NoError(t, op.Locks().Release(ctx, next))
	stale(batch("zombie", forced.Token, "out/z.md"), forced.Token, "a batch create after another held and released the lock")
	absent("out/z.md", "after another held the lock")
	_, err = op.Artifacts().Create(ctx, workspace.Write{Actor: "successor", Fence: next.Token}, workspace.NewArtifact{Name: "out/z.md", Content: []byte("v1")})
	require.NoError(t, err, "the newest token's create")

	_, err = ws.Commit(ctx, workspace.Batch{Actor: "worker", Ops: []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "out/neg.md"}, Fence: -1}}})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "a negative fence")
}
