//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBackupsAreReadableByTheirOwnerOnly: under the usual umask (022),
// the copy of a SQLite store, the archive backup and `export -o` are all
// 0600, as the store is, and no temporary file is left beside them.
func TestBackupsAreReadableByTheirOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	dsn := "sqlite:" + filepath.Join(dir, "ws.db")
	_, stderr, code := wsctl(t, dsn, "init")
	require.Zero(t, code, stderr)
	_, stderr, code = wsctl(t, dsn, "--as", "alice", "note", "put", "decision", "db", "--title", "DB", "--body", "secret")
	require.Zero(t, code, stderr)

	backups := filepath.Join(dir, "backups")
	for _, args := range [][]string{{"backup", "--to", backups}, {"backup", "--to", backups, "--archive"}, {"export", "-q", "-o", filepath.Join(backups, "export.ndjson")}} {
		_, stderr, code := wsctl(t, dsn, args...)
		require.Zero(t, code, "%v: %s", args, stderr)
	}
	entries, err := os.ReadDir(backups)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		info, err := e.Info()
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "%s", e.Name())
	}
	assert.Len(t, names, 3, "the two backups and the export, nothing else: %v", names)
	assert.Regexp(t, `^agentspace-.*\.db$`, names[0])
	assert.Regexp(t, `^agentspace-.*\.ndjson$`, names[1])
}
