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
