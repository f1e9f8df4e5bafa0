package postgres_test

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/conformance"
	"github.com/agentspace/agentspace/workspace"
)

// migrateChildEnv makes the test binary a child that migrates the DSN's schema up.
const migrateChildEnv = "AGENTSPACE_PGTEST_MIGRATE_CHILD"

func TestMain(m *testing.M) {
	if dsn := os.Getenv(migrateChildEnv); dsn != "" {
		os.Exit(migrateChild(dsn))
	}
	if role := os.Getenv(failoverChildEnv); role != "" {
		os.Exit(failoverChild(role, os.Getenv(failoverDSNEnv)))
	}
	flag.Parse()
	startBouncerSuites()
	code := m.Run()
	stopBouncerSuites()
	os.Exit(code)
}

// migrateChild runs `migrate up` and then opens the workspace, as two
// deployments starting at once would.
func migrateChild(dsn string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := workspace.OpenMigrator(ctx, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open migrator:", err)
		return 1
	}
	defer m.Close()
	if err := m.Up(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "up:", err)
		return 1
	}
	ws, err := workspace.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 1
	}
	defer ws.Close()
	if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: "child"}, workspace.NotePut{Kind: "decision", Key: fmt.Sprint(os.Getpid()), Body: "up"}); err != nil {
		fmt.Fprintln(os.Stderr, "put:", err)
		return 1
	}
	return 0
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openWS opens a handle with a store (a pool) of its own, as another
// process's would be: these tests are about what the backend does between
// stores.
func openWS(t *testing.T, dsn string) *workspace.Workspace {
	t.Helper()
	ws, err := workspace.Open(ctxFor(t), dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.Close() })
	return ws
}

// follow collects a subscription's events until it has seen seq last.
func follow(ctx context.Context, sub *workspace.Subscription, last int64) ([]int64, error) {
	var seqs []int64
	for {
		m, err := sub.Next(ctx)
		if err != nil {
			return seqs, err
		}
		if m.Progress {
			continue
		}
		seqs = append(seqs, m.Event.Seq)
		if m.Event.Seq >= last {
			return seqs, nil
		}
	}
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func putNotes(ctx context.Context, ws *workspace.Workspace, actor string, n int) error {
	for i := range n {
		_, err := ws.Notes().Put(ctx, workspace.Write{Actor: actor}, workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%s-%d", actor, i), Body: "b"})
		if err != nil {
			return err
		}
	}
	return nil
}

// TestConformanceAsNonSuperuser runs the suite's core cases (every
// operation, policies, retention, migrations on a fresh schema) as a role
// that is not a superuser, may create nothing in the database, and owns
// only its schema. A role's rights decide which statements run, and the
// core cases run every statement the store has; the concurrency and fault
// cases run the same statements more often (TestConformance runs them),
// and took three quarters of this test's time.
func TestConformanceAsNonSuperuser(t *testing.T) {
	conformance.RunCore(t, roleHarness{})
}

type roleHarness struct{}

func (roleHarness) NewDSN(t testing.TB) string { return pgtest.NewRoleDSN(t) }

func TestRoleDSNIsNotASuperuserAndCannotCreateSchemas(t *testing.T) {
	ctx := ctxFor(t)
	dsn := pgtest.NewRoleDSN(t)
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Del("ws_schema")
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	var super, createDB bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT rolsuper, rolcreatedb FROM pg_roles WHERE rolname = current_user`).Scan(&super, &createDB))
	assert.False(t, super)
	assert.False(t, createDB)

	// A schema it does not own and cannot create: a clear error, not a half-made store.
	other := pgtest.Schema(t)
	_, err = workspace.Open(ctx, pgtest.WithParams(t, dsn, "ws_schema", other))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CREATE")
}

func TestSubscriberMissesNothingWhenTheListenerConnectionIsKilled(t *testing.T) {
	ctx := ctxFor(t)
	dsn := pgtest.NewDSN(t)
	writer := openWS(t, pgtest.WithParams(t, dsn, "ws_listen", "off"))
	reader := openWS(t, dsn)
	admin := pgtest.Connect(t)
	appName := "agentspace-listen:agentspace." + pgtest.SchemaOf(t, dsn)

	sub, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{Heartbeat: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })

	require.NoError(t, putNotes(ctx, writer, "before", 10))
	got, err := follow(ctx, sub, 10)
	require.NoError(t, err)

	pid := listenerPID(ctx, t, admin, appName, 0)
	var killed bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&killed))
	require.True(t, killed)
	require.NoError(t, putNotes(ctx, writer, "during", 10))
	newPID := listenerPID(ctx, t, admin, appName, pid)
	assert.NotEqual(t, pid, newPID, "the listener reconnected")
	require.NoError(t, putNotes(ctx, writer, "after", 10))

	rest, err := follow(ctx, sub, 30)
	require.NoError(t, err)
	assert.Equal(t, seqRange(1, 30), append(got, rest...))
}

// listenerPID waits for the listening backend other than not, and returns its pid.
func listenerPID(ctx context.Context, t *testing.T, admin *pgx.Conn, appName string, not int) int {
	t.Helper()
	for {
		var pid int
		err := admin.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND pid <> $2 LIMIT 1`, appName, not).Scan(&pid)
		if err == nil {
			return pid
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		select {
		case <-ctx.Done():
			t.Fatalf("no listener %q appeared: %v", appName, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestSixteenWritersOnFourPoolsAndThreeSubscribersSeeContiguousSeqs(t *testing.T) {
	ctx := ctxFor(t)
	dsn := pgtest.NewDSN(t)
	handles := make([]*workspace.Workspace, 4)
	for i := range handles {
		handles[i] = openWS(t, dsn)
	}
	subs := make([]*workspace.Subscription, 3)
	for i := range subs {
		s, err := openWS(t, dsn).Events().Subscribe(ctx, workspace.SubscribeRequest{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		subs[i] = s
	}
	const writers, rounds = 16, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := handles[w%len(handles)]
			actor := fmt.Sprintf("w%02d", w)
			for r := range rounds {
				var err error
				if r%3 == 0 {
					// A batch: its events must stay consecutive among everyone else's.
					_, err = ws.Commit(ctx, workspace.Batch{Actor: actor, Ops: []workspace.Op{
						workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%s-%d-a", actor, r)}},
						workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%s-%d-b", actor, r)}},
					}})
				} else {
					_, err = ws.Notes().Put(ctx, workspace.Write{Actor: actor}, workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("%s-%d", actor, r)})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	head, err := handles[0].Events().Head(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(writers*(rounds+rounds/3)), head)
	for i, s := range subs {
		got, err := follow(ctx, s, head)
		require.NoError(t, err)
		assert.Equal(t, seqRange(1, head), got, "subscriber %d", i)
	}
}

func TestTwoProcessesMigratingOneFreshSchemaBothSucceed(t *testing.T) {
	ctx := ctxFor(t)
	dsn := pgtest.NewDSN(t)
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for range 2 {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), migrateChildEnv+"="+dsn)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		assert.NoError(t, cmd.Wait(), "child %d: %s", i, outs[i])
	}
	m, err := workspace.OpenMigrator(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	v, dirty, err := m.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, m.Latest(), v)
	assert.False(t, dirty)
	page, err := openWS(t, dsn).Notes().List(ctx, workspace.NoteFilter{})
	require.NoError(t, err)
	assert.Len(t, page.Notes, 2, "both children wrote after migrating")
}

func TestMigratorGoesDownAndUpAgain(t *testing.T) {
	ctx := ctxFor(t)
	dsn := pgtest.NewDSN(t)
	m, err := workspace.OpenMigrator(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Up(ctx))
	require.NoError(t, m.Up(ctx), "nothing to do is success")
	v, _, err := m.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, m.Latest(), v)
	require.NoError(t, m.Down(ctx, 0))
	v, _, err = m.Version(ctx)
	require.NoError(t, err)
	assert.Zero(t, v)
	require.NoError(t, m.Goto(ctx, m.Latest()))
	ws := openWS(t, dsn)
	require.NoError(t, putNotes(ctx, ws, "a", 1))
}

func TestOpenRefusesDirtyNewerAndUnmigratedOlderSchemas(t *testing.T) {
	cases := []struct {
		name        string
		sql         string
		autoMigrate string
		wantDirty   bool
		wantCurrent int64 // relative to the latest version
	}{
		{"dirty", `UPDATE %s SET dirty = true`, "true", true, 0},
		{"newer", `UPDATE %s SET version = version + 1`, "true", false, 1},
		// Version 0 is older than every migration.
		{"older", `UPDATE %s SET version = 0`, "false", false, -latestVersion(t)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t)
			dsn := pgtest.NewDSN(t)
			require.NoError(t, openWS(t, dsn).Close())
			admin := pgtest.Connect(t)
			_, err := admin.Exec(ctx, fmt.Sprintf(c.sql, pgx.Identifier{pgtest.SchemaOf(t, dsn), "schema_migrations"}.Sanitize()))
			require.NoError(t, err)
			_, err = workspace.Open(ctx, pgtest.WithParams(t, dsn, "ws_automigrate", c.autoMigrate))
			var se *workspace.SchemaError
			require.ErrorAs(t, err, &se)
			assert.ErrorIs(t, err, workspace.ErrSchema)
			assert.Equal(t, c.wantDirty, se.Dirty)
			assert.Equal(t, latestVersion(t)+c.wantCurrent, se.Current)
			assert.Equal(t, latestVersion(t), se.Want)
		})
	}
}

// latestVersion is the newest migration this binary carries.
func latestVersion(t *testing.T) int64 {
	t.Helper()
	m, err := workspace.OpenMigrator(ctxFor(t), pgtest.NewDSN(t))
	require.NoError(t, err)
	defer m.Close()
	return int64(m.Latest())
}

func TestOpenRefusesASchemaHoldingOtherTables(t *testing.T) {
	ctx := ctxFor(t)
	schema := pgtest.Schema(t)
	admin := pgtest.Connect(t)
	_, err := admin.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+".tasks (id int)")
	require.NoError(t, err)
	_, err = workspace.Open(ctx, pgtest.WithParams(t, pgtest.ServerDSN(t), "ws_schema", schema))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refusing")
}

func TestBadSchemaNamesAreInvalid(t *testing.T) {
	for _, name := range []string{"Upper", "has-dash", "pg_catalog", `x"y`, strings.Repeat("a", 49)} {
		_, err := workspace.Open(context.Background(), pgtest.WithParams(t, pgtest.ServerDSN(t), "ws_schema", name))
		assert.ErrorIs(t, err, workspace.ErrInvalid, name)
	}
}

func TestErrorsNeverShowThePassword(t *testing.T) {
	ctx := ctxFor(t)
	const secret = "s3cr3t-pw"
	_, err := workspace.Open(ctx, "postgres://agent:"+secret+"@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secret)
}

func TestPollOnlyHandleSeesOtherHandlesWrites(t *testing.T) {
	ctx := ctxFor(t)
	dsn := pgtest.NewDSN(t)
	writer := openWS(t, dsn)
	reader := openWS(t, pgtest.WithParams(t, dsn, "ws_listen", "off", "ws_poll", "10ms"))
	sub, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	require.NoError(t, putNotes(ctx, writer, "w", 5))
	got, err := follow(ctx, sub, 5)
	require.NoError(t, err)
	assert.Equal(t, seqRange(1, 5), got)
}

func TestSeparateListenDSNWakesSubscribers(t *testing.T) {
	ctx := ctxFor(t)
	dsn := pgtest.NewDSN(t)
	writer := openWS(t, dsn)
	reader := openWS(t, pgtest.WithParams(t, dsn, "ws_listen_dsn", pgtest.ServerDSN(t)))
	sub, err := reader.Events().Subscribe(ctx, workspace.SubscribeRequest{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	require.NoError(t, putNotes(ctx, writer, "w", 5))
	got, err := follow(ctx, sub, 5)
	require.NoError(t, err)
	assert.Equal(t, seqRange(1, 5), got)
}

func TestWritesRetryAfterThePoolsConnectionsAreKilled(t *testing.T) {
	ctx := ctxFor(t)
	app := pgtest.RandomName("pool_")
	dsn := pgtest.WithParams(t, pgtest.NewDSN(t), "application_name", app, "ws_listen", "off")
	ws := openWS(t, dsn)
	require.NoError(t, putNotes(ctx, ws, "a", 3))
	admin := pgtest.Connect(t)
	var n int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
	require.Positive(t, n)
	require.NoError(t, putNotes(ctx, ws, "b", 3), "a write on a dead pooled connection is retried on a new one")
	head, err := ws.Events().Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(6), head)
}

func TestOpenPoolUsesTheCallersPoolAndLeavesItOpen(t *testing.T) {
	ctx := ctxFor(t)
	pool, err := pgxpool.New(ctx, pgtest.ServerDSN(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ws, err := postgres.OpenPool(ctx, pool, postgres.Options{Schema: pgtest.Schema(t)}, workspace.Options{})
	require.NoError(t, err)
	require.NoError(t, putNotes(ctx, ws, "a", 2))
	require.NoError(t, ws.Close())
	require.NoError(t, pool.Ping(ctx), "closing the workspace leaves the caller's pool open")
}

func TestErrorsNeverShowTheListenDSNPassword(t *testing.T) {
	ctx := ctxFor(t)
	const secret = "l1sten-pw"
	listen := url.QueryEscape("postgres://agent:" + secret + "@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	_, err := workspace.Open(ctx, "postgres://agent@127.0.0.1:1/test?sslmode=disable&connect_timeout=2&ws_listen_dsn="+listen)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secret)
}

func TestTwoWorkspacesOnOnePoolConnectionStayApart(t *testing.T) {
	ctx := ctxFor(t)
	// One connection: both schemas' statements share its prepared-statement cache.
	pool, err := pgxpool.New(ctx, pgtest.WithParams(t, pgtest.ServerDSN(t), "pool_max_conns", "1"))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	var wss []*workspace.Workspace
	for range 2 {
		ws, err := postgres.OpenPool(ctx, pool, postgres.Options{Schema: pgtest.Schema(t), NoListen: true}, workspace.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		wss = append(wss, ws)
	}
	for round := range 3 {
		for i, ws := range wss {
			require.NoError(t, putNotes(ctx, ws, fmt.Sprintf("ws%d-round%d", i, round), 1))
		}
	}
	for i, ws := range wss {
		page, err := ws.Notes().List(ctx, workspace.NoteFilter{})
		require.NoError(t, err)
		require.Len(t, page.Notes, 3)
		for _, n := range page.Notes {
			assert.True(t, strings.HasPrefix(n.Key, fmt.Sprintf("ws%d-", i)), n.Key)
		}
		head, err := ws.Events().Head(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(3), head)
	}
}

// A schema that holds tables of its own but no agentspace schema version
// is refused, whether it has no version table or an empty one, and its
// tables are left as they were: the schema check at open counts a
// schema's other tables only then.
func TestASchemaWithOthersTablesAndNoVersionIsRefusedAndLeftAlone(t *testing.T) {
	ctx := context.Background()
	for _, emptyVersionTable := range []bool{false, true} {
		t.Run(fmt.Sprintf("empty_version_table=%v", emptyVersionTable), func(t *testing.T) {
			schema := pgtest.Schema(t)
			admin := pgtest.Connect(t)
			id := pgx.Identifier{schema}.Sanitize()
			_, err := admin.Exec(ctx, `CREATE SCHEMA `+id+`; CREATE TABLE `+id+`.theirs (x int); INSERT INTO `+id+`.theirs VALUES (7)`)
			require.NoError(t, err)
			if emptyVersionTable {
				_, err = admin.Exec(ctx, `CREATE TABLE `+id+`.schema_migrations (version bigint NOT NULL PRIMARY KEY, dirty boolean NOT NULL)`)
				require.NoError(t, err)
			}
			dsn := pgtest.WithParams(t, pgtest.ServerDSN(t), "ws_schema", schema, "ws_automigrate", "true")
			ws, err := workspace.Open(ctx, dsn)
			if err == nil {
				_ = ws.Close()
			}
			require.ErrorContains(t, err, "holds tables but no agentspace schema version")
			var x, tables int
			require.NoError(t, admin.QueryRow(ctx, `SELECT x FROM `+id+`.theirs`).Scan(&x))
			assert.Equal(t, 7, x, "their table is untouched")
			require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&tables))
			assert.Equal(t, map[bool]int{false: 1, true: 2}[emptyVersionTable], tables, "nothing was created")
		})
	}
}
