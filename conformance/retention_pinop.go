package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentspace/agentspace/internal/reserve"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// pinOpPolicy lets alice write artifacts but no pins.
const pinOpPolicy = `
[roles.writer]
artifacts_read  = ["**"]
artifacts_write = ["**"]
notes_read  = ["*"]
notes_write = ["other"]

[actors]
root  = ["admin"]
alice = ["writer"]
`

// testGCPinnedByOp: a batch op's Pin pins the version it writes in the
// same batch (a created artifact's too, whose ID the batch assigns), as
// its own note.put event, under the write's rights alone (a change set's
// promotion relies on it); gc keeps those versions down to each
// artifact's newest, and removes one once it is unpinned. The batch runs
// where the store is: the wire does not carry Pin (a client refuses it).
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
	res, err := store.Commit(ctx, workspace.Batch{Actor: "alice", Ops: []workspace.Op{
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
