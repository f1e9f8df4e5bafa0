package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/conformance"
	"github.com/agentspace/agentspace/workspace"
)

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := []string{}
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestMustExistOnAMissingFileCreatesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "typo", "ws.db")
	_, err := workspace.Open(ctx, dsn, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	assert.Contains(t, err.Error(), "does not exist")
	_, err = workspace.OpenMigrator(ctx, dsn, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	assert.Empty(t, entries(t, dir), "a failed must-exist open left files behind")
}

func TestMustExistOnAnEmptyFileLeavesItEmpty(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ws.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, err := workspace.Open(ctx, "sqlite:"+path, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Zero(t, fi.Size())
}

func TestMustExistOpensACreatedWorkspaceAndNotAnEmptiedOne(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	ws, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	ws, err = workspace.Open(ctx, dsn, workspace.Options{MustExist: true, Private: true})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "k", Body: "b"})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	// Undoing every migration leaves a store with no workspace in it.
	m, err := workspace.OpenMigrator(ctx, dsn, workspace.Options{MustExist: true})
	require.NoError(t, err)
	require.NoError(t, m.Down(ctx, 0))
	require.NoError(t, m.Close())
	_, err = workspace.Open(ctx, dsn, workspace.Options{MustExist: true, Private: true})
	conformance.RequireNoWorkspace(t, err)
}

func TestMustExistOnAFileThatIsNotADatabaseSaysWhatItIs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	require.NoError(t, os.WriteFile(path, []byte("# not a database, but long enough to have a header page\n"), 0o600))
	_, err := workspace.Open(context.Background(), "sqlite:"+path, workspace.Options{MustExist: true})
	require.Error(t, err)
	assert.NotErrorIs(t, err, workspace.ErrNoWorkspace)
	assert.Contains(t, err.Error(), "is not a SQLite database")
}
