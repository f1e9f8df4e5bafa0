package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testReopenKeepsEverything: a store closed by every handle and opened again
// has every record, version, lease, event, floor and idempotency key; seqs
// and lease tokens carry on from where they were.
func testReopenKeepsEverything(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn := h.NewDSN(t)
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	a, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "a", IdempotencyKey: "once"}, workspace.NewArtifact{Name: "keep.bin", Content: []byte{0, 1, 2}, Labels: map[string]string{"x": "y"}})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, as("a"), workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte{3, 4}})
	require.NoError(t, err)
	dep, err := ws.Tasks().Create(ctx, as("a"), workspace.NewTask{Title: "dep"})
	require.NoError(t, err)
	task, err := ws.Tasks().Create(ctx, as("a"), workspace.NewTask{Title: "later", DependsOn: []string{dep.ID}, Priority: 9})
	require.NoError(t, err)
	claimed, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "w", Lease: time.Hour})
	require.NoError(t, err)
	require.Equal(t, dep.ID, claimed.ID)
	_, err = ws.Notes().Put(ctx, as("a"), workspace.NotePut{Kind: "decision", Key: "k", Body: "kept"})
	require.NoError(t, err)
	l := acquire(t, ws, "file:x", "a", time.Hour)
	require.NoError(t, ws.Locks().Release(ctx, l))
	held := acquire(t, ws, "file:y", "a", time.Hour)
	require.NoError(t, ws.Events().Compact(ctx, 3))
	before := snap(t, ws)
	log := eventsAfter(t, ws, 2)
	require.NoError(t, ws.Close())

	ws2 := open(t, dsn)
	assert.Equal(t, before, snap(t, ws2), "the dashboard is the same")
	assert.Equal(t, log, eventsAfter(t, ws2, 2), "the log is the same")
	_, err = ws2.Events().Read(ctx, workspace.EventQuery{})
	assert.ErrorIs(t, err, workspace.ErrCompacted, "the floor is kept")

	got, err := ws2.Artifacts().Get(ctx, workspace.ByName("keep.bin"))
	require.NoError(t, err)
	assert.Equal(t, []byte{3, 4}, got.Content)
	assert.Equal(t, map[string]string{"x": "y"}, got.Labels)
	v1, err := ws2.Artifacts().Get(ctx, workspace.ArtifactRef{ID: a.ID, Version: 1})
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 2}, v1.Content)
	again, err := ws2.Artifacts().Create(ctx, workspace.Write{Actor: "a", IdempotencyKey: "once"}, workspace.NewArtifact{Name: "keep.bin", Content: []byte{0, 1, 2}, Labels: map[string]string{"x": "y"}})
	require.NoError(t, err, "idempotency keys are kept")
	assert.Equal(t, a.ID, again.ID)

	gotTask, err := ws2.Tasks().Get(ctx, task.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{dep.ID}, gotTask.DependsOn)
	assert.Equal(t, 9, gotTask.Priority)
	gotDep, err := ws2.Tasks().Get(ctx, dep.ID)
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskInProgress, gotDep.Status)
	assert.Equal(t, "w", gotDep.Assignee)
	assertSameTime(t, claimed.LeaseExpiresAt, gotDep.LeaseExpiresAt, "LeaseExpiresAt")
	_, err = ws2.Tasks().Complete(ctx, as("w"), dep.ID, workspace.TaskResult{Summary: "ok"})
	require.NoError(t, err, "the claim survives the restart")

	n, err := ws2.Notes().Get(ctx, "decision", "k")
	require.NoError(t, err)
	assert.Equal(t, "kept", n.Body)

	lease, err := ws2.Locks().Get(ctx, "file:y")
	require.NoError(t, err)
	assert.Equal(t, held.Token, lease.Token)
	assertSameTime(t, held.ExpiresAt, lease.ExpiresAt, "ExpiresAt")
	next := acquire(t, ws2, "file:x", "b", time.Minute)
	assert.Greater(t, next.Token, l.Token, "tokens keep increasing across restarts")

	head := before.Head
	_, err = ws2.Notes().Put(ctx, as("a"), workspace.NotePut{Kind: "decision", Key: "after"})
	require.NoError(t, err)
	evs := eventsAfter(t, ws2, head)
	require.NotEmpty(t, evs)
	assert.Equal(t, head+1, evs[0].Seq, "seqs carry on from the head")
	assert.Equal(t, seqRange(head+1, head+int64(len(evs))), seqs(evs))
}
