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
)

// A group's hinted artifacts are read ahead, and every answer a write
// transaction gives afterwards equals a read of the rows at that moment:
// a read ahead is taken once, and a write of the artifact (by ID, by name,
// a rename, a delete) or of its lease, made before its read, drops it.
func TestReadAheadAnswersAsTheRowsAre(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	at := now()
	art := func(id, name string, v int64) workspace.Artifact {
		return workspace.Artifact{ID: id, Version: v, Name: name, Kind: "plan", Owner: "ann", ContentType: "text/plain",
			SHA256: hashOf(name), Size: int64(len(name)), CreatedAt: at, CreatedBy: "ann", UpdatedAt: at, UpdatedBy: "ann"}
	}
	require.NoError(t, st.Update(ctx, func(tx driver.Tx) error {
		for _, a := range []workspace.Artifact{art("a1", "one", 1), art("a2", "two", 1), art("a3", "three", 1), art("a4", "four", 1)} {
			if err := tx.PutArtifact(ctx, a, []byte(a.Name)); err != nil {
				return err
			}
		}
		return tx.PutLease(ctx, workspace.Lease{Resource: "artifact:three", Owner: "ann", Token: 1, AcquiredAt: at, ExpiresAt: at.Add(time.Hour)})
	}))

	hints := []driver.ReadHint{
		{Artifact: workspace.ArtifactRef{Name: "one"}},
		{Artifact: workspace.ArtifactRef{Name: "two"}},
		{Artifact: workspace.ArtifactRef{ID: "a3"}},
		{Artifact: workspace.ArtifactRef{Name: "four"}},
		{Artifact: workspace.ArtifactRef{Name: "absent"}},
		{Artifact: workspace.ArtifactRef{Name: "later"}},
	}
	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		wt := tx.(*writeTx)
		require.Len(t, wt.readAhead, len(hints), "every hint read ahead")
		// same reads ref through the transaction and straight from the
		// rows, and wants the same answer, lease included.
		same := func(ref workspace.ArtifactRef) workspace.Artifact {
			t.Helper()
			got, err := tx.Artifact(ctx, ref)
			row, _ := wt.headRow(ctx, ref, qArtifactLeaseByID, qArtifactLeaseByName)
			want, wantLease, werr := scanArtifactLease(row)
			if werr != nil {
				require.ErrorIs(t, err, workspace.ErrNotFound, "%+v", ref)
				return got
			}
			require.NoError(t, err, "%+v", ref)
			require.Equal(t, want, got, "%+v", ref)
			require.Equal(t, wantLease, wt.leaseRead, "%+v", ref)
			return got
		}

		same(workspace.ArtifactRef{Name: "one"}) // taken as read ahead
		one := art("a1", "one", 2)
		require.NoError(t, tx.PutArtifact(ctx, one, []byte("one v2")))
		assert.Equal(t, int64(2), same(workspace.ArtifactRef{Name: "one"}).Version, "read again after its write")

		// Written before its read: by ID (found by name), then renamed.
		require.NoError(t, tx.PutArtifact(ctx, art("a2", "two", 2), []byte("two v2")))
		assert.Equal(t, int64(2), same(workspace.ArtifactRef{Name: "two"}).Version)
		require.NoError(t, tx.PutArtifact(ctx, art("a4", "renamed", 2), []byte("four v2")))
		same(workspace.ArtifactRef{Name: "four"}) // not found now

		// The lease of a3 changes before a3 is read.
		require.NoError(t, tx.PutLease(ctx, workspace.Lease{Resource: "artifact:three", Owner: "bob", Token: 2, AcquiredAt: at, ExpiresAt: at.Add(time.Hour)}))
		assert.Equal(t, "bob", func() string { same(workspace.ArtifactRef{ID: "a3"}); return wt.leaseRead.lease.Owner }())

		// Not found ahead; one of them created before it is read.
		same(workspace.ArtifactRef{Name: "absent"})
		require.NoError(t, tx.PutArtifact(ctx, art("a5", "later", 1), []byte("later")))
		assert.Equal(t, "a5", same(workspace.ArtifactRef{Name: "later"}).ID)

		// A deleted one, read by ID after its read ahead is gone.
		require.NoError(t, tx.DeleteArtifact(ctx, "a1"))
		same(workspace.ArtifactRef{ID: "a1"})
		assert.Empty(t, wt.readAhead, "every read ahead taken or dropped")
		return nil
	}))
}

// One hinted artifact is read when asked for, as without hints: a
// statement ahead would cost as much.
func TestReadAheadNeedsTwoArtifacts(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	hints := []driver.ReadHint{{Artifact: workspace.ArtifactRef{Name: "one"}}, {NoteKind: "decision", NoteKey: "k"}}
	require.NoError(t, st.UpdateHinted(ctx, hints, func(tx driver.Tx) error {
		assert.Empty(t, tx.(*writeTx).readAhead)
		return nil
	}))
}
