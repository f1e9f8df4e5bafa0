package jsonstore_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

func openDir(t *testing.T, dir string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(context.Background(), "json:"+dir, workspace.Options{Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// quiet drops the warnings of skipped readable copies, which tests provoke.
var quiet = slog.New(slog.DiscardHandler)

var writer = workspace.Write{Actor: "tester"}

func create(t *testing.T, ws *workspace.Workspace, name, content string) workspace.Artifact {
	t.Helper()
	a, err := ws.Artifacts().Create(context.Background(), writer, workspace.NewArtifact{Name: name, Content: []byte(content)})
	require.NoError(t, err)
	return a
}

func TestArtifactHeadsAreReadableFilesAndOldVersionsAreBlobs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	ws := openDir(t, dir)
	ctx := context.Background()
	a := create(t, ws, "plans/auth-api.md", "v1")
	_, err := ws.Artifacts().Update(ctx, writer, workspace.ByName("plans/auth-api.md"), workspace.ArtifactChange{Content: []byte("v2")})
	require.NoError(t, err)

	got, err := os.ReadFile(filepath.Join(dir, "artifacts", "plans", "auth-api.md"))
	require.NoError(t, err)
	assert.Equal(t, "v2", string(got))
	blobs, err := os.ReadDir(filepath.Join(dir, "blobs", a.ID))
	require.NoError(t, err)
	assert.Len(t, blobs, 2, "each distinct content once")
	format, err := os.ReadFile(filepath.Join(dir, "FORMAT"))
	require.NoError(t, err)
	assert.Equal(t, "3\n", string(format))
	log, err := os.ReadFile(filepath.Join(dir, "events.ndjson"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(log), "\n"), "one event per line")

	require.NoError(t, ws.Artifacts().Delete(ctx, writer, workspace.ByName("plans/auth-api.md")))
	_, err = os.Stat(filepath.Join(dir, "artifacts", "plans"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "a deleted artifact's copy and its emptied directory go")
	old, err := ws.Artifacts().Get(ctx, workspace.ArtifactRef{ID: a.ID, Version: 1})
	require.NoError(t, err)
	assert.Equal(t, "v1", string(old.Content), "versions stay readable after delete")
}

func TestFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	ws := openDir(t, dir)
	ctx := context.Background()
	create(t, ws, "a/b/c.txt", "x")
	_, err := ws.Notes().Put(ctx, writer, workspace.NotePut{Kind: "decision", Key: "Use JSON", Body: "yes"})
	require.NoError(t, err)
	_, err = ws.Tasks().Create(ctx, writer, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:src/api.go", Owner: "tester", TTL: 60e9})
	require.NoError(t, err)
	n := 0
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		if d.IsDir() {
			assert.Equal(t, fs.FileMode(0o700), fi.Mode().Perm()&0o700, p)
		} else {
			assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm()&0o600, p)
		}
		assert.Zero(t, fi.Mode().Perm()&0o077, "%s is readable by others: %v", p, fi.Mode())
		n++
		return nil
	}))
	assert.Greater(t, n, 15)
}

func TestNamesNeverReachOutsideTheDirectory(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ws")
	ws := openDir(t, dir)
	ctx := context.Background()
	for _, name := range []string{"../escape.txt", "a/../../escape.txt", "/etc/escape.txt", `..\escape.txt`, "a/./b", "a//b"} {
		_, err := ws.Artifacts().Create(ctx, writer, workspace.NewArtifact{Name: name, Content: []byte("x")})
		assert.ErrorIs(t, err, workspace.ErrInvalid, name)
	}
	_, err := ws.Artifacts().Create(ctx, writer, workspace.NewArtifact{Name: "docs/.agentspace-tmp-1", Content: []byte("x")})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "names that look like our temp files are reserved")
	// Keys that are not names get encoded into one file each.
	for _, key := range []string{"../../escape", "a/b", "..", "Key", "key"} {
		_, err := ws.Notes().Put(ctx, writer, workspace.NotePut{Kind: "glossary", Key: key, Body: key})
		require.NoError(t, err, key)
	}
	notes, err := os.ReadDir(filepath.Join(dir, "notes", "glossary"))
	require.NoError(t, err)
	assert.Len(t, notes, 5, "distinct keys, distinct files, even those differing in case")
	ents, err := os.ReadDir(base)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "nothing was written next to the workspace")
}

func TestNamesWithoutAReadableCopyStillWork(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	ws := openDir(t, dir)
	ctx := context.Background()
	create(t, ws, "a/b", "inner")
	create(t, ws, "a", "outer") // artifacts/a is a directory: no readable copy
	got, err := ws.Artifacts().Get(ctx, workspace.ByName("a"))
	require.NoError(t, err)
	assert.Equal(t, "outer", string(got.Content))
	inner, err := os.ReadFile(filepath.Join(dir, "artifacts", "a", "b"))
	require.NoError(t, err)
	assert.Equal(t, "inner", string(inner))

	long := "docs/" + strings.Repeat("x", 300) + ".md" // a segment too long for a file name
	create(t, ws, long, "long")
	got, err = ws.Artifacts().Get(ctx, workspace.ByName(long))
	require.NoError(t, err)
	assert.Equal(t, "long", string(got.Content))
}

func TestCorruptFilesAreReportedWithFileAndLine(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (string, workspace.Task) {
		dir := filepath.Join(t.TempDir(), "ws")
		ws, err := workspace.Open(ctx, "json:"+dir)
		require.NoError(t, err)
		create(t, ws, "a.md", "x")
		task, err := ws.Tasks().Create(ctx, writer, workspace.NewTask{Title: "t"})
		require.NoError(t, err)
		create(t, ws, "b.md", "y")
		require.NoError(t, ws.Close())
		return dir, task
	}
	t.Run("truncated task file", func(t *testing.T) {
		dir, task := setup(t)
		p := filepath.Join(dir, "tasks", task.ID+".json")
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, data[:len(data)/2], 0o600))
		_, err = workspace.Open(ctx, "json:"+dir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "tasks/"+task.ID+".json:")
		assert.Contains(t, err.Error(), "corrupt")
	})
	t.Run("garbage line in the log", func(t *testing.T) {
		dir, _ := setup(t)
		p := filepath.Join(dir, "events.ndjson")
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		lines := strings.SplitAfter(string(data), "\n")
		lines[1] = "this is not json\n"
		require.NoError(t, os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600))
		_, err = workspace.Open(ctx, "json:"+dir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "events.ndjson:2:")
	})
	t.Run("garbage appended while open", func(t *testing.T) {
		dir, _ := setup(t)
		ws := openDir(t, dir)
		f, err := os.OpenFile(filepath.Join(dir, "events.ndjson"), os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("{\"seq\": 4, \"type\": \n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, err = ws.Events().Head(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "events.ndjson:4:")
	})
	t.Run("bad FORMAT", func(t *testing.T) {
		dir, _ := setup(t)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "FORMAT"), []byte("one\n"), 0o600))
		_, err := workspace.Open(ctx, "json:"+dir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "FORMAT:1")
	})
}

func TestFormatVersions(t *testing.T) {
	ctx := context.Background()
	fresh := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "ws")
		ws, err := workspace.Open(ctx, "json:"+dir)
		require.NoError(t, err)
		create(t, ws, "a.md", "x")
		require.NoError(t, ws.Close())
		return dir
	}
	setFormat := func(t *testing.T, dir, s string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "FORMAT"), []byte(s), 0o600))
	}
	t.Run("newer is refused", func(t *testing.T) {
		dir := fresh(t)
		setFormat(t, dir, "4\n")
		_, err := workspace.Open(ctx, "json:"+dir+"?ws_automigrate=true")
		var se *workspace.SchemaError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, int64(4), se.Current)
	})
	t.Run("older needs migrate", func(t *testing.T) {
		dir := fresh(t)
		setFormat(t, dir, "0\n")
		_, err := workspace.Open(ctx, "json:"+dir)
		assert.ErrorIs(t, err, workspace.ErrSchema)
		ws, err := workspace.Open(ctx, "json:"+dir+"?ws_automigrate=true")
		require.NoError(t, err)
		_, err = ws.Artifacts().Get(ctx, workspace.ByName("a.md"))
		assert.NoError(t, err, "migrating up keeps the data")
		require.NoError(t, ws.Close())
	})
	t.Run("dirty", func(t *testing.T) {
		dir := fresh(t)
		setFormat(t, dir, "2 dirty\n")
		_, err := workspace.Open(ctx, "json:"+dir)
		var se *workspace.SchemaError
		require.ErrorAs(t, err, &se)
		assert.True(t, se.Dirty)
		m, err := workspace.OpenMigrator(ctx, "json:"+dir)
		require.NoError(t, err)
		defer m.Close()
		require.NoError(t, m.Force(ctx, 2))
		v, dirty, err := m.Version(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint(2), v)
		assert.False(t, dirty)
	})
	t.Run("migrator up down goto", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "ws")
		m, err := workspace.OpenMigrator(ctx, "json:"+dir)
		require.NoError(t, err)
		defer m.Close()
		v, _, err := m.Version(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint(0), v)
		assert.Equal(t, uint(3), m.Latest())
		require.NoError(t, m.Up(ctx))
		require.NoError(t, m.Up(ctx), "nothing to do is success")
		v, _, err = m.Version(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint(3), v)
		require.NoError(t, m.Down(ctx, 2))
		v, _, err = m.Version(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint(1), v)
		_, err = os.Stat(filepath.Join(dir, "meta", "versions"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
		require.NoError(t, m.Down(ctx, 1))
		_, err = os.Stat(filepath.Join(dir, "tasks"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
		require.NoError(t, m.Goto(ctx, 3))
		ws := openDir(t, dir)
		create(t, ws, "x", "y")
	})
	t.Run("a foreign directory is not taken over", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600))
		_, err := workspace.Open(ctx, "json:"+dir)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "not an agentspace json workspace")
	})
}

func TestCompactionIsSeenByOtherHandlesAndSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ws")
	ws1, ws2 := openDir(t, dir), openDir(t, dir)
	for i := 0; i < 5; i++ {
		create(t, ws1, "n"+string(rune('a'+i)), "x")
	}
	_, err := ws2.Events().Head(ctx)
	require.NoError(t, err)
	require.NoError(t, ws1.Events().Compact(ctx, 4))
	create(t, ws1, "later", "x")
	for _, ws := range []*workspace.Workspace{ws2, openDir(t, dir)} {
		_, err := ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: 1})
		assert.ErrorIs(t, err, workspace.ErrCompacted)
		page, err := ws.Events().Read(ctx, workspace.EventQuery{AfterSeq: 3})
		require.NoError(t, err)
		require.Len(t, page.Events, 3)
		assert.Equal(t, int64(4), page.Events[0].Seq)
		got, err := ws.Artifacts().Get(ctx, workspace.ByName("later"))
		require.NoError(t, err, "records written after the compaction are seen")
		assert.Equal(t, "x", string(got.Content))
	}
}

func TestClosedStoreRefusesWork(t *testing.T) {
	ws, err := workspace.Open(context.Background(), "json:"+filepath.Join(t.TempDir(), "ws"))
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	_, err = ws.Events().Head(context.Background())
	assert.True(t, errors.Is(err, workspace.ErrClosed))
}
