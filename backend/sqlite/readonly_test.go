package sqlite_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestAHandleThatOnlyReadsWritesNothing: opening an existing store and
// reading from it leaves the database file untouched. (The writer's
// auto_vacuum pragma used to rewrite the header page on every open: a
// commit and three fsyncs in `wsctl task ls`, and a checkpoint at its
// exit.)
func TestAHandleThatOnlyReadsWritesNothing(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	ws, err := workspace.Open(ctx, "sqlite:"+path, workspace.Options{Private: true})
	require.NoError(t, err)
	_, err = ws.Tasks().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	raw := rawDB(t, path)
	var mode int
	require.NoError(t, raw.QueryRow(`PRAGMA auto_vacuum`).Scan(&mode))
	require.Equal(t, 2, mode, "a new file is still INCREMENTAL")
	require.NoError(t, raw.Close(), "the handle below is the file's only one, whose close would checkpoint what it wrote")

	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	require.NoError(t, os.Chtimes(path, past, past))
	before, err := os.Stat(path)
	require.NoError(t, err)

	ws, err = workspace.Open(ctx, "sqlite:"+path, workspace.Options{Private: true, MustExist: true})
	require.NoError(t, err)
	page, err := ws.Tasks().List(ctx, workspace.TaskFilter{})
	require.NoError(t, err)
	require.Len(t, page.Tasks, 1)
	require.NoError(t, ws.Close())

	after, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, before.ModTime(), after.ModTime(), "the file was written")
	assert.Equal(t, before.Size(), after.Size())
	wal, err := os.Stat(path + "-wal")
	require.NoError(t, err, "the WAL persists, so that the next process need not create it")
	assert.Zero(t, wal.Size())
}

// TestTheLastCloseLeavesAnEmptyWAL: the WAL persists between processes
// (creating it anew cost ext4 milliseconds), but the last handle to close
// checkpoints it and cuts it to nothing, so no frames outlive the store's
// handles: a database file copied over ws.db afterwards is read as it is.
func TestTheLastCloseLeavesAnEmptyWAL(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	a, err := workspace.Open(ctx, "sqlite:"+path, workspace.Options{Private: true})
	require.NoError(t, err)
	b, err := workspace.Open(ctx, "sqlite:"+path, workspace.Options{Private: true})
	require.NoError(t, err)
	for i := range 50 {
		_, err = a.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "n", Key: strconv.Itoa(i), Body: strings.Repeat("x", 4000)})
		require.NoError(t, err)
	}
	require.NoError(t, a.Close())
	wal, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	assert.Positive(t, wal.Size(), "another handle is open: its frames stay")
	require.NoError(t, b.Close())
	wal, err = os.Stat(path + "-wal")
	require.NoError(t, err)
	assert.Zero(t, wal.Size(), "the last close checkpoints and truncates")

	// Another store's file copied over this one reads as that store.
	other := filepath.Join(t.TempDir(), "other.db")
	o, err := workspace.Open(ctx, "sqlite:"+other, workspace.Options{Private: true})
	require.NoError(t, err)
	_, err = o.Notes().Put(ctx, workspace.Write{Actor: "o"}, workspace.NotePut{Kind: "only", Key: "k", Body: "other"})
	require.NoError(t, err)
	require.NoError(t, o.Close())
	data, err := os.ReadFile(other)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	ws, err := workspace.Open(ctx, "sqlite:"+path, workspace.Options{Private: true, MustExist: true})
	require.NoError(t, err)
	defer ws.Close()
	page, err := ws.Notes().List(ctx, workspace.NoteFilter{Kind: "n"})
	require.NoError(t, err)
	assert.Empty(t, page.Notes)
	n, err := ws.Notes().Get(ctx, "only", "k")
	require.NoError(t, err)
	assert.Equal(t, "other", n.Body)
	v, err := ws.Verify(ctx)
	require.NoError(t, err)
	assert.True(t, v.OK(), "%v", v.Problems)
}
