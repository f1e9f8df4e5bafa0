package jsonstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Savepoint tests drive the store's Tx directly, as the engine's group
// commit does, on a real directory; what a rollback undid must be gone both
// from reads inside the transaction and from what the commit wrote.

const (
	spArtA = "0190a1b2-0000-7000-8000-00000000000a"
	spArtB = "0190a1b2-0000-7000-8000-00000000000b"
	spTask = "0190a1b2-0000-7000-8000-0000000000c1"
)

func spSavepointer(t *testing.T, tx driver.Tx) driver.Savepointer {
	t.Helper()
	sp, ok := tx.(driver.Savepointer)
	require.True(t, ok, "the json write transaction takes savepoints")
	return sp
}

// spArtifact is version v of artifact id named name holding content.
func spArtifact(now time.Time, id, name string, v int64, content string) (workspace.Artifact, []byte) {
	sum := sha256.Sum256([]byte(content))
	return workspace.Artifact{
		ID: id, Name: name, Version: v, Kind: "output", Owner: "a", ContentType: "text/plain",
		SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)),
		CreatedAt: now, CreatedBy: "a", UpdatedAt: now, UpdatedBy: "a",
	}, []byte(content)
}

func spNote(now time.Time, key, body string) workspace.Note {
	return workspace.Note{Kind: "decision", Key: key, Body: body, Version: 1, Author: "a", UpdatedBy: "a", CreatedAt: now, UpdatedAt: now}
}

func spEvent(now time.Time, name string) workspace.Event {
	return workspace.Event{Time: now, Actor: "a", Type: workspace.EventNotePut, Subject: workspace.Subject{Kind: "note", ID: "decision/" + name, Name: name}, Version: 1}
}

// seedStore commits artifact A ("a.md", "v1"), note "kept" and one event.
func seedStore(t *testing.T, s *store) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.Update(ctx, func(tx driver.Tx) error {
		a, content := spArtifact(tx.Now(), spArtA, "a.md", 1, "v1")
		if err := tx.PutArtifact(ctx, a, content); err != nil {
			return err
		}
		if err := tx.PutNote(ctx, spNote(tx.Now(), "kept", "seed")); err != nil {
			return err
		}
		_, err := tx.AppendEvents(ctx, []workspace.Event{spEvent(tx.Now(), "kept")})
		return err
	}))
}

// snapshot is what a test compares before and after a rollback.
type snapshot struct {
	artA      workspace.Artifact
	artAErr   error
	artByName error
	artB      error
	blobB     error
	task      error
	noteKept  workspace.Note
	noteNew   error
	lease     error
	idem      error
	head      int64
	floor     int64
	counts    driver.Counts
	names     []string
}

func takeSnapshot(t *testing.T, tx driver.ReadTx, now time.Time) snapshot {
	t.Helper()
	ctx := context.Background()
	var sn snapshot
	sn.artA, sn.artAErr = tx.Artifact(ctx, workspace.ArtifactRef{ID: spArtA})
	_, sn.artByName = tx.Artifact(ctx, workspace.ArtifactRef{Name: "renamed.md"})
	_, sn.artB = tx.Artifact(ctx, workspace.ArtifactRef{ID: spArtB})
	b, _ := spArtifact(now, spArtB, "b.md", 1, "b")
	_, sn.blobB = tx.Content(ctx, spArtB, b.Version, b.SHA256)
	_, sn.task = tx.Task(ctx, spTask)
	var err error
	sn.noteKept, err = tx.Note(ctx, "decision", "kept")
	require.NoError(t, err)
	_, sn.noteNew = tx.Note(ctx, "decision", "new")
	_, sn.lease = tx.Lease(ctx, "file:x")
	_, sn.idem = tx.Idempotent(ctx, "key", now)
	sn.head, err = tx.Head(ctx)
	require.NoError(t, err)
	sn.floor, err = tx.Floor(ctx)
	require.NoError(t, err)
	sn.counts, err = tx.Counts(ctx)
	require.NoError(t, err)
	arts, err := tx.ListArtifacts(ctx, workspace.ArtifactFilter{})
	require.NoError(t, err)
	for _, a := range arts {
		sn.names = append(sn.names, a.Name)
	}
	return sn
}

// writeEverything makes one write of every kind the store takes.
func writeEverything(t *testing.T, tx driver.Tx) {
	t.Helper()
	ctx := context.Background()
	now := tx.Now()
	a, content := spArtifact(now, spArtA, "renamed.md", 2, "v2")
	require.NoError(t, tx.PutArtifact(ctx, a, content))
	b, content := spArtifact(now, spArtB, "b.md", 1, "b")
	require.NoError(t, tx.PutArtifact(ctx, b, content))
	require.NoError(t, tx.DeleteArtifact(ctx, spArtB))
	require.NoError(t, tx.PutTask(ctx, workspace.Task{ID: spTask, Title: "t", Status: workspace.TaskPending, Version: 1, CreatedAt: now, UpdatedAt: now}))
	require.NoError(t, tx.DeleteNote(ctx, "decision", "kept"))
	require.NoError(t, tx.PutNote(ctx, spNote(now, "kept", "changed")))
	require.NoError(t, tx.PutNote(ctx, spNote(now, "new", "n")))
	require.NoError(t, tx.PutLease(ctx, workspace.Lease{Resource: "file:x", Owner: "a", Token: 1, ExpiresAt: now.Add(time.Hour)}))
	require.NoError(t, tx.PruneIdempotent(ctx, now))
	first, err := tx.AppendEvents(ctx, []workspace.Event{spEvent(now, "new"), spEvent(now, "new")})
	require.NoError(t, err)
	assert.Equal(t, int64(2), first)
	require.NoError(t, tx.CompactEvents(ctx, 2))
	require.NoError(t, tx.PutIdempotent(ctx, "key", []byte(`{}`), now.Add(time.Hour)))
}

func TestRollbackSavepointUndoesEveryKindOfWrite(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	s := openTestStore(t, dir)
	seedStore(t, s)
	logBefore, err := os.ReadFile(filepath.Join(dir, eventsFile))
	require.NoError(t, err)

	var before snapshot
	require.NoError(t, s.Update(ctx, func(tx driver.Tx) error {
		sp := spSavepointer(t, tx)
		before = takeSnapshot(t, tx, tx.Now())
		require.NoError(t, sp.Savepoint(ctx))
		writeEverything(t, tx)
		during := takeSnapshot(t, tx, tx.Now())
		require.NotEqual(t, before, during, "the writes are visible inside the savepoint")
		require.NoError(t, sp.RollbackSavepoint(ctx))
		assert.Equal(t, before, takeSnapshot(t, tx, tx.Now()), "reads after the rollback see the state before the savepoint")
		return nil
	}))
	assert.Equal(t, "v1", readFile(t, dir, "artifacts/a.md"))
	assert.Equal(t, string(logBefore), readFile(t, dir, eventsFile), "a transaction with everything rolled back appends nothing")
	for _, p := range []string{"artifacts/renamed.md", "artifacts/b.md", "blobs/" + spArtB, "meta/artifacts/" + spArtB + ".json", versionsPath(spArtB),
		taskPath(spTask), notePath(noteKey{"decision", "new"}), leasePath("file:x"), idemPath("key"), floorFile} {
		_, err := os.Lstat(filepath.Join(dir, p))
		assert.ErrorIs(t, err, os.ErrNotExist, p)
	}

	other := openTestStore(t, dir) // reads the tree afresh
	require.NoError(t, other.View(ctx, func(tx driver.ReadTx) error {
		assert.Equal(t, before, takeSnapshot(t, tx, tx.Now()))
		return nil
	}))
}

func TestReleasedSavepointKeepsItsWrites(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	s := openTestStore(t, dir)
	seedStore(t, s)

	var inside snapshot
	require.NoError(t, s.Update(ctx, func(tx driver.Tx) error {
		sp := spSavepointer(t, tx)
		require.NoError(t, sp.Savepoint(ctx))
		writeEverything(t, tx)
		require.NoError(t, sp.ReleaseSavepoint(ctx))
		inside = takeSnapshot(t, tx, tx.Now())
		return nil
	}))
	assert.Equal(t, []string{"renamed.md"}, inside.names)
	assert.Equal(t, int64(3), inside.head)
	assert.Equal(t, int64(2), inside.floor)
	assert.NoError(t, inside.task)
	assert.NoError(t, inside.idem)
	assert.Equal(t, "v2", readFile(t, dir, "artifacts/renamed.md"))

	other := openTestStore(t, dir)
	require.NoError(t, other.View(ctx, func(tx driver.ReadTx) error {
		got := takeSnapshot(t, tx, tx.Now())
		assert.Equal(t, inside.names, got.names)
		assert.Equal(t, inside.head, got.head)
		assert.Equal(t, inside.floor, got.floor)
		assert.Equal(t, inside.counts, got.counts)
		assert.Equal(t, "changed", got.noteKept.Body)
		assert.NoError(t, got.task)
		assert.NoError(t, got.lease)
		assert.NoError(t, got.idem)
		return nil
	}))
}

func TestNestedSavepointsUndoOnlyTheirOwnWrites(t *testing.T) {
	ctx := context.Background()
	note := func(tx driver.Tx, key string) {
		require.NoError(t, tx.PutNote(ctx, spNote(tx.Now(), key, key)))
	}
	has := func(tx driver.ReadTx, key string) bool {
		_, err := tx.Note(ctx, "decision", key)
		return err == nil
	}
	cases := []struct {
		name string
		// run writes "outer" in the outer savepoint and "inner" in the
		// inner one, ending each as the case says.
		innerRollback, outerRollback bool
		want                         []string
	}{
		{name: "both released", want: []string{"base", "outer", "inner", "after"}},
		{name: "inner rolled back", innerRollback: true, want: []string{"base", "outer", "after"}},
		{name: "outer rolled back after inner released", outerRollback: true, want: []string{"base", "after"}},
		{name: "both rolled back", innerRollback: true, outerRollback: true, want: []string{"base", "after"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ws")
			s := openTestStore(t, dir)
			require.NoError(t, s.Update(ctx, func(tx driver.Tx) error {
				sp := spSavepointer(t, tx)
				note(tx, "base")
				require.NoError(t, sp.Savepoint(ctx))
				note(tx, "outer")
				require.NoError(t, sp.Savepoint(ctx))
				note(tx, "inner")
				first, err := tx.AppendEvents(ctx, []workspace.Event{spEvent(tx.Now(), "inner")})
				require.NoError(t, err)
				assert.Equal(t, int64(1), first)
				if c.innerRollback {
					require.NoError(t, sp.RollbackSavepoint(ctx))
					assert.False(t, has(tx, "inner"))
				} else {
					require.NoError(t, sp.ReleaseSavepoint(ctx))
				}
				assert.True(t, has(tx, "outer"), "the outer savepoint's write survives the inner one's end")
				if c.outerRollback {
					require.NoError(t, sp.RollbackSavepoint(ctx))
				} else {
					require.NoError(t, sp.ReleaseSavepoint(ctx))
				}
				note(tx, "after")
				return nil
			}))
			other := openTestStore(t, dir)
			require.NoError(t, other.View(ctx, func(tx driver.ReadTx) error {
				var got []string
				for _, k := range []string{"base", "outer", "inner", "after"} {
					if has(tx, k) {
						got = append(got, k)
					}
				}
				assert.Equal(t, c.want, got)
				head, err := tx.Head(ctx)
				require.NoError(t, err)
				want := int64(0)
				if !c.innerRollback && !c.outerRollback {
					want = 1
				}
				assert.Equal(t, want, head, "the inner event is kept only if no savepoint holding it was rolled back")
				return nil
			}))
		})
	}
}

func TestEventsAppendedAfterARollbackTakeTheFreedSeqs(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	s := openTestStore(t, dir)
	seedStore(t, s)
	require.NoError(t, s.Update(ctx, func(tx driver.Tx) error {
		sp := spSavepointer(t, tx)
		require.NoError(t, sp.Savepoint(ctx))
		first, err := tx.AppendEvents(ctx, []workspace.Event{spEvent(tx.Now(), "gone"), spEvent(tx.Now(), "gone")})
		require.NoError(t, err)
		assert.Equal(t, int64(2), first)
		require.NoError(t, sp.RollbackSavepoint(ctx))
		first, err = tx.AppendEvents(ctx, []workspace.Event{spEvent(tx.Now(), "kept")})
		require.NoError(t, err)
		assert.Equal(t, int64(2), first, "the rolled-back seqs are free again")
		return nil
	}))
	other := openTestStore(t, dir)
	require.NoError(t, other.View(ctx, func(tx driver.ReadTx) error {
		evs, err := tx.Events(ctx, workspace.EventQuery{})
		require.NoError(t, err)
		var names []string
		for _, e := range evs {
			assert.Equal(t, int64(len(names)+1), e.Seq)
			names = append(names, e.Subject.Name)
		}
		assert.Equal(t, []string{"kept", "kept"}, names, "the seed's event, then the kept one; nothing of the rolled-back append")
		return nil
	}))
}

func TestSavepointEndWithoutSavepointFails(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, filepath.Join(t.TempDir(), "ws"))
	require.NoError(t, s.Update(ctx, func(tx driver.Tx) error {
		sp := spSavepointer(t, tx)
		assert.ErrorIs(t, sp.RollbackSavepoint(ctx), errNoSavepoint)
		assert.ErrorIs(t, sp.ReleaseSavepoint(ctx), errNoSavepoint)
		require.NoError(t, sp.Savepoint(ctx))
		require.NoError(t, sp.ReleaseSavepoint(ctx))
		assert.ErrorIs(t, sp.ReleaseSavepoint(ctx), errNoSavepoint, "each Savepoint is ended once")
		return nil
	}))
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	require.NoError(t, err)
	return string(data)
}
