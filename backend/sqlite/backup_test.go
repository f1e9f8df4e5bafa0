package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	"github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// TestBackupFileIsAVerifiedCopyTakenWhileWriting: a copy taken while a
// writer goes on is a store of its own, compact and without a WAL, that
// verifies and holds everything up to some seq; the writer is not stopped.
func TestBackupFileIsAVerifiedCopyTakenWhileWriting(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(dir, "ws.db"))
	require.NoError(t, err)
	defer ws.Close()
	for i := range 200 {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "n", Key: fmt.Sprint(i), Body: "body"})
		require.NoError(t, err)
	}
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewArtifact{Name: "docs/a.md", Content: []byte("a")})
	require.NoError(t, err)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes int
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: "w"}, workspace.NotePut{Kind: "w", Key: fmt.Sprint(i)}); err != nil {
				t.Error(err)
				return
			}
			writes++
		}
	})
	copyPath := filepath.Join(dir, "backup.db")
	r, err := ws.Backup(ctx, copyPath)
	close(stop)
	wg.Wait()
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.GreaterOrEqual(t, r.Head, int64(201))
	assert.Equal(t, int64(1), r.Versions)
	for _, side := range []string{"-wal", "-shm"} {
		_, err := os.Stat(copyPath + side)
		assert.ErrorIs(t, err, os.ErrNotExist, "the read-only check leaves no %s", side)
	}

	// The copy opens as a store holding the log up to r.Head.
	cp, err := workspace.Open(ctx, "sqlite:"+copyPath)
	require.NoError(t, err)
	defer cp.Close()
	head, err := cp.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, r.Head, head)
	v, err := cp.Verify(ctx)
	require.NoError(t, err)
	assert.Equal(t, r.HeadHash, v.HeadHash)

	_, err = ws.Backup(ctx, copyPath)
	require.Error(t, err, "a backup never overwrites a file")
	t.Logf("%d writes while the copy was taken", writes)
}

// TestBackupFileRefusesACopyThatDoesNotVerify: a row edited behind the
// library's back is copied as it is, and the copy's check names it; the
// copy is removed.
func TestBackupFileRefusesACopyThatDoesNotVerify(t *testing.T) {
	ctx := testCtx(t)
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer ws.Close()
	for i := range 5 {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "n", Key: fmt.Sprint(i)})
		require.NoError(t, err)
	}
	execFile(t, dsn, `UPDATE events SET message = 'nothing to see here' WHERE seq = ?`, 3)
	copyPath := filepath.Join(t.TempDir(), "backup.db")
	_, err = ws.Backup(ctx, copyPath)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "event 3:")
	_, err = os.Stat(copyPath)
	assert.ErrorIs(t, err, os.ErrNotExist, "a copy that fails is not kept")
}

// TestBackupFileIsUnsupportedWithoutAFile: the json store has no one file
// to copy; BackupFile says so, and Export is its backup.
func TestBackupFileIsUnsupportedWithoutAFile(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "json:"+filepath.Join(t.TempDir(), "ws"))
	require.NoError(t, err)
	defer ws.Close()
	_, err = ws.Backup(ctx, filepath.Join(t.TempDir(), "b.db"))
	assert.True(t, errors.Is(err, errors.ErrUnsupported), "%v", err)
	var buf bytes.Buffer
	_, err = ws.Export(ctx, &buf, workspace.ArchiveOptions{})
	require.NoError(t, err)
}

// TestBackupFileNeedsTheExportRight: a copy holds every record, so the
// policy's admin "export" right decides it, as it does an export.
func TestBackupFileNeedsTheExportRight(t *testing.T) {
	ctx := testCtx(t)
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	defer ws.Close()
	_, err = ws.Artifacts().Create(ctx, workspace.Write{Actor: "root"}, workspace.NewArtifact{Name: workspace.PolicyArtifact, Kind: "policy",
		Content: []byte("[roles.reader]\nartifacts_read = [\"**\"]\n\n[actors]\nroot = [\"admin\"]\nalice = [\"reader\"]\n")})
	require.NoError(t, err)
	dir := t.TempDir()
	_, err = ws.Backup(workspace.AsActor(ctx, "alice"), filepath.Join(dir, "a.db"))
	require.ErrorIs(t, err, workspace.ErrForbidden)
	_, err = os.Stat(filepath.Join(dir, "a.db"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	r, err := ws.Backup(workspace.AsActor(ctx, "root"), filepath.Join(dir, "root.db"))
	require.NoError(t, err)
	assert.True(t, r.OK())
}

// TestBackupFileOnACallerManagedPoolLeavesItWritable: on a store opened
// with OpenDB, whose one pool also writes, the copy is taken on the
// writer's connection, and the connection still writes afterwards.
func TestBackupFileOnACallerManagedPoolLeavesItWritable(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	db, err := sql.Open("sqlite", filepath.Join(dir, "ws.db")+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	ws, err := sqlite.OpenDB(ctx, db, workspace.Options{})
	require.NoError(t, err)
	defer ws.Close()
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "n", Key: "before"})
	require.NoError(t, err)
	r, err := ws.Backup(ctx, filepath.Join(dir, "b.db"))
	require.NoError(t, err)
	assert.True(t, r.OK())
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "n", Key: "after"})
	require.NoError(t, err, "the pool's connection still writes")
}
