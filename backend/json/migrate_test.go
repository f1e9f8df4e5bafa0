package jsonstore

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentspace/agentspace/workspace/driver"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// copyTree copies the fixture src into a new directory dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), dirMode)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, fileMode)
	})
	require.NoError(t, err)
}

// TestFormat1StoreIsMigratedAndReadsBack opens a store written by the
// format-1 code (testdata/format1: every version's metadata in one file per
// artifact, and a committed transaction still in the journal, as a killed
// writer leaves it) and checks that everything reads back after the
// migration, that versions are then appended, and that migrating down and
// up again keeps every record.
func TestFormat1StoreIsMigratedAndReadsBack(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	copyTree(t, filepath.Join("testdata", "format1"), dir)

	_, err := Open(ctx, dir, false, workspace.Options{})
	var se *workspace.SchemaError
	require.ErrorAs(t, err, &se, "an older format needs the migration to be asked for")
	assert.Equal(t, int64(1), se.Current)
	assert.Equal(t, int64(latestFormat), se.Want)

	ws, err := Open(ctx, dir, true, workspace.Options{})
	require.NoError(t, err)
	format, err := os.ReadFile(filepath.Join(dir, formatFile))
	require.NoError(t, err)
	assert.Equal(t, "3\n", string(format))
	fi, err := os.Stat(filepath.Join(dir, journalFile))
	require.NoError(t, err)
	assert.Zero(t, fi.Size(), "the journal was replayed")

	auth, err := ws.Artifacts().Get(ctx, workspace.ByName("plans/auth.md"))
	require.NoError(t, err)
	assert.Equal(t, int64(6), auth.Version)
	assert.Equal(t, "v2\n", string(auth.Content), "the head is the rollback to version 2")
	assert.Equal(t, map[string]string{"team": "x"}, auth.Labels)
	assert.Equal(t, "plan", auth.Kind)
	for v, want := range []string{"v1\n", "v2\n", "v3\n", "v4\n", "v5\n", "v2\n"} {
		a, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{ID: auth.ID, Version: int64(v + 1)})
		require.NoError(t, err)
		assert.Equal(t, want, string(a.Content), "version %d", v+1)
	}
	main, err := ws.Artifacts().Get(ctx, workspace.ByName("src/main.txt"))
	require.NoError(t, err)
	assert.Equal(t, int64(2), main.Version)
	assert.Equal(t, "hello\n", string(main.Content))
	_, err = ws.Artifacts().Get(ctx, workspace.ByName("gone.txt"))
	assert.ErrorIs(t, err, workspace.ErrNotFound, "deleted stays deleted")
	page, err := ws.Events().Read(ctx, workspace.EventQuery{})
	require.NoError(t, err)
	require.Len(t, page.Events, 13)
	gone := page.Events[8]
	require.Equal(t, workspace.EventArtifactDeleted, gone.Type)
	old, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{ID: gone.Subject.ID, Version: 2})
	require.NoError(t, err)
	assert.Equal(t, "bye2\n", string(old.Content), "a deleted artifact's versions stay readable")
	n, err := ws.Notes().Get(ctx, "decision", "db")
	require.NoError(t, err)
	assert.Equal(t, "sqlite", n.Body)
	tasks, err := ws.Tasks().List(ctx, workspace.TaskFilter{})
	require.NoError(t, err)
	require.Len(t, tasks.Tasks, 1)
	assert.Equal(t, "write it", tasks.Tasks[0].Title)

	// The new layout: a small head file, one line per version.
	head, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(artifactPath(auth.ID))))
	require.NoError(t, err)
	assert.Contains(t, string(head), `"head": {`)
	assert.NotContains(t, string(head), `"versions"`)
	vpath := filepath.Join(dir, filepath.FromSlash(versionsPath(auth.ID)))
	lines, err := os.ReadFile(vpath)
	require.NoError(t, err)
	assert.Equal(t, 6, bytes.Count(lines, []byte("\n")))

	// An update appends one line, which another handle reads.
	other, err := Open(ctx, dir, false, workspace.Options{})
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Artifacts().Get(ctx, workspace.ByID(auth.ID))
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: "bob"}, workspace.ByID(auth.ID), workspace.ArtifactChange{Content: []byte("v7\n")})
	require.NoError(t, err)
	after, err := os.ReadFile(vpath)
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(after, lines), "versions are appended, not rewritten")
	assert.Equal(t, 7, bytes.Count(after, []byte("\n")))
	vs, err := other.Artifacts().Versions(ctx, workspace.ByID(auth.ID))
	require.NoError(t, err)
	require.Len(t, vs, 7, "another handle reads the appended version")
	assert.Equal(t, "bob", vs[6].UpdatedBy)
	cat, err := os.ReadFile(filepath.Join(dir, "artifacts", "plans", "auth.md"))
	require.NoError(t, err)
	assert.Equal(t, "v7\n", string(cat))
	before := exportOf(t, ws)
	require.NoError(t, ws.Close())
	require.NoError(t, other.Close())

	// Down to format 1 and up again: the same records.
	m, err := jsonDriver{}.OpenMigrator(ctx, driver.Config{Target: dir})
	require.NoError(t, err)
	require.NoError(t, m.Down(ctx, 2))
	v, dirty, err := m.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint(1), v)
	assert.False(t, dirty)
	v1, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(artifactPath(auth.ID))))
	require.NoError(t, err)
	assert.Equal(t, 7, strings.Count(string(v1), `"version":`), "format 1 lists every version")
	_, err = os.Stat(filepath.Join(dir, "meta", "versions"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, m.Up(ctx))
	require.NoError(t, m.Close())
	again, err := Open(ctx, dir, false, workspace.Options{})
	require.NoError(t, err)
	defer again.Close()
	assert.Equal(t, before, exportOf(t, again))
}
