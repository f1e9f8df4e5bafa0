package jsonstore

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

func openTestStore(t *testing.T, dir string) *store {
	t.Helper()
	s, err := openStore(context.Background(), workspace.Config{Scheme: "json", Target: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestTwoHandlesInOneProcessExcludeEachOther(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	a, b := openTestStore(t, dir), openTestStore(t, dir)
	require.NoError(t, flock(a.lockf, true))
	err := syscall.Flock(int(b.lockf.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	assert.True(t, errors.Is(err, syscall.EWOULDBLOCK), "a second handle's shared lock must wait for the first's exclusive one: %v", err)
	require.NoError(t, funlock(a.lockf))
	require.NoError(t, syscall.Flock(int(b.lockf.Fd()), syscall.LOCK_SH|syscall.LOCK_NB))
	err = syscall.Flock(int(a.lockf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	assert.True(t, errors.Is(err, syscall.EWOULDBLOCK), "a writer must wait for another handle's reader: %v", err)
	require.NoError(t, funlock(b.lockf))
}

func TestNamesEqualButForCaseCollideOnCaseInsensitiveFileSystems(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	s := openTestStore(t, dir)
	s.foldCase = true // as probed on macOS or Windows volumes
	ws := workspace.New(s, workspace.Options{})
	ctx := context.Background()
	w := workspace.Write{Actor: "a"}
	_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "Plans/Auth.md", Content: []byte("x")})
	require.NoError(t, err)
	_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/auth.md", Content: []byte("y")})
	assert.ErrorIs(t, err, workspace.ErrAlreadyExists)
	require.NoError(t, ws.Artifacts().Delete(ctx, w, workspace.ByName("Plans/Auth.md")))
	_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/auth.md", Content: []byte("y")})
	assert.NoError(t, err, "the name is free once the other is deleted")
}

func TestReplayOfAnAppliedRecordChangesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	s := openTestStore(t, dir)
	ws := workspace.New(s, workspace.Options{})
	ctx := context.Background()
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewArtifact{Name: "a.md", Content: []byte("x")})
	require.NoError(t, err)
	// Commit a second write, then put its record back as if the writer
	// died before emptying the journal.
	var rec *record
	err = s.Update(ctx, func(wtx workspace.Tx) error {
		tx := wtx.(*tx)
		n := workspace.Note{Kind: "decision", Key: "k", Version: 1, Author: "a", UpdatedBy: "a", CreatedAt: tx.Now(), UpdatedAt: tx.Now()}
		if err := tx.PutNote(ctx, n); err != nil {
			return err
		}
		if _, err := tx.AppendEvents(ctx, []workspace.Event{{Time: tx.Now(), Actor: "a", Type: workspace.EventNotePut, Subject: workspace.Subject{Kind: "note", ID: "decision/k", Name: "k"}, Version: 1}}); err != nil {
			return err
		}
		var err error
		rec, err = tx.record()
		return err
	})
	require.NoError(t, err)
	require.NoError(t, s.writeJournal(rec))

	other := openTestStore(t, dir) // replays at open
	pending, err := other.journalPending()
	require.NoError(t, err)
	assert.False(t, pending)
	ws2 := workspace.New(other, workspace.Options{})
	page, err := ws2.Events().Read(ctx, workspace.EventQuery{})
	require.NoError(t, err)
	assert.Len(t, page.Events, 2, "events already in the log are not appended again")
	_, err = ws2.Notes().Get(ctx, "decision", "k")
	assert.NoError(t, err)
}
