package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/shadow"
	"github.com/agentspace/agentspace/workspace"
)

// changeSetCases are the change-set cases: a set is staged in the
// workspace and promoted as one batch, so every backend must hold it.
var changeSetCases = []coreCase{
	{"ChangeSetConflictNamesTheArtifactsThatMoved", testChangeSetConflict},
	{"ChangeSetPromotesAllOrNothing", testChangeSetAllOrNothing},
}

// stageAll begins set "cs" as alice over a, b, c (and d untouched) and
// stages an update of a, a delete of b, a rename of c to c2 and a create
// of e, then validates it. ws must be the store itself: change-set
// records are reserved, written only where the store is (through a server
// they are refused; see testReservedKinds).
func stageAll(t *testing.T, ws *workspace.Workspace) *shadow.ChangeSets {
	t.Helper()
	ctx := testCtx(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		_, err := ws.Artifacts().Create(ctx, as("alice"), workspace.NewArtifact{Name: n, Content: []byte(n + "1")})
		require.NoError(t, err)
	}
	sets := shadow.NewChangeSets(ws, shadow.Options{})
	_, err := sets.Begin(ctx, "cs", "alice", "")
	require.NoError(t, err)
	for _, r := range []shadow.StageRequest{
		{Op: shadow.OpUpdate, Name: "a", Content: []byte("a2")},
		{Op: shadow.OpDelete, Name: "b"},
		{Op: shadow.OpRename, Name: "c", NewName: "c2"},
		{Op: shadow.OpCreate, Name: "e", Content: []byte("e1")},
	} {
		_, err := sets.Stage(ctx, "cs", "alice", r)
		require.NoError(t, err, "%s %s", r.Op, r.Name)
	}
	v, err := sets.Validate(ctx, "cs", "alice")
	require.NoError(t, err)
	require.True(t, v.Passed, "%+v", v.Violations)
	return sets
}

// names lists the live artifacts with their heads' content.
func names(t *testing.T, ws *workspace.Workspace) map[string]string {
	t.Helper()
	ctx := testCtx(t)
	page, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, a := range page.Artifacts {
		full, err := ws.Artifacts().Get(ctx, workspace.ByID(a.ID))
		require.NoError(t, err)
		out[a.Name] = string(full.Content)
	}
	return out
}

// testChangeSetConflict: staged changes are invisible to reads; when
// another agent moves artifacts the set touches, promotion names exactly
// those and writes nothing but its record.
func testChangeSetConflict(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	other := open(t, dsn)
	sets := stageAll(t, open(t, storeDSN(h, dsn)))
	untouched := map[string]string{"a": "a1", "b": "b1", "c": "c1", "d": "d1"}
	assert.Equal(t, untouched, names(t, other), "a change set is invisible to artifact reads")

	_, err := other.Artifacts().Update(ctx, as("bob"), workspace.ByName("a"), workspace.ArtifactChange{Content: []byte("bob")})
	require.NoError(t, err)
	_, err = other.Artifacts().Update(ctx, as("bob"), workspace.ByName("d"), workspace.ArtifactChange{Content: []byte("bob")})
	require.NoError(t, err)
	_, err = other.Artifacts().Create(ctx, as("bob"), workspace.NewArtifact{Name: "e", Content: []byte("bob")})
	require.NoError(t, err)
	want := map[string]string{"a": "bob", "b": "b1", "c": "c1", "d": "bob", "e": "bob"}
	head := headOf(t, ws)

	_, err = sets.Promote(ctx, "cs", "alice")
	var ce *shadow.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, workspace.ErrConflict)
	assert.Equal(t, []string{"a", "e"}, ce.Paths, "d moved too, but the set does not touch it")
	assert.Equal(t, want, names(t, other))
	evs := eventsAfter(t, ws, head)
	require.Len(t, evs, 1, "only the conflict's record: %v", types(evs))
	assert.Equal(t, workspace.EventNotePut, evs[0].Type)
	assert.Contains(t, evs[0].Message, shadow.EventCSConflict)

	require.NoError(t, sets.Discard(ctx, "cs", "alice"))
	_, err = sets.Promote(ctx, "cs", "alice")
	assert.ErrorIs(t, err, workspace.ErrInvalid, "a discarded set promotes nothing")
	assert.Equal(t, want, names(t, other))
}

// testChangeSetAllOrNothing: a set promotes as one batch with consecutive
// seqs; when one of its writes fails at commit (a lease taken after the
// validation), none of them happens and the set stays open; a promotion
// needs a validation of the set as it is.
func testChangeSetAllOrNothing(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	other := open(t, dsn)
	sets := stageAll(t, open(t, storeDSN(h, dsn)))
	before := names(t, other)

	lease, err := other.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: workspace.ArtifactResource("c"), Owner: "bob", TTL: time.Hour})
	require.NoError(t, err)
	head := headOf(t, ws)
	_, err = sets.Promote(ctx, "cs", "alice")
	assert.ErrorIs(t, err, workspace.ErrLocked)
	assert.Equal(t, before, names(t, other), "nothing of the batch was written")
	for _, ev := range eventsAfter(t, ws, head) {
		assert.Equal(t, workspace.EventConflict, ev.Type, "a failed batch appends nothing but its conflict event")
	}
	require.NoError(t, other.Locks().Release(ctx, lease))

	_, err = sets.Stage(ctx, "cs", "alice", shadow.StageRequest{Op: shadow.OpUpdate, Name: "a", Content: []byte("a3")})
	require.NoError(t, err)
	_, err = sets.Promote(ctx, "cs", "alice")
	assert.ErrorIs(t, err, shadow.ErrNotValidated, "staging again needs a new validation")
	v, err := sets.Validate(ctx, "cs", "alice")
	require.NoError(t, err)
	require.True(t, v.Passed)

	head = headOf(t, ws)
	res, err := sets.Promote(ctx, "cs", "alice")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "a3", "c2": "c1", "d": "d1", "e": "e1"}, names(t, other))
	evs := eventsAfter(t, ws, head)
	require.Len(t, evs, len(res.Events))
	for i, ev := range evs {
		assert.Equal(t, head+int64(i)+1, ev.Seq, "one batch: consecutive seqs")
	}
	cs, err := sets.Get(ctx, "cs")
	require.NoError(t, err)
	assert.Equal(t, shadow.StatePromoted, cs.State)
	_, err = sets.Promote(ctx, "cs", "alice")
	assert.ErrorIs(t, err, workspace.ErrInvalid, "a set promotes once")
}

// promotedPolicy lets alice write artifacts and change sets but no pins.
const promotedPolicy = `
[roles.writer]
artifacts_read  = ["**"]
artifacts_write = ["**"]
notes_read  = ["*"]
notes_write = ["changeset"]

[actors]
root  = ["admin"]
alice = ["writer"]
`

// testGCPromoted: the versions a change set's promotions wrote survive
// gc down to each artifact's newest version, under a policy that forbids
// pins, and so do those of an earlier promotion of a name begun again;
// the versions in between go. gc runs where the store is (for a client of
// a server, on the server's store).
func testGCPromoted(t *testing.T, h Harness) {
	// Reads through a server always have a principal: alice's.
	ctx := workspace.AsActor(caseCtx(t, time.Minute), "alice")
	dsn, ws := fresh(t, h)
	applyPolicy(t, ctx, ws, promotedPolicy)
	arts := ws.Artifacts()
	for _, n := range []string{"a", "c"} {
		_, err := arts.Create(ctx, as("alice"), workspace.NewArtifact{Name: n, Content: []byte(n + "1")})
		require.NoError(t, err)
	}
	// The change sets' records are reserved: the sets run on the store.
	store := open(t, storeDSN(h, dsn))
	sets := shadow.NewChangeSets(store, shadow.Options{})
	promote := func(rs ...shadow.StageRequest) {
		t.Helper()
		_, err := sets.Begin(ctx, "cs", "alice", "")
		require.NoError(t, err)
		for _, r := range rs {
			_, err := sets.Stage(ctx, "cs", "alice", r)
			require.NoError(t, err, "%s %s", r.Op, r.Name)
		}
		v, err := sets.Validate(ctx, "cs", "alice")
		require.NoError(t, err)
		require.True(t, v.Passed, "%+v", v.Violations)
		_, err = sets.Promote(ctx, "cs", "alice")
		require.NoError(t, err)
	}
	update := func(name string, n int) {
		t.Helper()
		for i := range n {
			_, err := arts.Update(ctx, as("alice"), workspace.ByName(name), workspace.ArtifactChange{Content: fmt.Appendf(nil, "%s later %d", name, i)})
			require.NoError(t, err)
		}
	}
	// a v2, e v1 and c2 v1 are promoted; then newer versions are written.
	promote(shadow.StageRequest{Op: shadow.OpUpdate, Name: "a", Content: []byte("a promoted")},
		shadow.StageRequest{Op: shadow.OpCreate, Name: "e", Content: []byte("e promoted")},
		shadow.StageRequest{Op: shadow.OpRename, Name: "c", NewName: "c2"})
	_, err := store.Pin(ctx, as("alice"), "a", 2)
	require.ErrorIs(t, err, workspace.ErrForbidden, "the policy forbids alice's pins")
	update("a", 3)
	update("e", 2)
	update("c2", 2)
	// The name begun again: a v6 is promoted, then a v7 written.
	promote(shadow.StageRequest{Op: shadow.OpUpdate, Name: "a", Content: []byte("a promoted again")})
	update("a", 1)

	// gc needs admin.compact of a caller with a principal: root's.
	r, err := store.GC(workspace.AsActor(ctx, "root"), workspace.GCPolicy{Actor: "root", KeepVersions: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(4+1+1), r.Versions.Count, "a v1, v3-v5; e v2; c2 v2")
	want := map[string]map[int64]string{
		"a":  {2: "a promoted", 6: "a promoted again", 7: "a later 0"},
		"e":  {1: "e promoted", 3: "e later 1"},
		"c2": {1: "c1", 3: "c2 later 1"},
	}
	for name, vs := range want {
		got, err := arts.Versions(ctx, workspace.ByName(name))
		require.NoError(t, err)
		var kept []int64
		for _, v := range got {
			kept = append(kept, v.Version)
		}
		assert.Len(t, kept, len(vs), "%s keeps %v", name, kept)
		for v, content := range vs {
			a, err := arts.Get(ctx, workspace.ArtifactRef{Name: name, Version: v})
			if assert.NoError(t, err, "%s version %d", name, v) {
				assert.Equal(t, content, string(a.Content))
			}
		}
	}
	_, err = arts.Get(ctx, workspace.ArtifactRef{Name: "a", Version: 3})
	require.ErrorIs(t, err, workspace.ErrNotFound, "a version no rule keeps goes")
}
