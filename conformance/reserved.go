package conformance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/internal/reserve"
	"github.com/agentspace/agentspace/workspace"
)

// The suite's own reserved kinds, beside those of the layers it links
// (pins, change sets, shadows, worktrees, a server's tokens): one owned,
// readable by anyone; one sealed, like the tokens.
var (
	ownedKey = reserve.Register(reserve.Entry{Kind: "conformance-owned",
		Owner: "the conformance suite's owned records"})
	sealedKey = reserve.Register(reserve.Entry{Kind: "conformance-sealed",
		Owner: "the conformance suite's sealed records", Sealed: true})
)

// testReservedKinds: a plain note write of any reserved kind, alone or in
// a batch, is refused with a *ForbiddenError and writes nothing, not even
// an event; a sealed kind is not read as a note; listings of every kind
// leave reserved kinds out; the owner's key writes them, but only where
// the store is (a grant does not cross a network).
func testReservedKinds(t *testing.T, h Harness) {
	ctx := testCtx(t)
	dsn, ws := fresh(t, h)
	_, err := ws.Notes().Put(ctx, as("alice"), workspace.NotePut{Kind: "decision", Key: "plain", Body: "x"})
	require.NoError(t, err)
	head := headOf(t, ws)

	kinds := reserve.Kinds()
	require.Contains(t, kinds, "pin")
	require.Contains(t, kinds, "conformance-sealed")
	for _, kind := range kinds {
		var fe *workspace.ForbiddenError
		_, err := ws.Notes().Put(ctx, as("mallory"), workspace.NotePut{Kind: kind, Key: "planted", Body: `{"actor":"root","role":"admin"}`})
		require.ErrorAs(t, err, &fe, "put %s", kind)
		assert.ErrorIs(t, err, workspace.ErrForbidden)
		assert.Equal(t, kind, fe.Object)
		err = ws.Notes().Delete(ctx, as("mallory"), kind, "planted")
		assert.ErrorIs(t, err, workspace.ErrForbidden, "delete %s", kind)
		_, err = ws.Commit(ctx, workspace.Batch{Actor: "mallory", Ops: []workspace.Op{
			workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: "cover.md", Content: []byte("x")}},
			workspace.PutNoteOp{Note: workspace.NotePut{Kind: kind, Key: "planted", Body: "{}"}},
		}})
		var be *workspace.BatchError
		require.ErrorAs(t, err, &be, "batch with %s", kind)
		assert.Equal(t, 1, be.Index)
		assert.ErrorIs(t, err, workspace.ErrForbidden)
	}
	assert.Equal(t, head, headOf(t, ws), "a refused write appends nothing")
	_, err = ws.Artifacts().Get(ctx, workspace.ByName("cover.md"))
	assert.ErrorIs(t, err, workspace.ErrNotFound, "nothing of a refused batch is written")

	// The owners write their records where the store is.
	store := open(t, storeDSN(h, dsn))
	owned, err := store.Notes().Put(ownedKey.Grant(ctx), as("owner"), workspace.NotePut{Kind: "conformance-owned", Key: "k", Body: "owned"})
	require.NoError(t, err)
	_, err = store.Notes().Put(sealedKey.Grant(ctx), as("owner"), workspace.NotePut{Kind: "conformance-sealed", Key: "k", Body: "secret"})
	require.NoError(t, err)

	// Through the handle under test: owned records read, sealed ones not.
	got, err := ws.Notes().Get(ctx, "conformance-owned", "k")
	require.NoError(t, err)
	assert.Equal(t, owned.Body, got.Body)
	_, err = ws.Notes().Get(ctx, "conformance-sealed", "k")
	assert.ErrorIs(t, err, workspace.ErrForbidden)
	_, err = ws.Notes().List(ctx, workspace.NoteFilter{Kind: "conformance-sealed"})
	assert.ErrorIs(t, err, workspace.ErrForbidden)
	page, err := ws.Notes().List(ctx, workspace.NoteFilter{Kind: "conformance-owned"})
	require.NoError(t, err)
	assert.Len(t, page.Notes, 1)
	page, err = ws.Notes().List(ctx, workspace.NoteFilter{})
	require.NoError(t, err)
	for _, n := range page.Notes {
		assert.NotContains(t, kinds, n.Kind, "a listing of every kind leaves reserved kinds out")
	}
	assert.Len(t, page.Notes, 1, "only the plain note")

	// A grant is a value in this process: through a server it is not
	// carried, and the write is refused there as any other.
	_, err = ws.Notes().Put(ownedKey.Grant(ctx), as("owner"), workspace.NotePut{Kind: "conformance-owned", Key: "k2", Body: "x"})
	if storeDSN(h, dsn) != dsn {
		assert.ErrorIs(t, err, workspace.ErrForbidden, "a grant does not cross the wire")
	} else {
		assert.NoError(t, err)
		sealed, err := ws.Notes().Get(sealedKey.Grant(ctx), "conformance-sealed", "k")
		require.NoError(t, err)
		assert.Equal(t, "secret", sealed.Body)
	}
}

// testPrincipalActsOnlyAsItself: a write whose context carries a principal
// (a server's token) cannot name another actor, on any write path; nothing
// is written, not even a denied event. It runs on the store itself: a
// principal is a value in this process, and through a server the token is
// the principal.
func testPrincipalActsOnlyAsItself(t *testing.T, h Harness) {
	dsn, _ := fresh(t, h)
	ws := open(t, storeDSN(h, dsn))
	ctx := testCtx(t)
	task, err := ws.Tasks().Create(ctx, as("alice"), workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "alice"})
	require.NoError(t, err)
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "r", Owner: "alice", TTL: time.Hour})
	require.NoError(t, err)
	head := headOf(t, ws)

	bob := workspace.WithPrincipal(ctx, workspace.Principal{Actor: "bob", Roles: []string{"admin"}, Bound: true})
	alice := as("alice")
	writes := map[string]func() error{
		"artifact create": func() error {
			_, err := ws.Artifacts().Create(bob, alice, workspace.NewArtifact{Name: "a.md", Content: []byte("x")})
			return err
		},
		"note put": func() error {
			_, err := ws.Notes().Put(bob, alice, workspace.NotePut{Kind: "decision", Key: "k"})
			return err
		},
		"commit": func() error {
			_, err := ws.Commit(bob, workspace.Batch{Actor: "alice", Ops: []workspace.Op{workspace.CreateTaskOp{Task: workspace.NewTask{Title: "x"}}}})
			return err
		},
		"claim": func() error {
			_, err := ws.Tasks().Claim(bob, workspace.ClaimRequest{Actor: "alice"})
			return err
		},
		"heartbeat": func() error {
			_, err := ws.Tasks().Heartbeat(bob, alice, task.ID, time.Minute)
			return err
		},
		"complete": func() error {
			_, err := ws.Tasks().Complete(bob, alice, task.ID, workspace.TaskResult{Summary: "x"})
			return err
		},
		"lock acquire": func() error {
			_, err := ws.Locks().Acquire(bob, workspace.AcquireRequest{Resource: "s", Owner: "alice", TTL: time.Minute})
			return err
		},
		"lock force release": func() error { return ws.Locks().ForceRelease(bob, alice, "r") },
	}
	for name, write := range writes {
		var fe *workspace.ForbiddenError
		require.ErrorAs(t, write(), &fe, name)
		assert.Equal(t, "bob", fe.Actor, name)
		assert.Equal(t, "alice", fe.Object, name)
	}
	assert.Equal(t, head, headOf(t, ws), "nothing was written")
	_, err = ws.Notes().Put(bob, as("bob"), workspace.NotePut{Kind: "decision", Key: "own"})
	assert.NoError(t, err, "a principal writes as itself")
}
