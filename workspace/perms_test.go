package workspace_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestWorkspaceFilesAreOwnerOnly: everything a file backend creates (the
// sqlite database with its -wal, -shm and lock files; the json tree) is
// 0600 for files and 0700 for directories, even under a umask of 0: a
// workspace may hold private plans and code.
func TestWorkspaceFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	for _, scheme := range []string{"sqlite", "json"} {
		t.Run(scheme, func(t *testing.T) {
			ctx := context.Background()
			root := filepath.Join(t.TempDir(), "team", "ws")
			dsn := scheme + ":" + filepath.Join(root, "store")
			if scheme == "sqlite" {
				dsn += ".db"
			}
			ws, err := workspace.Open(ctx, dsn)
			require.NoError(t, err)
			t.Cleanup(func() { _ = ws.Close() })
			w := workspace.Write{Actor: "alice"}
			_, err = ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "plans/deep/a.md", Content: []byte("secret plan")})
			require.NoError(t, err)
			_, err = ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "t"})
			require.NoError(t, err)
			_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "k"})
			require.NoError(t, err)
			_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "r", Owner: "alice", TTL: time.Minute})
			require.NoError(t, err)

			var files int
			err = filepath.WalkDir(filepath.Dir(root), func(p string, d fs.DirEntry, err error) error {
				require.NoError(t, err)
				fi, err := d.Info()
				require.NoError(t, err)
				if d.IsDir() {
					assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), "directory %s", p)
					return nil
				}
				files++
				assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "file %s", p)
				return nil
			})
			require.NoError(t, err)
			if scheme == "sqlite" {
				suffixes := []string{"", "-wal", "-shm"}
				if runtime.GOOS == "linux" {
					suffixes = append(suffixes, "-bell") // the bell is rung where it is watched
				}
				for _, suffix := range suffixes {
					assert.FileExists(t, filepath.Join(root, "store.db"+suffix), "checked above")
				}
			}
			assert.Greater(t, files, 2)
		})
	}
}
