package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

func openWS(t *testing.T, dsn string) workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(testCtx(t), dsn)
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
	for _, name := range []string{path, path + "-wal", path + "-shm", path + ".migrate.lock"} {
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

func TestSchemaOlderThanCodeNeedsMigration(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	m, err := workspace.OpenMigrator(ctx, "sqlite:"+path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Goto(ctx, 1))

	_, err = workspace.Open(ctx, "sqlite:"+path)
	var se *workspace.SchemaError
	require.ErrorAs(t, err, &se)
	assert.ErrorIs(t, err, workspace.ErrSchema)
	assert.Equal(t, int64(1), se.Current)
	assert.Equal(t, int64(sqlite.LatestVersion()), se.Want)
	assert.False(t, se.Dirty)
	assert.Contains(t, err.Error(), "wsctl migrate up")

	ws := openWS(t, "sqlite:"+path+"?ws_automigrate=true")
	_, err = ws.Events().Head(ctx)
	require.NoError(t, err)
	v, dirty := schemaVersion(t, path)
	assert.Equal(t, int(sqlite.LatestVersion()), v)
	assert.False(t, dirty)
}

func TestSchemaNewerThanCodeIsRefused(t *testing.T) {
	path := tempPath(t)
	openWS(t, "sqlite:"+path).Close()
	_, err := rawDB(t, path).Exec(`UPDATE schema_migrations SET version = 99`)
	require.NoError(t, err)

	for _, dsn := range []string{"sqlite:" + path, "sqlite:" + path + "?ws_automigrate=true"} {
		_, err = workspace.Open(testCtx(t), dsn)
		var se *workspace.SchemaError
		require.ErrorAs(t, err, &se, dsn)
		assert.Equal(t, int64(99), se.Current)
		assert.Equal(t, int64(sqlite.LatestVersion()), se.Want)
		assert.Contains(t, err.Error(), "newer")
	}
}

func TestDirtySchemaIsReportedWithTheForceCommand(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	openWS(t, "sqlite:"+path).Close()
	_, err := rawDB(t, path).Exec(`UPDATE schema_migrations SET dirty = 1`)
	require.NoError(t, err)

	_, err = workspace.Open(ctx, "sqlite:"+path+"?ws_automigrate=true")
	var se *workspace.SchemaError
	require.ErrorAs(t, err, &se)
	assert.True(t, se.Dirty)
	assert.Contains(t, err.Error(), fmt.Sprintf("wsctl migrate force %d", sqlite.LatestVersion()))

	m, err := workspace.OpenMigrator(ctx, "sqlite:"+path)
	require.NoError(t, err)
	defer m.Close()
	_, dirty, err := m.Version(ctx)
	require.NoError(t, err)
	assert.True(t, dirty)
	assert.ErrorIs(t, m.Up(ctx), workspace.ErrSchema, "up on a dirty schema")
	require.NoError(t, m.Force(ctx, int(sqlite.LatestVersion())))
	openWS(t, "sqlite:"+path)
}

func TestMigratorMovesBetweenVersions(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	m, err := workspace.OpenMigrator(ctx, "sqlite:"+path)
	require.NoError(t, err)
	defer m.Close()
	latest := m.Latest()
	require.Equal(t, sqlite.LatestVersion(), latest)
	require.GreaterOrEqual(t, latest, uint(2))

	version := func() uint {
		t.Helper()
		v, dirty, err := m.Version(ctx)
		require.NoError(t, err)
		require.False(t, dirty)
		return v
	}
	assert.Equal(t, uint(0), version())
	require.NoError(t, m.Up(ctx))
	assert.Equal(t, latest, version())
	require.NoError(t, m.Up(ctx), "nothing to do is success")
	require.NoError(t, m.Down(ctx, 1))
	assert.Equal(t, latest-1, version())
	require.NoError(t, m.Goto(ctx, latest))
	assert.Equal(t, latest, version())
	require.NoError(t, m.Down(ctx, 0))
	assert.Equal(t, uint(0), version())
	require.NoError(t, m.Goto(ctx, latest))
	assert.Equal(t, latest, version())
	assert.ErrorIs(t, m.Force(ctx, int(latest)+1), workspace.ErrInvalid)

	// The store migrated back up is usable.
	ws := openWS(t, "sqlite:"+path)
	_, err = ws.Tasks().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewTask{Title: "t"})
	require.NoError(t, err)
}

// Several processes opening and migrating one fresh file at once: the
// cross-process lock lets exactly one create the schema, and every one of
// them ends up with a usable store.
func TestMigrateUpRacingInSeveralProcesses(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	const n = 4
	startChildren(t, ctx, path, n, func(i int) string {
		if i%2 == 0 {
			return "migrate"
		}
		return "open"
	})()

	v, dirty := schemaVersion(t, path)
	assert.Equal(t, int(sqlite.LatestVersion()), v)
	assert.False(t, dirty)
	ws := openWS(t, "sqlite:"+path)
	page, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{NamePrefix: "children/"})
	require.NoError(t, err)
	assert.Len(t, page.Artifacts, n)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(n), head)
}

// startChildren starts n copies of this test binary playing role on path;
// they begin together once the returned function is called, which then
// waits for them all.
func startChildren(t *testing.T, ctx context.Context, path string, n int, role func(i int) string) (run func()) {
	t.Helper()
	goFile := filepath.Join(t.TempDir(), "go")
	exe, err := os.Executable()
	require.NoError(t, err)
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for i := range cmds {
		cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childRoleEnv+"="+role(i), childPathEnv+"="+path,
			childGoEnv+"="+goFile, fmt.Sprintf("%s=%d", childNameEnv, i))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		require.NoError(t, cmd.Start())
		cmds[i] = cmd
	}
	return func() {
		t.Helper()
		require.NoError(t, os.WriteFile(goFile, nil, 0o600))
		for i, cmd := range cmds {
			assert.NoError(t, cmd.Wait(), "child %d: %s", i, outs[i].String())
		}
	}
}

// Two processes writing at once get interleaved, gap-free seqs, and a
// subscriber in a third process sees every event exactly once, in order.
func TestProcessesWritingAtOnceShareOneGapFreeLog(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	ws := openWS(t, "sqlite:"+path+"?ws_poll=5ms")
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	defer sub.Close()

	const n = 2
	startChildren(t, ctx, path, n, func(int) string { return "write" })()

	byActor := map[string]int{}
	for want := int64(1); want <= n*childWrites; want++ {
		m, err := sub.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, want, m.Event.Seq)
		byActor[m.Event.Actor]++
	}
	assert.Equal(t, map[string]int{"child-0": childWrites, "child-1": childWrites}, byActor)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(n*childWrites), head)
}

// A process killed with SIGKILL in the middle of writing loses no
// acknowledged write, and the log and the records agree after reopening.
func TestKilledWriterLosesNoAcknowledgedWrite(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	openWS(t, "sqlite:"+path).Close() // create the schema before the child starts
	goFile := filepath.Join(t.TempDir(), "go")
	require.NoError(t, os.WriteFile(goFile, nil, 0o600))
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childRoleEnv+"=write-until-killed", childPathEnv+"="+path, childGoEnv+"="+goFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	acked := -1
	lines := bufio.NewScanner(stdout)
	for acked < 30 && lines.Scan() {
		acked, err = strconv.Atoi(lines.Text())
		require.NoError(t, err)
	}
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.GreaterOrEqual(t, acked, 30, "child output ended early: %s", stderr.String())

	var check string
	require.NoError(t, rawDB(t, path).QueryRow(`PRAGMA integrity_check`).Scan(&check))
	assert.Equal(t, "ok", check)

	ws := openWS(t, "sqlite:"+path)
	for i := 0; i <= acked; i++ {
		_, err := ws.Notes().Get(ctx, "decision", fmt.Sprint("k", i))
		require.NoError(t, err, "acknowledged note k%d", i)
	}
	st, err := ws.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(st.Notes), st.Head, "one event per note put, none more, none less")
	page, err := ws.Events().Read(ctx, workspace.EventQuery{Limit: 10000})
	require.NoError(t, err)
	for i, e := range page.Events {
		require.Equal(t, int64(i+1), e.Seq)
	}
}

func TestHandlesOpenedConcurrentlyOnAFreshFileAllWork(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, err := workspace.Open(ctx, "sqlite:"+path)
			if err != nil {
				errs[i] = err
				return
			}
			defer ws.Close()
			_, errs[i] = ws.Tasks().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewTask{Title: fmt.Sprint(i)})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "handle %d", i)
	}
	page, err := openWS(t, "sqlite:"+path).Tasks().List(ctx, workspace.TaskFilter{})
	require.NoError(t, err)
	assert.Len(t, page.Tasks, n)
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

// A writer that holds the write lock past busy_timeout makes Update fail
// with SQLITE_BUSY; the store retries, and the write lands once the lock is
// released.
func TestUpdateRetriesWhenBusyPastTimeout(t *testing.T) {
	ctx := testCtx(t)
	path := tempPath(t)
	ws := openWS(t, "sqlite:"+path+"?ws_busy_timeout=1ms")

	conn, err := rawDB(t, path).Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(t, err)
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(50 * time.Millisecond)
		_, _ = conn.ExecContext(context.Background(), `COMMIT`)
	}()

	_, err = ws.Tasks().Create(ctx, workspace.Write{Actor: "a"}, workspace.NewTask{Title: "after the lock"})
	<-released
	require.NoError(t, err)
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), head)
}

func TestEventSeqsAreGapFreeAcrossHandles(t *testing.T) {
	ctx := testCtx(t)
	dsn := "sqlite:" + tempPath(t)
	handles := []workspace.Workspace{openWS(t, dsn), openWS(t, dsn), openWS(t, dsn)}
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
