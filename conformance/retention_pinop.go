package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentspace/agentspace/internal/reserve"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// pinOpPolicy lets alice write artifacts but no pins, and carol both.
const pinOpPolicy = `
[roles.writer]
artifacts_read  = ["**"]
artifacts_write = ["**"]
notes_read  = ["*"]
notes_write = ["other"]

[roles.pinner]
artifacts_read  = ["**"]
artifacts_write = ["**"]
notes_read  = ["*"]
notes_write = ["pin"]

[actors]
root  = ["admin"]
alice = ["writer"]
carol = ["pinner"]
`

// bookkeepingKey plays a layer whose batches pin what they write as the
// system's bookkeeping (as a change set's promotion does): its
// reservation has Pins.
var bookkeepingKey = reserve.Register(reserve.Entry{Kind: "conformance-bookkeeping",
	Owner: "the conformance suite's bookkeeping batches", Pins: true})

// testGCPinnedByOp: a batch op's Pin pins the version it writes in the
// same batch (a created artifact's too, whose ID the batch assigns), as
// its own note.put event; a batch carrying a key reserved with Pins (a
// change set's promotion) pins so with no pin right of its actor; gc
// keeps those versions down to each artifact's newest, and removes one
// once it is unpinned. The batch runs where the store is: the wire does
// not carry Pin (a client refuses it), nor a grant.
func testGCPinnedByOp(t *testing.T, h Harness) {
	// Reads through a server always have a principal: alice's.
	ctx := workspace.AsActor(caseCtx(t, time.Minute), "alice")
	dsn, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, pinOpPolicy)
	arts := ws.Artifacts()
	_, err := arts.Create(ctx, as("alice"), workspace.NewArtifact{Name: "a", Content: []byte("a1")})
	require.NoError(t, err)
	store := open(t, storeDSN(h, dsn))
	_, err = store.Pin(ctx, as("alice"), "a", 1)
	require.ErrorIs(t, err, workspace.ErrForbidden, "the policy forbids alice's pins")

	head := headOf(t, store)
	res, err := store.Commit(bookkeepingKey.Grant(ctx), workspace.Batch{Actor: "alice", Ops: []workspace.Op{
		workspace.UpdateArtifactOp{Ref: workspace.ByName("a"), Change: workspace.ArtifactChange{Content: []byte("a pinned")}, Pin: true},
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "e", Content: []byte("e pinned")}, Pin: true},
		workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "f", Content: []byte("f1")}},
	}})
	require.NoError(t, err)
	a2, e1 := res.Results[0].Artifact, res.Results[1].Artifact
	require.NotNil(t, a2)
	require.NotNil(t, e1)
	pinned := map[string]bool{}
	for _, ev := range eventsAfter(t, store, head) {
		if ev.Type == workspace.EventNotePut {
			pinned[ev.Subject.ID] = true
		}
	}
	assert.Equal(t, map[string]bool{
		workspace.PinKind + "/" + reserve.PinKey(a2.ID, 2): true,
		workspace.PinKind + "/" + reserve.PinKey(e1.ID, 1): true,
	}, pinned, "one pin event for each pinned op, in the batch")
	for _, n := range []string{"a", "e", "f"} {
		for i := range 2 {
			_, err := arts.Update(ctx, as("alice"), workspace.ByName(n), workspace.ArtifactChange{Content: fmt.Appendf(nil, "%s later %d", n, i)})
			require.NoError(t, err)
		}
	}

	// gc needs admin.compact of a caller with a principal: root's.
	root := workspace.AsActor(ctx, "root")
	r, err := store.GC(root, workspace.GCPolicy{Actor: "root", KeepVersions: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(2+1+2), r.Versions.Count, "a v1, v3; e v2; f v1, v2")
	kept := func(name string) []int64 {
		vs, err := arts.Versions(ctx, workspace.ByName(name))
		require.NoError(t, err)
		var out []int64
		for _, v := range vs {
			out = append(out, v.Version)
		}
		return out
	}
	assert.Equal(t, []int64{2, 4}, kept("a"))
	assert.Equal(t, []int64{1, 3}, kept("e"))
	assert.Equal(t, []int64{3}, kept("f"))
	got, err := arts.Get(ctx, workspace.ArtifactRef{Name: "e", Version: 1})
	require.NoError(t, err)
	assert.Equal(t, "e pinned", string(got.Content))

	// Unpinned, a's version 2 goes.
	require.NoError(t, store.Unpin(root, as("root"), "a", 2))
	r, err = store.GC(root, workspace.GCPolicy{Actor: "root", KeepVersions: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(1), r.Versions.Count)
	assert.Equal(t, []int64{4}, kept("a"))
	assert.Equal(t, []int64{1, 3}, kept("e"))
}

// testPolicyOpPin: a batch op's Pin needs what Workspace.Pin needs, the
// note.write right on the pin kind: an actor without it is refused with
// the same *ForbiddenError whichever op pins, and nothing of the batch is
// written (no version, no pin, only the denied event); a key of a reserved
// kind without Pins does not lift that. An actor with the right pins
// through a batch. It runs where the store is: the wire carries no Pin.
func testPolicyOpPin(t *testing.T, h Harness) {
	ctx := workspace.AsActor(caseCtx(t, time.Minute), "root")
	dsn, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, pinOpPolicy)
	store := open(t, storeDSN(h, dsn))
	a1, err := store.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: "a", Content: []byte("a1")})
	require.NoError(t, err)
	head := headOf(t, store)

	_, err = store.Pin(ctx, as("alice"), "a", 1)
	pinRefusal := requireForbidden(t, err, "alice", "note.write", "notes_write")
	assert.Equal(t, workspace.PinKind, pinRefusal.Object)

	batches := map[string]struct {
		ctx   context.Context
		ops   []workspace.Op
		index int // of the op refused; -1 for a batch of one
	}{
		"update pinned": {ctx, []workspace.Op{
			workspace.UpdateArtifactOp{Ref: workspace.ByName("a"), Change: workspace.ArtifactChange{Content: []byte("a2")}, Pin: true},
		}, -1},
		"create pinned after a plain create": {ctx, []workspace.Op{
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "f", Content: []byte("f1")}},
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "e", Content: []byte("e1")}, Pin: true},
		}, 1},
		"update by ID pinned, with another layer's key": {ownedKey.Grant(ctx), []workspace.Op{
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "f", Content: []byte("f1")}},
			workspace.UpdateArtifactOp{Ref: workspace.ByID(a1.ID), Change: workspace.ArtifactChange{Content: []byte("a2")}, Pin: true},
		}, 1},
	}
	for name, b := range batches {
		_, err := store.Commit(b.ctx, workspace.Batch{Actor: "alice", Ops: b.ops})
		fe := requireForbidden(t, err, "alice", "note.write", "notes_write")
		assert.Equal(t, pinRefusal.Object, fe.Object, "%s: Workspace.Pin's refusal", name)
		assert.Equal(t, pinRefusal.Roles, fe.Roles, name)
		var be *workspace.BatchError
		if b.index < 0 {
			assert.False(t, errors.As(err, &be), "%s: a batch of one returns its op's error", name)
		} else if assert.ErrorAs(t, err, &be, name) {
			assert.Equal(t, b.index, be.Index, name)
		}
	}
	got, err := store.Artifacts().Get(ctx, workspace.ByName("a"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Version, "a refused batch writes no version")
	assert.Equal(t, "a1", string(got.Content))
	for _, n := range []string{"e", "f"} {
		_, err := store.Artifacts().Get(ctx, workspace.ByName(n))
		assert.ErrorIs(t, err, workspace.ErrNotFound, "%s: nothing of a refused batch is written", n)
	}
	pins, err := store.Notes().List(ctx, workspace.NoteFilter{Kind: workspace.PinKind})
	require.NoError(t, err)
	assert.Empty(t, pins.Notes, "a refused batch writes no pin")
	evs := eventsAfter(t, store, head)
	assert.Len(t, evs, 1+len(batches), "only the denied events are logged")
	for _, ev := range evs {
		if assert.Equal(t, workspace.EventDenied, ev.Type) {
			assert.Equal(t, "note.write", ev.Subject.ID)
			assert.True(t, strings.HasPrefix(ev.Subject.Name, workspace.PinKind+"/"), ev.Subject.Name)
		}
	}

	// With the right, the same batch pins.
	res, err := store.Commit(ctx, workspace.Batch{Actor: "carol", Ops: []workspace.Op{
		workspace.UpdateArtifactOp{Ref: workspace.ByName("a"), Change: workspace.ArtifactChange{Content: []byte("a2")}, Pin: true},
	}})
	require.NoError(t, err)
	a2 := res.Results[0].Artifact
	require.NotNil(t, a2)
	pin, err := store.Notes().Get(ctx, workspace.PinKind, reserve.PinKey(a2.ID, 2))
	require.NoError(t, err)
	assert.Equal(t, "carol", pin.Author)
	assert.Equal(t, a2.SHA256, pin.Body)
}
