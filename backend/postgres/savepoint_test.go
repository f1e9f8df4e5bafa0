package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// TestALateWriteErrorPastASavepointFailsTheTransaction runs two jobs of a
// group, each in its savepoint, as the committer does in isolate mode. Job
// 1's last write is queued and fails only when job 2's read sends it, with
// job 1's RELEASE and job 2's SAVEPOINT queued behind it, unrun. Rolling
// back "job 2's savepoint" would then undo job 1 (whose RELEASE never ran)
// and commit the rest, job 1 reported done and its note gone; or, had the
// batch run nothing, fail with 3B001. The rollback must fail instead, with
// the write's error, and so must the transaction: nothing is written.
func TestALateWriteErrorPastASavepointFailsTheTransaction(t *testing.T) {
	st, _, _, _ := earlyStore(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var readErr, rollbackErr error
	err := st.Update(ctx, func(tx driver.Tx) error {
		wt := tx.(*writeTx)
		// Job 1: a note, then a statement the server refuses (queued).
		require.NoError(t, wt.Savepoint(ctx))
		require.NoError(t, tx.PutNote(ctx, workspace.Note{Kind: "k", Key: "job1", Body: "v", Version: 1,
			Author: "ann", UpdatedBy: "ann", CreatedAt: tx.Now(), UpdatedAt: tx.Now()}))
		_, _ = wt.pl.Exec(ctx, "SELECT 1/0")
		require.NoError(t, wt.ReleaseSavepoint(ctx))
		// Job 2: its read sends all of that.
		require.NoError(t, wt.Savepoint(ctx))
		_, readErr = tx.Note(ctx, "k", "other")
		rollbackErr = wt.RollbackSavepoint(ctx)
		return nil // the group goes on with its other jobs
	})
	require.Error(t, readErr)
	assert.ErrorContains(t, readErr, "22012", "the division's error reaches job 2's read")
	require.Error(t, rollbackErr, "no savepoint of job 2 exists to roll back to")
	assert.ErrorContains(t, rollbackErr, "22012")
	require.Error(t, err, "the transaction fails: job 1's RELEASE never ran")
	assert.ErrorContains(t, err, "22012")
	var n workspace.Note
	verr := st.View(ctx, func(tx driver.ReadTx) error {
		var err error
		n, err = tx.Note(ctx, "k", "job1")
		return err
	})
	assert.ErrorIs(t, verr, workspace.ErrNotFound, "nothing was written: %+v", n)
}

// TestACallerThatGivesUpMidGroupBreaksNoOtherJob runs two jobs of a group
// in savepoints, the second for a caller whose context has ended: its
// read sends the first job's writes and its own SAVEPOINT. Sent under the
// caller's context nothing would go (pgx refuses a done context), the
// savepoint would not exist, and the group would fail with 3B001 (the
// failover test's "known defect", at a crash, when waiting writers give
// up). Sends run under the transaction's context: both jobs commit.
func TestACallerThatGivesUpMidGroupBreaksNoOtherJob(t *testing.T) {
	st, _, _, _ := earlyStore(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gone, giveUp := context.WithCancel(ctx)
	giveUp()
	note := func(tx driver.Tx, key string) workspace.Note {
		return workspace.Note{Kind: "k", Key: key, Body: "v", Version: 1, Author: "ann", UpdatedBy: "ann", CreatedAt: tx.Now(), UpdatedAt: tx.Now()}
	}
	err := st.Update(ctx, func(tx driver.Tx) error {
		wt := tx.(*writeTx)
		require.NoError(t, wt.Savepoint(ctx))
		require.NoError(t, tx.PutNote(ctx, note(tx, "a")))
		require.NoError(t, wt.ReleaseSavepoint(ctx))
		require.NoError(t, wt.Savepoint(gone))
		_, err := tx.Note(gone, "k", "b")
		require.ErrorIs(t, err, workspace.ErrNotFound, "the read ran, for the transaction")
		require.NoError(t, tx.PutNote(gone, note(tx, "b")))
		return wt.ReleaseSavepoint(gone)
	})
	require.NoError(t, err)
	for _, key := range []string{"a", "b"} {
		require.NoError(t, st.View(ctx, func(tx driver.ReadTx) error {
			_, err := tx.Note(ctx, "k", key)
			return err
		}), "note %s committed", key)
	}
}
