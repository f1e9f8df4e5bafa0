package sqlite_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// fillAndDelete writes n notes of 8 KiB and deletes them, leaving their
// pages on the free list.
func fillAndDelete(t *testing.T, ws *workspace.Workspace, n int) {
	t.Helper()
	ctx := testCtx(t)
	body := strings.Repeat("x", 8<<10)
	for i := range n {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "big", Key: fmt.Sprint(i), Body: body})
		require.NoError(t, err)
	}
	for i := range n {
		require.NoError(t, ws.Notes().Delete(ctx, workspace.Write{Actor: "a"}, "big", fmt.Sprint(i)))
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// TestGCReclaimGivesFreePagesBack: a new file is INCREMENTAL, so gc
// --reclaim gives its free pages back in steps; a dry run reports them
// first; the file shrinks once the WAL is checkpointed (on close).
func TestGCReclaimGivesFreePagesBack(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	ws := openWS(t, "sqlite:"+path)
	fillAndDelete(t, ws, 200)

	var mode int
	require.NoError(t, rawDB(t, path).QueryRow(`PRAGMA auto_vacuum`).Scan(&mode))
	assert.Equal(t, 2, mode, "a new file is INCREMENTAL")

	dry, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", DryRun: true})
	require.NoError(t, err)
	assert.Greater(t, dry.Reclaimable, int64(1<<20), "200 deleted notes of 8 KiB are free pages")
	before := fileSize(t, path)

	r, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", Reclaim: true})
	require.NoError(t, err)
	assert.Equal(t, dry.Reclaimable, r.Reclaimed, "every free page was given back")
	assert.Zero(t, r.Reclaimable)
	require.NoError(t, ws.Close())
	assert.Less(t, fileSize(t, path), before-dry.Reclaimable/2, "the file shrank")
	ws = openWS(t, "sqlite:"+path)
	v, err := ws.Verify(ctx)
	require.NoError(t, err)
	assert.True(t, v.OK(), "%v", v.Problems)
}

// TestGCReclaimSwitchesAnOlderFileOnce: a file made without auto_vacuum
// (as by an older version) is switched to INCREMENTAL by its first
// reclaim, a VACUUM, and keeps everything.
func TestGCReclaimSwitchesAnOlderFileOnce(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	db := rawDB(t, path)
	for _, q := range []string{`PRAGMA auto_vacuum = NONE`, `CREATE TABLE x (y)`, `DROP TABLE x`} {
		_, err := db.Exec(q)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	ws := openWS(t, "sqlite:"+path)
	fillAndDelete(t, ws, 100)
	_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "keep", Key: "k", Body: "kept"})
	require.NoError(t, err)
	var mode int
	require.NoError(t, rawDB(t, path).QueryRow(`PRAGMA auto_vacuum`).Scan(&mode))
	require.Equal(t, 0, mode, "the file predates auto_vacuum")

	r, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", Reclaim: true})
	require.NoError(t, err)
	assert.Greater(t, r.Reclaimed, int64(512<<10))
	assert.Zero(t, r.Reclaimable)
	require.NoError(t, rawDB(t, path).QueryRow(`PRAGMA auto_vacuum`).Scan(&mode))
	assert.Equal(t, 2, mode, "switched to INCREMENTAL")
	n, err := ws.Notes().Get(ctx, "keep", "k")
	require.NoError(t, err)
	assert.Equal(t, "kept", n.Body)
}

// TestGCVersionsDeleteTheirContentRows: removed versions take their blob
// rows with them, except one a kept version shares.
func TestGCVersionsDeleteTheirContentRows(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	ws := openWS(t, "sqlite:"+path)
	ref := workspace.ByName("a.md")
	_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewArtifact{Name: "a.md", Content: []byte("same")})
	require.NoError(t, err)
	for _, c := range []string{"x", "y", "same"} {
		_, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: "a"}, ref, workspace.ArtifactChange{Content: []byte(c)})
		require.NoError(t, err)
	}
	blobs := func() (n int) {
		require.NoError(t, rawDB(t, path).QueryRow(`SELECT count(*) FROM blobs`).Scan(&n))
		return n
	}
	require.Equal(t, 4, blobs(), "a write with new bytes stores them, even if an older version had the same")
	r, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", KeepVersions: 1})
	require.NoError(t, err)
	assert.Equal(t, int64(3), r.Versions.Count)
	assert.Equal(t, 1, blobs(), "only the head's row is left")
	a, err := ws.Artifacts().Get(ctx, ref)
	require.NoError(t, err)
	assert.Equal(t, "same", string(a.Content))
}
