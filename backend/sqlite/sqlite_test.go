package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func tempPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "ws.db")
}

// openWS opens a handle with a store of its own, as another process's
// would be: these tests are about what the backend does between stores.
func openWS(t *testing.T, dsn string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(testCtx(t), dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// rawDB opens path directly, to inspect or damage it behind the backend's back.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func schemaVersion(t *testing.T, path string) (int, bool) {
	t.Helper()
	var (
		v     int
		dirty bool
	)
	require.NoError(t, rawDB(t, path).QueryRow(`SELECT version, dirty FROM schema_migrations`).Scan(&v, &dirty))
	return v, dirty
}

func TestOpenCreatesDirectoriesAndPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "ws.db")
	ws := openWS(t, "sqlite:"+path)
	_, err := ws.Notes().Put(testCtx(t), workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "decision", Key: "k", Body: "b"})
	require.NoError(t, err)

	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm(), "directory mode")
	for _, name := range []string{path, path + "-wal", path + "-shm", path + ".migrate.lock", sqlite.BellPath(path)} {
		info, err := os.Stat(name)
		require.NoError(t, err, name)
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "mode of %s", filepath.Base(name))
	}
}

func TestOpenUsesWALAndCurrentSchema(t *testing.T) {
	path := tempPath(t)
	openWS(t, "sqlite:"+path)
	var mode string
	require.NoError(t, rawDB(t, path).QueryRow(`PRAGMA journal_mode`).Scan(&mode))
	assert.Equal(t, "wal", mode)
	v, dirty := schemaVersion(t, path)
	assert.Equal(t, int(sqlite.LatestVersion()), v)
	assert.False(t, dirty)
}

func TestOpenFileThatIsNotADatabaseFailsClearly(t *testing.T) {
	path := tempPath(t)
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("this is not a database\n", 100)), 0o600))
	_, err := workspace.Open(testCtx(t), "sqlite:"+path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a SQLite database")
	assert.Contains(t, err.Error(), path)
}

func TestOpenForeignDatabaseIsRefused(t *testing.T) {
	path := tempPath(t)
	_, err := rawDB(t, path).Exec(`CREATE TABLE users (id INTEGER PRIMARY KEY)`)
	require.NoError(t, err)
	_, err = workspace.Open(testCtx(t), "sqlite:"+path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not an agentspace store")
}

func TestOpenRejectsInMemoryAndEmptyPaths(t *testing.T) {
	for _, dsn := range []string{"sqlite:", "sqlite::memory:", "sqlite:file:x.db?mode=memory"} {
		_, err := workspace.Open(testCtx(t), dsn)
		assert.ErrorIs(t, err, workspace.ErrInvalid, dsn)
	}
}

func TestSynchronousParamIsValidated(t *testing.T) {
	path := tempPath(t)
	for _, v := range []string{"FULL", "normal", "OFF"} {
		ws := openWS(t, "sqlite:"+path+"?ws_synchronous="+v)
		require.NoError(t, ws.Close())
	}
	for _, v := range []string{"EXTRA", "2", "fast", ""} {
		_, err := workspace.Open(testCtx(t), "sqlite:"+path+"?ws_synchronous="+v)
		assert.ErrorIs(t, err, workspace.ErrInvalid, "ws_synchronous=%q", v)
	}
	_, err := workspace.Open(testCtx(t), "sqlite:"+path+"?ws_busy_timeout=soon")
	assert.ErrorIs(t, err, workspace.ErrInvalid)
	_, err = workspace.Open(testCtx(t), "sqlite:"+path+"?ws_nonsense=1")
	assert.ErrorIs(t, err, workspace.ErrInvalid)
}

func TestOpenDBOnACallerManagedPool(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })

	ws, err := sqlite.OpenDB(ctx, db, workspace.Options{})
	require.NoError(t, err)
	a, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewArtifact{Name: "x", Content: []byte("hi")})
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	require.NoError(t, db.PingContext(ctx), "closing the workspace leaves the caller's pool open")

	// The same file through a DSN sees what OpenDB wrote.
	got, err := openWS(t, "sqlite:"+path).Artifacts().Get(ctx, workspace.ByID(a.ID))
	require.NoError(t, err)
	assert.Equal(t, "hi", string(got.Content))

	_, err = sqlite.OpenDB(ctx, nil, workspace.Options{})
	assert.ErrorIs(t, err, workspace.ErrInvalid)
}

func TestOpenByPath(t *testing.T) {
	ctx := testCtx(t)
	ws, err := sqlite.Open(ctx, tempPath(t), workspace.Options{})
	require.NoError(t, err)
	defer ws.Close()
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "a"}, workspace.NotePut{Kind: "glossary", Key: "k"})
	assert.NoError(t, err)

	_, err = sqlite.Open(ctx, tempPath(t)+"?ws_poll=1s", workspace.Options{})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "DSN parameters in a path")
}

func TestCorruptRowsGiveErrorsNamingTheRow(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	ws := openWS(t, "sqlite:"+path)
	w := workspace.Write{Actor: "a"}
	task, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "t", Labels: map[string]string{"x": "y"}})
	require.NoError(t, err)
	art, err := ws.Artifacts().Create(ctx, w, workspace.NewArtifact{Name: "a.md", Labels: map[string]string{"x": "y"}})
	require.NoError(t, err)

	db := rawDB(t, path)
	_, err = db.Exec(`UPDATE tasks SET labels = '{"x": ' WHERE id = ?`, task.ID)
	require.NoError(t, err)
	_, err = db.Exec(`UPDATE artifact_versions SET labels = 'not json' WHERE artifact_id = ?`, art.ID)
	require.NoError(t, err)

	_, err = ws.Tasks().Get(ctx, task.ID)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tasks")
	assert.Contains(t, err.Error(), task.ID)
	assert.Contains(t, err.Error(), "labels")

	_, err = ws.Artifacts().Get(ctx, workspace.ByName("a.md"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "artifact_versions")
	assert.Contains(t, err.Error(), art.ID)

	_, err = ws.Tasks().List(ctx, workspace.TaskFilter{})
	assert.Error(t, err)
}

// holdWriteLock takes the write lock of the file at path on a connection
// of its own (BEGIN IMMEDIATE), as another process's writer would; the
// caller ends it with COMMIT or ROLLBACK on the connection.
func holdWriteLock(t *testing.T, ctx context.Context, path string) *sql.Conn {
	t.Helper()
	conn, err := rawDB(t, path).Conn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	return conn
}

// A writer that holds the write lock past busy_timeout makes Update fail
// with SQLITE_BUSY; the store retries, and the write lands once the lock is
// released.
func TestUpdateRetriesWhenBusyPastTimeout(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	ws := openWS(t, "sqlite:"+path+"?ws_busy_timeout=1ms")

	conn := holdWriteLock(t, ctx, path)
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(50 * time.Millisecond)
		_, _ = conn.ExecContext(context.Background(), `COMMIT`)
	}()

	_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewTask{Title: "after the lock"})
	<-released
	require.NoError(t, err)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), head)
}

func TestEventSeqsAreGapFreeAcrossHandles(t *testing.T) {
	ctx := testCtx(t)
	dsn := "sqlite:" + tempPath(t)
	handles := []*workspace.Workspace{openWS(t, dsn), openWS(t, dsn), openWS(t, dsn)}
	const perHandle = 20
	var wg sync.WaitGroup
	errs := make(chan error, len(handles)*perHandle)
	for i, ws := range handles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perHandle {
				_, err := ws.Notes().Put(ctx, workspace.Write{Actor: fmt.Sprint("agent", i)},
					workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d-%d", i, j)})
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	page, err := handles[0].Events().Read(ctx, workspace.EventQuery{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, page.Events, len(handles)*perHandle)
	for i, e := range page.Events {
		assert.Equal(t, int64(i+1), e.Seq)
	}
}

func TestEventFiltersApplyInTheQuery(t *testing.T) {
	ctx := testCtx(t)
	ws := openWS(t, "sqlite:"+tempPath(t))
	a, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: "alice"}, workspace.NewArtifact{Name: "plans/p.md"})
	require.NoError(t, err)
	mid := time.Now()
	time.Sleep(2 * time.Millisecond)
	_, err = ws.Notes().Put(ctx, workspace.Write{Actor: "bob"}, workspace.NotePut{Kind: "decision", Key: "db"})
	require.NoError(t, err)
	_, err = ws.Artifacts().Update(ctx, workspace.Write{Actor: "bob"}, workspace.ByID(a.ID), workspace.ArtifactChange{Content: []byte("2")})
	require.NoError(t, err)
	_, err = ws.Tasks().Create(ctx, workspace.Write{Actor: "carol"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		q    workspace.EventQuery
		want []int64
	}{
		{"all", workspace.EventQuery{}, []int64{1, 2, 3, 4}},
		{"after seq", workspace.EventQuery{AfterSeq: 2}, []int64{3, 4}},
		{"types", workspace.EventQuery{Types: []string{workspace.EventNotePut, workspace.EventTaskCreated}}, []int64{2, 4}},
		{"actor", workspace.EventQuery{Actor: "bob"}, []int64{2, 3}},
		{"subject kind", workspace.EventQuery{SubjectKind: workspace.SubjectArtifact}, []int64{1, 3}},
		{"subject id", workspace.EventQuery{SubjectID: a.ID}, []int64{1, 3}},
		{"subject name", workspace.EventQuery{SubjectName: "db"}, []int64{2}},
		{"since", workspace.EventQuery{Since: mid}, []int64{2, 3, 4}},
		{"until", workspace.EventQuery{Until: mid}, []int64{1}},
		{"limit", workspace.EventQuery{Limit: 2}, []int64{1, 2}},
		{"combined", workspace.EventQuery{Actor: "bob", Types: []string{workspace.EventArtifactUpdated}}, []int64{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, err := ws.Events().Read(ctx, tc.q)
			require.NoError(t, err)
			var got []int64
			for _, e := range page.Events {
				got = append(got, e.Seq)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestClaimTakesHighestPriorityReadyTask(t *testing.T) {
	ctx := testCtx(t)
	ws := openWS(t, "sqlite:"+tempPath(t))
	w := workspace.Write{Actor: "lead"}
	dep, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "dep", Priority: 1})
	require.NoError(t, err)
	blocked, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "blocked", Priority: 9, DependsOn: []string{dep.ID}})
	require.NoError(t, err)
	low, err := ws.Tasks().Create(ctx, w, workspace.NewTask{Title: "low", Priority: 1})
	require.NoError(t, err)

	claim := func() workspace.Task {
		t.Helper()
		got, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "worker"})
		require.NoError(t, err)
		return got
	}
	assert.Equal(t, dep.ID, claim().ID, "equal priority: oldest first; blocked waits for its dependency")
	_, err = ws.Tasks().Complete(ctx, workspace.Write{Actor: "worker"}, dep.ID, workspace.TaskResult{Summary: "ok"})
	require.NoError(t, err)
	got := claim()
	assert.Equal(t, blocked.ID, got.ID, "its dependency done, the high-priority task is next")
	assert.Equal(t, []string{dep.ID}, got.DependsOn)
	assert.Equal(t, low.ID, claim().ID)
	_, err = ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "worker"})
	assert.True(t, errors.Is(err, workspace.ErrNoTask), "got %v", err)
}

// A writer that holds the write lock through every retry makes a write
// fail with ErrUnavailable (wsctl's exit 75, "try again"), having written
// nothing; a caller's deadline that ends the wait is its deadline.
func TestALockHeldThroughEveryRetryIsUnavailable(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	ws := openWS(t, "sqlite:"+path+"?ws_busy_timeout=1ms")

	conn := holdWriteLock(t, ctx, path)

	_, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewTask{Title: "never"})
	var ue *workspace.UnavailableError
	require.ErrorAs(t, err, &ue, "%v", err)
	assert.ErrorIs(t, err, workspace.ErrUnavailable)
	assert.Equal(t, "sqlite", ue.Backend)
	assert.False(t, ue.Unknown, "a busy write committed nothing")

	short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	_, err = ws.Tasks().Create(short, workspace.Write{Actor: "a"}, workspace.NewTask{Title: "never"})
	require.ErrorIs(t, err, context.DeadlineExceeded, "%v", err)

	_, err = conn.ExecContext(context.Background(), `ROLLBACK`)
	require.NoError(t, err)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Zero(t, head, "nothing was written")
}
