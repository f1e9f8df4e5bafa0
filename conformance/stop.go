package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testStopActorEndsItsLeasesAndClaims: an operator's StopActorOp, in one
// batch, force-releases every lease the actor holds (revoking each token)
// and returns each task it claimed to pending, one event each, and touches
// nobody else's. Afterwards the stopped actor's fenced write is refused
// with ErrStaleFence, its heartbeat with ErrLockLost and its completion is
// refused; another agent claims the task. Stopping an actor that holds
// nothing writes nothing.
func testStopActorEndsItsLeasesAndClaims(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	op := open(t, dsn)
	a, err := ws.Artifacts().Create(ctx, as("lead"), workspace.NewArtifact{Name: "src/zombie.go", Content: []byte("v1")})
	require.NoError(t, err)
	for _, tag := range []string{"z1", "z2", "b"} {
		_, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: tag, Labels: map[string]string{"only": tag}})
		require.NoError(t, err)
	}
	z1 := claimOnly(t, ws, "zombie", "z1", time.Hour)
	z2 := claimOnly(t, ws, "zombie", "z2", time.Hour)
	b := claimOnly(t, ws, "bystander", "b", time.Hour)
	res := workspace.ArtifactResource(a.Name)
	lease := acquire(t, ws, res, "zombie", time.Hour)
	other := acquire(t, ws, "file:other", "zombie", time.Hour)
	kept := acquire(t, ws, "file:kept", "bystander", time.Hour)
	fenced := workspace.Write{Actor: "zombie", Fence: lease.Token}
	_, err = ws.Artifacts().Update(ctx, fenced, workspace.ByName(a.Name), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)

	r, err := op.Commit(ctx, workspace.Batch{Actor: "operator", Ops: []workspace.Op{
		workspace.StopActorOp{Actor: "zombie", Message: "runaway"}}})
	require.NoError(t, err)
	got := map[string][]string{}
	for _, e := range r.Events {
		assert.Equal(t, "operator", e.Actor)
		assert.Contains(t, e.Message, "runaway")
		got[e.Type] = append(got[e.Type], e.Subject.ID)
	}
	assert.ElementsMatch(t, []string{res, "file:other"}, got[workspace.EventLockForced], "each of its leases ended")
	assert.ElementsMatch(t, []string{z1.ID, z2.ID}, got[workspace.EventTaskReleased], "each of its claims returned")
	assert.Len(t, r.Events, 4, "one event per lease and claim, nothing else")

	leases, err := op.Locks().List(ctx)
	require.NoError(t, err)
	require.Len(t, leases, 1, "only the bystander's lease is left")
	assert.Equal(t, kept, leases[0])
	for _, id := range []string{z1.ID, z2.ID} {
		task, err := op.Tasks().Get(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskPending, task.Status)
		assert.Empty(t, task.Assignee)
	}
	bt, err := op.Tasks().Get(ctx, b.ID)
	require.NoError(t, err)
	assert.Equal(t, b, bt, "the bystander's claim is untouched")

	// The zombie wakes up and carries on.
	_, err = ws.Artifacts().Update(ctx, fenced, workspace.ByName(a.Name), workspace.ArtifactChange{Content: []byte("late")})
	assert.ErrorIs(t, err, workspace.ErrStaleFence, "a fenced write with its revoked token")
	_, err = ws.Locks().Renew(ctx, other, time.Hour)
	assert.ErrorIs(t, err, workspace.ErrLockLost, "renewing an ended lease")
	_, err = ws.Tasks().Heartbeat(ctx, as("zombie"), z1.ID, time.Hour)
	assert.ErrorIs(t, err, workspace.ErrLockLost, "a heartbeat on a returned claim")
	_, err = ws.Tasks().Complete(ctx, as("zombie"), z1.ID, workspace.TaskResult{Summary: "late"})
	assert.Error(t, err, "completing a returned claim")
	next := claimOnly(t, op, "successor", "z1", time.Hour)
	assert.Equal(t, z1.ID, next.ID)
	assert.Equal(t, 2, next.Attempts)
	_, err = ws.Tasks().Complete(ctx, as("zombie"), z1.ID, workspace.TaskResult{Summary: "late"})
	assert.ErrorIs(t, err, workspace.ErrNotHolder, "completing a task another claimed")
	cur, err := op.Artifacts().Get(ctx, workspace.ByName(a.Name))
	require.NoError(t, err)
	assert.Equal(t, "v2", string(cur.Content), "nothing the zombie wrote after the stop is stored")

	before := snap(t, op)
	r, err = op.Commit(ctx, workspace.Batch{Actor: "operator", Ops: []workspace.Op{workspace.StopActorOp{Actor: "nobody"}}})
	require.NoError(t, err)
	assert.Empty(t, r.Events, "stopping an actor that holds nothing")
	assert.Equal(t, before, snap(t, op))
	_, err = op.Commit(ctx, workspace.Batch{Actor: "operator", Ops: []workspace.Op{workspace.StopActorOp{}}})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "a stop names its actor")
}
