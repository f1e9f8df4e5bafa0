package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
)

// The memo answers a store's hinted reads only while every commit since it
// learned was the store's own, and its answers equal reads of the rows:
// after reads, after writes of heads (labels, times) and leases, after
// another store's commit (which it must notice), and never after a
// savepoint was rolled back or a commit that appended no event.
func TestMemoAnswersAsTheRowsAreAndOnlyWhileTheCommitsAreItsOwn(t *testing.T) {
	ctx := context.Background()
	path := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	st, other := openStore(t, path), openStore(t, path)
	at := now().Add(123 * time.Nanosecond) // not a stored time: the memo must store it as a read returns it
	art := func(id, name string, v int64, labels map[string]string) workspace.Artifact {
		return workspace.Artifact{ID: id, Version: v, Name: name, Kind: "plan", Owner: "ann", ContentType: "text/plain",
			SHA256: hashOf(name), Size: int64(len(name)), Labels: labels, CreatedAt: at, CreatedBy: "ann", UpdatedAt: at, UpdatedBy: "ann",
			Content: []byte(name)}
	}
	event := func(tx driver.Tx) error {
		_, err := tx.AppendEvents(ctx, []workspace.Event{{Time: at, Actor: "ann", Type: "artifact.updated",
			Subject: workspace.Subject{Kind: workspace.SubjectArtifact, ID: "a1", Name: "one"}, Version: 1}})
		return err
	}
	hints := []driver.ReadHint{
		{Artifact: workspace.ArtifactRef{Name: "one"}},
		{Artifact: workspace.ArtifactRef{ID: "a2"}},
	}
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		for _, a := range []workspace.Artifact{art("a1", "one", 1, map[string]string{"k": "v"}), art("a2", "two", 1, nil)} {
			if err := tx.PutArtifact(ctx, a, a.Content); err != nil {
				return err
			}
		}
		if err := tx.PutLease(ctx, workspace.Lease{Resource: "artifact:two", Owner: "bob", Token: 1, AcquiredAt: at, ExpiresAt: at.Add(time.Hour)}); err != nil {
			return err
		}
		return event(tx)
	}))
	assert.Empty(t, st.memo.byID, "what it wrote without reading it first is not known")

	// check runs a hinted transaction: what came from the memo (fromMemo,
	// as wanted) must be what the rows say; then fn, and an event.
	check := func(wantMemo bool, fn func(tx driver.Tx) error) {
		t.Helper()
		require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
			wt := tx.(*writeTx)
			assert.Equal(t, wantMemo, wt.memoed == len(hints), "answered from the memo")
			for _, ref := range []workspace.ArtifactRef{{Name: "one"}, {ID: "a2"}} {
				got, err := tx.Artifact(ctx, ref)
				require.NoError(t, err)
				row, _ := wt.headRow(ctx, ref, qArtifactLeaseByID, qArtifactLeaseByName)
				want, wantLease, err := scanArtifactLease(row)
				require.NoError(t, err)
				require.Equal(t, want, got, "%+v", ref)
				require.Equal(t, wantLease, wt.leaseRead, "%+v", ref)
			}
			if fn != nil {
				if err := fn(tx); err != nil {
					return err
				}
			}
			return event(tx)
		}))
	}
	check(false, nil) // learns both, read from the rows
	check(true, func(tx driver.Tx) error {
		// A new head with other labels, and the other's lease taken over.
		if err := tx.PutArtifact(ctx, art("a1", "one", 2, map[string]string{"k": "w"}), nil); err != nil {
			return err
		}
		return tx.PutLease(ctx, workspace.Lease{Resource: "artifact:two", Owner: "cy", Token: 2, AcquiredAt: at, ExpiresAt: at.Add(time.Minute)})
	})
	check(true, func(tx driver.Tx) error {
		return tx.PutArtifact(ctx, art("a1", "one", 3, nil), []byte("three")) // labels gone
	})
	check(true, nil)

	// Another store commits: the head moved, the memo is not used, and
	// not before two commits found the head where this store left it.
	require.NoError(t, other.Update(ctx, func(tx driver.Tx) error {
		if err := tx.PutArtifact(ctx, art("a1", "one", 4, nil), []byte("four")); err != nil {
			return err
		}
		return event(tx)
	}))
	check(false, nil)
	assert.Equal(t, 2, st.memo.rule.Need())
	check(false, nil)
	check(false, nil)
	check(true, nil)
	assert.Equal(t, 1, st.memo.rule.Need(), "a check that held halves it")

	// A rolled-back savepoint: the memo forgets.
	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		if _, err := tx.Artifact(ctx, workspace.ArtifactRef{Name: "one"}); err != nil {
			return err
		}
		sp := tx.(driver.Savepointer)
		if err := sp.Savepoint(ctx); err != nil {
			return err
		}
		if err := tx.PutArtifact(ctx, art("a1", "one", 5, nil), nil); err != nil {
			return err
		}
		if err := sp.RollbackSavepoint(ctx); err != nil {
			return err
		}
		return event(tx)
	}))
	assert.False(t, st.memo.valid, "a savepoint rolled back")
	check(false, nil)

	check(true, nil)

	// A commit that appended no event and did not check the head (no
	// hints) leaves no head to check against; one that checked it, and
	// so changed nothing, keeps the memo.
	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		_, err := tx.Artifact(ctx, workspace.ArtifactRef{Name: "one"})
		return err
	}))
	assert.True(t, st.memo.valid, "a commit without an event, the head checked")
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		_, err := tx.Artifact(ctx, workspace.ArtifactRef{Name: "one"})
		return err
	}))
	assert.False(t, st.memo.valid, "a commit without an event, the head not read")
	check(false, nil)

	// Renamed and deleted artifacts leave the memo.
	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		if err := tx.PutArtifact(ctx, art("a1", "uno", 5, nil), []byte("uno")); err != nil {
			return err
		}
		if err := tx.DeleteArtifact(ctx, "a2"); err != nil {
			return err
		}
		return event(tx)
	}))
	_, early := st.memo.known(hints)
	assert.Empty(t, early, "neither is known: one was renamed, two deleted")
	_, early = st.memo.known([]driver.ReadHint{{Artifact: workspace.ArtifactRef{ID: "a1"}}})
	assert.Empty(t, early, "a rename drops the lease known under the old name")
}

// Through the engine, two stores on one file take turns on an artifact: a
// condition or a lock the other store's commit changed is seen, whatever
// the memo of the store that wrote before holds.
func TestMemoSeesTheOtherStoresCommits(t *testing.T) {
	ctx := context.Background()
	path := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	a := engine.New(openStore(t, path), workspace.Options{})
	b := engine.New(openStore(t, path), workspace.Options{})
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	ref := workspace.ArtifactRef{Name: "plan"}
	update := func(ws *workspace.Workspace, actor string, ifVersion int64) (workspace.Artifact, error) {
		return ws.Artifacts().Update(ctx, workspace.Write{Actor: actor, IfVersion: ifVersion}, ref,
			workspace.ArtifactChange{Content: []byte(time.Now().String())})
	}
	created, err := a.Artifacts().Create(ctx, workspace.Write{Actor: "ann"}, workspace.NewArtifact{Name: "plan", Kind: "plan", Content: []byte("v1")})
	require.NoError(t, err)
	v := created.Version
	for i := range 20 {
		got, err := update(a, "ann", v) // a learns the head it wrote
		require.NoError(t, err, "round %d", i)
		got, err = update(b, "bob", got.Version) // b moves it on
		require.NoError(t, err, "round %d", i)
		_, err = update(a, "ann", got.Version-1) // what a wrote last is stale now
		require.ErrorIs(t, err, workspace.ErrConflict, "round %d", i)
		v = got.Version
	}
	l, err := b.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "artifact:plan", Owner: "bob", TTL: time.Minute})
	require.NoError(t, err)
	_, err = update(a, "ann", v)
	require.ErrorIs(t, err, workspace.ErrLocked, "bob's lock, taken on another store")
	require.NoError(t, b.Locks().Release(ctx, l))
	got, err := update(a, "ann", v)
	require.NoError(t, err)
	assert.Equal(t, v+1, got.Version)
}
