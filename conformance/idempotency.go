package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// testIdempotentRetry: repeating a write with its idempotency key, from any
// handle, returns the first result and writes nothing; another key writes.
func testIdempotentRetry(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	w := workspace.Write{Actor: "agent", IdempotencyKey: "create-plan-1"}
	a, err := ws1.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plan.md", Content: []byte("v1")})
	require.NoError(t, err)
	before := snap(t, ws1)
	for _, ws := range []*workspace.Workspace{ws1, ws2} {
		again, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plan.md", Content: []byte("v1")})
		require.NoError(t, err, "a retry is not ErrAlreadyExists")
		requireSameArtifactMeta(t, a, again)
	}
	assert.Equal(t, before, snap(t, ws1), "a retry writes nothing")

	up := workspace.Write{Actor: "agent", IfVersion: 1, IdempotencyKey: "update-plan-2"}
	v2, err := ws2.Artifacts().Update(ctx, up, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	assert.Equal(t, int64(2), v2.Version)
	head := headOf(t, ws1)
	again, err := ws1.Artifacts().Update(ctx, up, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err, "the retry does not conflict with its own first write")
	requireSameArtifactMeta(t, v2, again)
	assert.Equal(t, head, headOf(t, ws1))

	other := workspace.Write{Actor: "agent", IdempotencyKey: "update-plan-3"}
	v3, err := ws1.Artifacts().Update(ctx, other, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)
	assert.Equal(t, int64(3), v3.Version, "a different key writes")

	// The first result is returned even after the record moved on.
	again, err = ws2.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plan.md", Content: []byte("v1")})
	require.NoError(t, err)
	assert.Equal(t, int64(1), again.Version)
	got, err := ws1.Artifacts().Get(ctx, workspace.ByID(a.ID))
	require.NoError(t, err)
	assert.Equal(t, int64(3), got.Version)

	n, err := ws1.Notes().Put(ctx, workspace.Write{Actor: "agent", IdempotencyKey: "note-1"}, workspace.NotePut{Kind: "decision", Key: "k"})
	require.NoError(t, err)
	n2, err := ws2.Notes().Put(ctx, workspace.Write{Actor: "agent", IdempotencyKey: "note-1"}, workspace.NotePut{Kind: "decision", Key: "k"})
	require.NoError(t, err)
	assert.Equal(t, n.Version, n2.Version)
	stored, err := ws1.Notes().Get(ctx, "decision", "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), stored.Version, "the note was put once")
}

// testIdempotentBatch: a replayed batch returns the same results and events
// and says it was replayed.
func testIdempotentBatch(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws1 := fresh(t, h)
	ws2 := open(t, dsn)
	task, err := ws1.Tasks().Create(ctx, as("lead"), workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	b := workspace.Batch{Actor: "agent", IdempotencyKey: "publish-42", Ops: []workspace.Op{
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "out", Content: []byte("x"), TaskID: task.ID}},
		workspace.UpdateTaskOp{ID: task.ID, Change: workspace.TaskChange{Priority: ptr(3)}, Cond: workspace.Cond{IfVersion: 1}},
		workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: "k"}},
	}}
	first, err := ws1.Commit(ctx, b)
	require.NoError(t, err)
	assert.False(t, first.Replayed)
	before := snap(t, ws1)

	again, err := ws2.Commit(ctx, b)
	require.NoError(t, err)
	assert.True(t, again.Replayed, "the second call says it replayed")
	assert.Equal(t, before, snap(t, ws1), "the replay writes nothing")
	require.Len(t, again.Results, 3)
	assert.Equal(t, first.Results[0].Artifact.ID, again.Results[0].Artifact.ID)
	assert.Equal(t, first.Results[1].Task.Version, again.Results[1].Task.Version)
	assert.Equal(t, first.Results[2].Note.Version, again.Results[2].Note.Version)
	assert.Equal(t, seqs(first.Events), seqs(again.Events))
	assert.Equal(t, types(first.Events), types(again.Events))

	b.IdempotencyKey = "publish-43"
	_, err = ws2.Commit(ctx, b)
	require.ErrorIs(t, err, workspace.ErrAlreadyExists, "a new key runs the batch again")
}

// testIdempotencyKeysExpire: after ws_idempotency_ttl a key is forgotten and
// the same call runs again.
func testIdempotencyKeysExpire(t *testing.T, h Harness) {
	ctx := testCtx(t)
	ws := open(t, dsnWith(h.NewDSN(t), "ws_idempotency_ttl", "1s"))
	w := workspace.Write{Actor: "agent", IdempotencyKey: "k"}
	_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "a"})
	require.NoError(t, err)
	head := headOf(t, ws)
	waitFor(t, "the key to expire", func() bool {
		_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "a"})
		if err == nil {
			require.Equal(t, head, headOf(t, ws), "while the key lives a retry writes nothing")
			time.Sleep(50 * time.Millisecond)
			return false
		}
		require.ErrorIs(t, err, workspace.ErrAlreadyExists, "once the key expired the create runs again")
		return true
	})
}

// testIdempotencyKeysArePerActorAndRequest: two actors may use one key
// without receiving each other's results, and one actor reusing a key for a
// different request gets ErrInvalid, not the first request's result.
func testIdempotencyKeysArePerActorAndRequest(t *testing.T, h Harness) {
	ctx := testCtx(t)
	_, ws := fresh(t, h)
	put := func(actor, body string) (workspace.Note, error) {
		return ws.Notes().Put(ctx, workspace.Write{Actor: actor, IdempotencyKey: "same-key"},
			workspace.NotePut{Kind: "decision", Key: actor, Body: body})
	}
	a, err := put("alice", "a")
	require.NoError(t, err)
	b, err := put("bob", "b")
	require.NoError(t, err, "another actor's key is its own")
	assert.Equal(t, "bob", b.Key)
	assert.Equal(t, "alice", a.Key)

	head := headOf(t, ws)
	_, err = put("alice", "something else")
	require.ErrorIs(t, err, workspace.ErrInvalid, "a reused key with another request")
	assert.Equal(t, head, headOf(t, ws), "nothing written")
	again, err := put("alice", "a")
	require.NoError(t, err)
	assert.Equal(t, a.Version, again.Version, "the original request still replays")
}
