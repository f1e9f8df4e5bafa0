package engine_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/engine"
)

func openSQLite(t *testing.T, name string) *workspace.Workspace {
	t.Helper()
	return openDSN(t, "sqlite:"+filepath.Join(t.TempDir(), name+".db"))
}

func openDSN(t *testing.T, dsn string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// populate writes one of everything the archive must carry: versions with
// repeated content, a rollback, a deleted artifact whose name was reused,
// tasks with dependencies and results, notes, live and released leases,
// and a conflict event.
func populate(t *testing.T, ws *workspace.Workspace) {
	t.Helper()
	ctx := context.Background()
	w := workspace.Write{Actor: "alice"}
	arts := ws.Artifacts()
	_, err := arts.Create(ctx, w, workspace.NewArtifact{Name: "plans/a.md", Kind: "plan", Content: []byte("one\n"), Labels: map[string]string{"team": "core"}})
	require.NoError(t, err)
	_, err = arts.Update(ctx, w, workspace.ByName("plans/a.md"), workspace.ArtifactChange{Content: []byte("two\n")})
	require.NoError(t, err)
	_, err = arts.Rollback(ctx, w, workspace.ByName("plans/a.md"), 1)
	require.NoError(t, err)
	_, err = arts.Create(ctx, w, workspace.NewArtifact{Name: "tmp/x.bin", Content: []byte{0, 1, 2}})
	require.NoError(t, err)
	require.NoError(t, arts.Delete(ctx, w, workspace.ByName("tmp/x.bin")))
	_, err = arts.Create(ctx, w, workspace.NewArtifact{Name: "tmp/x.bin", Content: []byte{}})
	require.NoError(t, err)

	t1, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "first", Description: "d", Priority: 2})
	require.NoError(t, err)
	_, err = ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "second", DependsOn: []string{t1.ID}, ParentID: t1.ID, Labels: map[string]string{"k": "v"}})
	require.NoError(t, err)
	claimed, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "bob"})
	require.NoError(t, err)
	_, err = ws.Tasks().Complete(ctx, workspace.Write{Actor: "bob"}, claimed.ID, workspace.TaskResult{Summary: "ok", Artifacts: []string{"plans/a.md"}})
	require.NoError(t, err)

	_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "decision", Key: "db", Title: "DB", Body: "sqlite"})
	require.NoError(t, err)
	_, err = ws.Notes().Put(ctx, w, workspace.NotePut{Kind: "glossary", Key: "fence", Body: "a token"})
	require.NoError(t, err)

	l, err := ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a.go", Owner: "alice", TTL: time.Minute})
	require.NoError(t, err)
	require.NoError(t, ws.Locks().Release(ctx, l))
	_, err = ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:lead", Owner: "alice", TTL: time.Hour})
	require.NoError(t, err)

	_, err = arts.Update(ctx, workspace.Write{Actor: "bob", IfVersion: 1}, workspace.ByName("plans/a.md"), workspace.ArtifactChange{Content: []byte("x")})
	require.ErrorIs(t, err, workspace.ErrConflict)
}

func export(t *testing.T, ws *workspace.Workspace) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := ws.Export(context.Background(), &buf, workspace.ArchiveOptions{})
	require.NoError(t, err)
	return buf.Bytes()
}

func TestArchiveRoundTripIsByteIdentical(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	populate(t, src)
	first := export(t, src)

	dst := openSQLite(t, "dst")
	var calls int
	st, err := dst.Import(ctx, bytes.NewReader(first), workspace.ArchiveOptions{
		ProgressEvery: 5, Progress: func(workspace.ArchiveStats) { calls++ },
	})

	require.NoError(t, err)
	assert.Equal(t, int64(2), st.Tasks)
	assert.Equal(t, int64(3), st.Artifacts)
	assert.Equal(t, int64(1), st.DeletedArtifacts)
	assert.Zero(t, st.Unchained, "every event carried its hash")
	assert.Greater(t, calls, 1, "progress is reported along the way and at the end")

	assert.Equal(t, string(first), string(export(t, dst)))

	// The imported store carries on where the source stopped.
	srcHead, err := src.Events().Head(ctx)
	require.NoError(t, err)
	a, err := dst.Artifacts().Get(ctx, workspace.ByName("plans/a.md"))
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(a.Content))
	assert.Equal(t, int64(3), a.Version)
	l, err := dst.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:a.go", Owner: "carol", TTL: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, int64(2), l.Token, "tokens keep growing after an import")
	dstHead, err := dst.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, srcHead+1, dstHead, "seqs continue from the imported head")
	_, err = dst.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "role:lead", Owner: "carol", TTL: time.Minute})
	assert.ErrorIs(t, err, workspace.ErrLocked, "a live lease stays live")
}

func TestArchiveMovesBetweenEveryBackendByteForByte(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	populate(t, src)
	require.NoError(t, src.Events().Compact(ctx, 3))
	want := string(export(t, src))

	stores := map[string]func(t testing.TB) string{
		"json":     func(t testing.TB) string { return "json:" + filepath.Join(t.TempDir(), "ws") },
		"postgres": pgtest.NewDSN,
	}
	for name, dsn := range stores {
		t.Run(name, func(t *testing.T) {
			dst := openDSN(t, dsn(t))
			_, err := dst.Import(ctx, strings.NewReader(want), workspace.ArchiveOptions{})
			require.NoError(t, err)
			assert.Equal(t, want, string(export(t, dst)))
		})
	}
}

func TestArchiveKeepsACompactedLogsFloor(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	populate(t, src)
	require.NoError(t, src.Events().Compact(ctx, 5))
	first := export(t, src)
	assert.Contains(t, string(first), `{"type":"log","floor":5,`)

	dst := openSQLite(t, "dst")
	_, err := dst.Import(ctx, bytes.NewReader(first), workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(first), string(export(t, dst)))
	_, err = dst.Events().Read(ctx, workspace.EventQuery{AfterSeq: 1})
	assert.ErrorIs(t, err, workspace.ErrCompacted)
}

func TestImportRefusesANonEmptyStore(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	populate(t, src)
	archive := export(t, src)
	_, err := src.Import(ctx, bytes.NewReader(archive), workspace.ArchiveOptions{})
	require.ErrorIs(t, err, workspace.ErrInvalid)
	assert.Contains(t, err.Error(), "not empty")
	assert.Equal(t, string(archive), string(export(t, src)), "nothing was written")
}

func TestImportRejectsBrokenArchivesAndWritesNothing(t *testing.T) {
	src := openSQLite(t, "src")
	populate(t, src)
	good := string(export(t, src))
	lines := strings.SplitAfter(good, "\n")
	without := func(match string) string {
		var b strings.Builder
		dropped := false
		for _, l := range lines {
			if !dropped && strings.Contains(l, match) {
				dropped = true
				continue
			}
			b.WriteString(l)
		}
		return b.String()
	}
	replaceLine := func(match, with string) string {
		var b strings.Builder
		for _, l := range lines {
			if strings.Contains(l, match) {
				l = with + "\n"
			}
			b.WriteString(l)
		}
		return b.String()
	}
	cases := []struct {
		name    string
		archive string
		want    string
	}{
		{"empty", "", "is empty"},
		{"not an archive", "hello\n", "not a JSON object"},
		{"newer version", strings.Replace(good, `"version":3}`, `"version":4}`, 1), "archive version 4"},
		{"truncated", strings.Join(lines[:len(lines)-2], ""), "truncated"},
		{"gap in the log", without(`"type":"event","event":{"seq":3,`), "seq 4 where 3 was due"},
		{"wrong content", strings.Replace(good, `"content":"one\n"`, `"content":"two\n"`, 1), "does not match its sha256"},
		{"unknown content encoding", strings.Replace(good, `"content_encoding":"base64"`, `"content_encoding":"hex"`, 1), `"hex" is neither`},
		{"bad base64", strings.Replace(good, `"content":"AAEC"`, `"content":"AA!C"`, 1), "not base64"},
		{"escaping name", strings.ReplaceAll(good, `"name":"tmp/x.bin"`, `"name":"../x.bin"`), "invalid name"},
		{"unknown field", strings.Replace(good, `{"type":"note",`, `{"type":"note","color":"red",`, 1), "unknown field"},
		{"unknown field in a record", strings.Replace(good, `"note":{"kind":"decision",`, `"note":{"color":"red","kind":"decision",`, 1), "unknown field"},
		{"record without its object", replaceLine(`"note":{"kind":"decision"`, `{"type":"note"}`), `carries one "note" object`},
		{"records out of order", without(`"type":"header"`), "first line must be the header"},
		{"counts disagree", without(`"type":"note","note":{"kind":"glossary"`), "end record counts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dst := openSQLite(t, "dst")
			_, err := dst.Import(ctx, strings.NewReader(c.archive), workspace.ArchiveOptions{})
			require.Error(t, err)
			assert.True(t, errors.Is(err, workspace.ErrInvalid), "%v", err)
			assert.Contains(t, err.Error(), c.want)
			head, err := dst.Events().Head(ctx)
			require.NoError(t, err)
			assert.Zero(t, head)
			st, err := dst.Status(ctx)
			require.NoError(t, err)
			assert.Zero(t, st.Artifacts+st.Notes)
		})
	}
}

func TestImportInSeveralTransactionsRoundTrips(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	populate(t, src)
	first := export(t, src)

	t.Cleanup(engine.SetImportChunk(3, 1))
	dst := openSQLite(t, "dst")
	_, err := dst.Import(ctx, bytes.NewReader(first), workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(first), string(export(t, dst)))
}

func TestImportThatFailsAfterACommitSaysTheStoreIsPartial(t *testing.T) {
	ctx := context.Background()
	src := openSQLite(t, "src")
	populate(t, src)
	broken := strings.Replace(string(export(t, src)), `"type":"event","event":{"seq":3,`, `"type":"event","event":{"seq":33,`, 1)

	t.Cleanup(engine.SetImportChunk(3, 1))
	dst := openSQLite(t, "dst")
	_, err := dst.Import(ctx, strings.NewReader(broken), workspace.ArchiveOptions{})
	require.ErrorIs(t, err, workspace.ErrInvalid)
	assert.Contains(t, err.Error(), "the store holds a partial import: empty it before importing again")
}

// TestImportReadsAVersion1Archive imports an archive written by format
// version 1 (testdata/archive-v1.ndjson, exported from populate's
// workspace), and checks that its records arrive whole and that the store
// exports them in the current version, which imports again unchanged.
func TestImportReadsAVersion1Archive(t *testing.T) {
	ctx := context.Background()
	v1, err := os.ReadFile("testdata/archive-v1.ndjson")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(v1), `{"type":"header","format":"agentspace-archive","version":1}`))

	dst := openSQLite(t, "dst")
	st, err := dst.Import(ctx, bytes.NewReader(v1), workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Equal(t, workspace.ImportReport{ArchiveStats: workspace.ArchiveStats{Tasks: 2, Notes: 2, Artifacts: 3, Versions: 5, DeletedArtifacts: 1, Leases: 2, Events: 16, ContentBytes: 11},
		Unchained: 16}, st, "a version 1 archive has no hashes: no event was checked against a chain")

	a, err := dst.Artifacts().Get(ctx, workspace.ByName("plans/a.md"))
	require.NoError(t, err)
	assert.Equal(t, "one\n", string(a.Content))
	assert.Equal(t, int64(3), a.Version)
	assert.Equal(t, map[string]string{"team": "core"}, a.Labels)
	assert.Equal(t, time.Date(2026, 11, 25, 18, 57, 24, 457777000, time.UTC), a.CreatedAt)
	v2, err := dst.Artifacts().Get(ctx, workspace.ArtifactRef{ID: "01a21411-dbe9-7d04-a896-83896f575e19", Version: 2})
	require.NoError(t, err)
	assert.Equal(t, "two\n", string(v2.Content))
	deleted, err := dst.Artifacts().Get(ctx, workspace.ArtifactRef{ID: "01a21411-dbeb-78b1-9e77-f8892c7b708a", Version: 1})
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 1, 2}, deleted.Content, "binary content of a deleted artifact")
	empty, err := dst.Artifacts().Get(ctx, workspace.ByName("tmp/x.bin"))
	require.NoError(t, err)
	assert.Empty(t, empty.Content)

	first, err := dst.Tasks().Get(ctx, "01a21411-dbed-720c-9c18-88235257afc9")
	require.NoError(t, err)
	assert.Equal(t, workspace.TaskDone, first.Status)
	assert.Equal(t, workspace.TaskResult{Summary: "ok", Artifacts: []string{"plans/a.md"}}, first.Result)
	second, err := dst.Tasks().Get(ctx, "01a21411-dbed-799c-bf9a-c13c1a6640b9")
	require.NoError(t, err)
	assert.Equal(t, []string{first.ID}, second.DependsOn)
	assert.Equal(t, first.ID, second.ParentID)

	n, err := dst.Notes().Get(ctx, "glossary", "fence")
	require.NoError(t, err)
	assert.Equal(t, "a token", n.Body)

	page, err := dst.Events().Read(ctx, workspace.EventQuery{Limit: 100})
	require.NoError(t, err)
	require.Len(t, page.Events, 16)
	assert.Equal(t, workspace.EventArtifactRolledBack, page.Events[2].Type)
	assert.Equal(t, "rolled back to version 1", page.Events[2].Message)
	assert.Equal(t, workspace.Subject{Kind: "note", ID: "decision/db", Name: "db"}, page.Events[10].Subject)

	// The store exports the current version, which round-trips byte for byte.
	current := export(t, dst)
	assert.True(t, strings.HasPrefix(string(current), `{"type":"header","format":"agentspace-archive","version":3}`))
	again := openSQLite(t, "again")
	_, err = again.Import(ctx, bytes.NewReader(current), workspace.ArchiveOptions{})
	require.NoError(t, err)
	assert.Equal(t, string(current), string(export(t, again)))

	// Version 1 records are still checked as strictly as they were.
	for name, c := range map[string]struct{ from, to, want string }{
		"unknown field": {`{"type":"note",`, `{"type":"note","color":"red",`, "unknown field"},
		"wrong content": {`"content":"b25lCg=="`, `"content":"dHdvCg=="`, "does not match its sha256"},
		"bad base64":    {`"content":"AAEC"`, `"content":"AA!C"`, "not base64"},
		"bad time":      {`"created_at":"2026-11-25T18:57:24.463305Z"`, `"created_at":"yesterday"`, "not an RFC 3339 time"},
		"missing time":  {`"created_at":"2026-11-25T18:57:24.463305Z",`, ``, "created_at is missing"},
	} {
		t.Run(name, func(t *testing.T) {
			broken := strings.Replace(string(v1), c.from, c.to, 1)
			require.NotEqual(t, string(v1), broken)
			_, err := openSQLite(t, "broken").Import(ctx, strings.NewReader(broken), workspace.ArchiveOptions{})
			require.ErrorIs(t, err, workspace.ErrInvalid)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// TestArchiveLinesValidateAgainstTheSchema checks every line an export
// writes against $defs/ArchiveLine of the shared schema.
func TestArchiveLinesValidateAgainstTheSchema(t *testing.T) {
	src := openSQLite(t, "src")
	populate(t, src)
	f, err := os.Open("../../docs/schema/workspace.schema.json")
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource("workspace.schema.json", doc))
	sch, err := c.Compile("workspace.schema.json#/$defs/ArchiveLine")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(export(t, src))), "\n")
	require.Len(t, lines, 31)
	for i, line := range lines {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(line))
		require.NoError(t, err)
		assert.NoError(t, sch.Validate(inst), "line %d: %s", i+1, line)
	}
}
