package jsonstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	"github.com/agentspace/agentspace/conformance"
	"github.com/agentspace/agentspace/workspace"
)

func TestMustExistOnAMissingDirectoryCreatesNothing(t *testing.T) {
	ctx := context.Background()
	parent := t.TempDir()
	dsn := "json:" + filepath.Join(parent, "typo")
	_, err := workspace.Open(ctx, dsn, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	assert.Contains(t, err.Error(), "does not exist")
	_, err = workspace.OpenMigrator(ctx, dsn, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	es, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Empty(t, es, "a failed must-exist open left files behind")
}

func TestMustExistOnADirectoryWithoutFormatLeavesItAlone(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600))
	_, err := workspace.Open(context.Background(), "json:"+dir, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	assert.Contains(t, err.Error(), "has no FORMAT file")
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, es, 1, "nothing but the user's own file")
	assert.Equal(t, "notes.txt", es[0].Name())
}

func TestMustExistOpensACreatedTreeAndNotAnEmptiedOne(t *testing.T) {
	ctx := context.Background()
	dsn := "json:" + filepath.Join(t.TempDir(), "ws")
	ws, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	ws, err = workspace.Open(ctx, dsn, workspace.Options{MustExist: true, Private: true})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	m, err := workspace.OpenMigrator(ctx, dsn, workspace.Options{MustExist: true})
	require.NoError(t, err)
	require.NoError(t, m.Down(ctx, 0))
	require.NoError(t, m.Close())
	_, err = workspace.Open(ctx, dsn, workspace.Options{MustExist: true, Private: true})
	conformance.RequireNoWorkspace(t, err)
}
