package jsonstore_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestRemovedVersionsLeaveMarkedLinesAndSurviveReopen: a version
// retention removed keeps its line in the versions file, marked removed;
// its content file goes; after reopening, the kept versions read and the
// removed ones are reported removed.
func TestRemovedVersionsLeaveMarkedLinesAndSurviveReopen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	ws := openDir(t, dir)
	a := create(t, ws, "notes/n.md", "v1")
	for _, c := range []string{"v2", "v3"} {
		_, err := ws.Artifacts().Update(ctx, writer, workspace.ByName("notes/n.md"), workspace.ArtifactChange{Content: []byte(c)})
		require.NoError(t, err)
	}
	r, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepVersions: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Versions.Count)
	require.NoError(t, ws.Close())

	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", a.ID))
	require.NoError(t, err)
	assert.Len(t, blobs, 1, "only the head's content is left")
	lines, err := os.ReadFile(filepath.Join(dir, "meta", "versions", a.ID+".ndjson"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(lines), `"removed":true`), "%s", lines)

	ws = openDir(t, dir)
	head, err := ws.Artifacts().Get(ctx, workspace.ByName("notes/n.md"))
	require.NoError(t, err)
	assert.Equal(t, "v3", string(head.Content))
	_, err = ws.Artifacts().Get(ctx, workspace.ArtifactRef{Name: "notes/n.md", Version: 1})
	var gone *workspace.VersionRemovedError
	require.ErrorAs(t, err, &gone)
	assert.Equal(t, int64(3), gone.Oldest)
	v, err := ws.Verify(ctx)
	require.NoError(t, err)
	assert.True(t, v.OK(), "%v", v.Problems)
}
