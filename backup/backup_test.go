package backup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backup"
	"github.com/agentspace/agentspace/internal/durable"
	"github.com/agentspace/agentspace/workspace"
)

// syncs records the paths durable synced while fn ran, in order.
func syncs(t *testing.T, fn func()) []string {
	t.Helper()
	var mu sync.Mutex
	var got []string
	stop := durable.Observe(func(p string) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	})
	defer stop()
	fn()
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), got...)
}

func seeded(t *testing.T) *workspace.Workspace {
	t.Helper()
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	w := workspace.Write{Actor: "alice"}
	for _, n := range []string{"a.txt", "b.txt", "c.txt"} {
		_, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: n, Content: []byte("content of " + n)})
		require.NoError(t, err)
	}
	return ws
}

// TestEveryBackupIsSyncedWithItsDirectory: each format's file is synced
// before it gets its name, and the directory after the rename that gives
// it, so a power cut after Write returns cannot lose it; the file is 0600.
func TestEveryBackupIsSyncedWithItsDirectory(t *testing.T) {
	ctx := context.Background()
	ws := seeded(t)
	for _, archive := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "backups")
		var r backup.Result
		got := syncs(t, func() {
			var err error
			r, err = backup.Write(ctx, ws, dir, backup.Options{Archive: archive})
			require.NoError(t, err)
		})
		require.NotEmpty(t, got)
		base := filepath.Base(r.File)
		fileSynced := -1
		for i, p := range got {
			if p != dir && strings.Contains(filepath.Base(p), base) {
				fileSynced = i
			}
		}
		assert.GreaterOrEqual(t, fileSynced, 0, "archive=%v: the backup's file was synced: %q", archive, got)
		assert.Equal(t, dir, got[len(got)-1], "archive=%v: the directory is synced last, after the rename: %q", archive, got)
		fi, err := os.Stat(r.File)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "archive=%v", archive)
	}
}

// TestWorkspaceBackupSyncsTheCopy: a library user of Workspace.Backup gets
// a copy synced, in a synced directory, readable by its owner only.
func TestWorkspaceBackupSyncsTheCopy(t *testing.T) {
	ws := seeded(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "copy.db")
	got := syncs(t, func() {
		v, err := ws.Backup(context.Background(), path)
		require.NoError(t, err)
		require.True(t, v.OK())
	})
	assert.Equal(t, []string{path, dir}, got)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// TestRotateNewestAndRestore: Keep removes the oldest, Newest finds the
// last, and Restore brings the same records back into an empty store.
func TestRotateNewestAndRestore(t *testing.T) {
	ctx := context.Background()
	ws := seeded(t)
	dir := t.TempDir()
	_, err := backup.Newest(dir)
	var none *backup.NoBackupsError
	require.ErrorAs(t, err, &none)
	var last backup.Result
	for i := range 3 {
		last, err = backup.Write(ctx, ws, dir, backup.Options{Keep: 2, Archive: i == 1})
		require.NoError(t, err)
	}
	names, err := backup.List(dir)
	require.NoError(t, err)
	assert.Len(t, names, 2)
	assert.Len(t, last.Removed, 1)
	newest, err := backup.Newest(dir)
	require.NoError(t, err)
	assert.Equal(t, last.File, newest)
	_, err = backup.Write(ctx, ws, dir, backup.Options{Keep: -1})
	var inv *workspace.InvalidError
	assert.ErrorAs(t, err, &inv)

	for _, name := range names {
		src, err := backup.Open(ctx, filepath.Join(dir, name))
		require.NoError(t, err)
		into, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "restored.db"))
		require.NoError(t, err)
		rep, err := backup.Restore(ctx, into, src, backup.RestoreOptions{})
		require.NoError(t, err, name)
		require.NoError(t, src.Close())
		assert.True(t, rep.Verified.OK(), name)
		a, err := into.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "b.txt"})
		require.NoError(t, err, name)
		assert.Equal(t, "content of b.txt", string(a.Content))
		require.NoError(t, into.Close())
	}
	_, err = backup.Open(ctx, filepath.Join(dir, "missing"))
	assert.True(t, errors.Is(err, os.ErrNotExist))
}

// TestARestoreKeepsMessagesAndPausesButNotTokens: messages are sealed
// records (read only through Workspace.Messages), not credentials, so a
// restore without WithTokens keeps them, the inbox and its read cursor
// included; only token records wait for WithTokens.
func TestARestoreKeepsMessagesAndPausesButNotTokens(t *testing.T) {
	ctx := context.Background()
	ws := seeded(t)
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "bob"}, workspace.NewArtifact{Name: "bob.txt", Content: []byte("bob was here")})
	require.NoError(t, err)
	m, err := ws.Messages().Send(ctx, workspace.Write{Actor: "alice"}, workspace.NewMsg{To: []string{"bob"}, Body: "the plan is in a.txt", RequiresAck: true})
	require.NoError(t, err)
	_, err = ws.Messages().Send(ctx, workspace.Write{Actor: "alice"}, workspace.NewMsg{To: []string{"bob"}, Body: "and b.txt"})
	require.NoError(t, err)
	require.NoError(t, ws.Messages().MarkRead(ctx, "bob", m.ID))
	_, err = ws.Commit(ctx, workspace.Batch{Actor: "ops", Ops: []workspace.Op{workspace.PauseActorOp{Actor: "carol", Message: "review"}}})
	require.NoError(t, err)
	before, err := ws.Messages().Inbox(ctx, workspace.InboxQuery{Actor: "bob"})
	require.NoError(t, err)
	require.Len(t, before.Messages, 2)

	for _, archive := range []bool{false, true} {
		r, err := backup.Write(ctx, ws, t.TempDir(), backup.Options{Archive: archive})
		require.NoError(t, err)
		src, err := backup.Open(ctx, r.File)
		require.NoError(t, err)
		into, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "restored.db"))
		require.NoError(t, err)
		rep, err := backup.Restore(ctx, into, src, backup.RestoreOptions{})
		require.NoError(t, err)
		require.NoError(t, src.Close())
		assert.Zero(t, rep.Import.SkippedSealed, "archive=%v: nothing but tokens is left out, and there are none", archive)
		after, err := into.Messages().Inbox(ctx, workspace.InboxQuery{Actor: "bob"})
		require.NoError(t, err)
		assert.Equal(t, before.Messages, after.Messages, "archive=%v", archive)
		assert.Equal(t, before.Cursor, after.Cursor, "archive=%v", archive)
		assert.Equal(t, before.Unacked, after.Unacked, "archive=%v", archive)
		_, err = into.Artifacts().Create(ctx, workspace.Write{Actor: "carol"}, workspace.NewArtifact{Name: "x.txt", Content: []byte("x")})
		var paused *workspace.PausedError
		assert.ErrorAs(t, err, &paused, "archive=%v: carol is still paused", archive)
		require.NoError(t, into.Close())
	}
}
