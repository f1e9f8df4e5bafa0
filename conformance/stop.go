package conformance

import (
	"slices"
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

// testStopActorEndsItsSuffixedNames: a stop of an actor ends what any of
// its own names holds, the actor followed by "#" and a suffix (one
// process's name, as the merge queue's "merger#PID-…"), as a token of the
// actor's may write as any of them: their leases are revoked and their
// claims return to pending. Names that only start like the actor's
// ("bobby", "bob-2") or carry it after their own "#" ("alice#bob") are
// other actors, and keep what they hold.
func testStopActorEndsItsSuffixedNames(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	op := open(t, dsn)
	owned := []string{"bob", "bob#merger-1", "bob#w#2"}
	others := []string{"bobby", "bob-2", "alice#bob"}
	for _, who := range slices.Concat(owned, others) {
		_, err := ws.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: who, Labels: map[string]string{"only": who}})
		require.NoError(t, err)
	}
	claims, leases := map[string]workspace.Task{}, map[string]workspace.Lease{}
	for _, who := range slices.Concat(owned, others) {
		claims[who] = claimOnly(t, ws, who, who, time.Hour)
		leases[who] = acquire(t, ws, workspace.ArtifactResource("out/"+who+".md"), who, time.Hour)
	}

	r, err := op.Commit(ctx, workspace.Batch{Actor: "operator", Ops: []workspace.Op{workspace.StopActorOp{Actor: "bob"}}})
	require.NoError(t, err)
	got := map[string][]string{}
	for _, e := range r.Events {
		got[e.Type] = append(got[e.Type], e.Subject.ID)
	}
	var wantLocks, wantTasks []string
	for _, who := range owned {
		wantLocks = append(wantLocks, leases[who].Resource)
		wantTasks = append(wantTasks, claims[who].ID)
	}
	assert.ElementsMatch(t, wantLocks, got[workspace.EventLockForced], "every lease of bob's names ended")
	assert.ElementsMatch(t, wantTasks, got[workspace.EventTaskReleased], "every claim of bob's names returned")
	assert.Len(t, r.Events, 2*len(owned), "nothing else")

	for _, who := range owned {
		task, err := op.Tasks().Get(ctx, claims[who].ID)
		require.NoError(t, err)
		assert.Equal(t, workspace.TaskPending, task.Status, "%s's claim", who)
		_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: who, Fence: leases[who].Token},
			workspace.NewArtifact{Name: "out/" + who + ".md", Content: []byte("late")})
		assert.ErrorIs(t, err, workspace.ErrStaleFence, "%s's fenced create after the stop", who)
		_, err = ws.Tasks().Heartbeat(ctx, as(who), claims[who].ID, time.Hour)
		assert.ErrorIs(t, err, workspace.ErrLockLost, "%s's heartbeat after the stop", who)
	}
	live, err := op.Locks().List(ctx)
	require.NoError(t, err)
	var holders []string
	for _, l := range live {
		holders = append(holders, l.Owner)
	}
	assert.ElementsMatch(t, others, holders, "the other actors keep their leases")
	for _, who := range others {
		task, err := op.Tasks().Get(ctx, claims[who].ID)
		require.NoError(t, err)
		assert.Equal(t, claims[who], task, "%s's claim is untouched", who)
	}
}
