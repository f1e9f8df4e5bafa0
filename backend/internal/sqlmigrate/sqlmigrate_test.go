package sqlmigrate_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/agentspace/agentspace/backend/internal/sqlmigrate"
	"github.com/agentspace/agentspace/workspace"
)

// three steps; the third fails at its second statement unless fixed.
func files(third string) fstest.MapFS {
	return fstest.MapFS{
		"000001_a.up.sql":   {Data: []byte("CREATE TABLE a (id integer PRIMARY KEY);")},
		"000001_a.down.sql": {Data: []byte("DROP TABLE a;")},
		"000002_b.up.sql":   {Data: []byte("CREATE TABLE b (id integer PRIMARY KEY);\nINSERT INTO b VALUES (1);")},
		"000002_b.down.sql": {Data: []byte("DROP TABLE b;")},
		"000004_c.up.sql":   {Data: []byte("CREATE TABLE c (id integer PRIMARY KEY);\n" + third)},
		"000004_c.down.sql": {Data: []byte("DROP TABLE c;")},
		"README.md":         {Data: []byte("not a migration")},
	}
}

func runner(t *testing.T, fsys fstest.MapFS) (*sqlmigrate.Runner, *sql.DB) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db"))
	require.NoError(t, err)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	steps, err := sqlmigrate.Load(fsys)
	require.NoError(t, err)
	return &sqlmigrate.Runner{DB: db, Steps: steps, Dialect: sqlmigrate.Dialect{
		Read:   `SELECT version, dirty FROM schema_migrations LIMIT 1`,
		Clear:  `DELETE FROM schema_migrations`,
		Exists: `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')`,
		Create: `CREATE TABLE schema_migrations (version uint64, dirty bool)`,
		Insert: `INSERT INTO schema_migrations (version, dirty) VALUES (?, ?)`,
	}}, db
}

func tables(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'schema_migrations' ORDER BY name`)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	return out
}

func version(t *testing.T, r *sqlmigrate.Runner) uint {
	t.Helper()
	v, dirty, err := r.Version(context.Background())
	require.NoError(t, err)
	require.False(t, dirty)
	return v
}

func TestStepsGoUpAndDownOneTransactionEach(t *testing.T) {
	ctx := context.Background()
	r, db := runner(t, files("INSERT INTO c VALUES (1);"))
	assert.Equal(t, uint(4), r.Latest())
	assert.Equal(t, uint(0), version(t, r), "a store with no version table is at 0")

	require.NoError(t, r.Goto(ctx, 2))
	assert.Equal(t, uint(2), version(t, r))
	assert.Equal(t, []string{"a", "b"}, tables(t, db))
	require.NoError(t, r.Up(ctx))
	require.NoError(t, r.Up(ctx), "nothing to do is success")
	assert.Equal(t, uint(4), version(t, r))
	assert.Equal(t, []string{"a", "b", "c"}, tables(t, db))

	require.NoError(t, r.Down(ctx, 2))
	assert.Equal(t, uint(1), version(t, r))
	assert.Equal(t, []string{"a"}, tables(t, db))

	var invalid *workspace.InvalidError
	require.ErrorAs(t, r.Down(ctx, 2), &invalid, "more steps than the store has below it")
	assert.Equal(t, uint(1), version(t, r), "refused before any step was taken")
	require.ErrorAs(t, r.Goto(ctx, 3), &invalid, "a version no migration has")
	require.ErrorAs(t, r.Force(ctx, 7), &invalid)

	require.NoError(t, r.Down(ctx, 0))
	assert.Equal(t, uint(0), version(t, r))
	assert.Empty(t, tables(t, db))
}

// A step whose SQL fails, or that is stopped before its COMMIT, leaves
// nothing: not its first statements, not its version, and no dirty flag.
func TestAFailedOrStoppedStepLeavesTheStoreAtTheVersionBefore(t *testing.T) {
	ctx := context.Background()
	r, db := runner(t, files("INSERT INTO nope VALUES (1);"))
	err := r.Up(ctx)
	var se *sqlmigrate.StepError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "000004_c.up.sql", se.Step.File(se.Up))
	assert.Contains(t, err.Error(), "no such table: nope")
	assert.Equal(t, uint(2), version(t, r), "the steps before it happened; it did not")
	assert.Equal(t, []string{"a", "b"}, tables(t, db), "its CREATE TABLE rolled back with it")

	stop := errors.New("stopped")
	r2, db2 := runner(t, files("INSERT INTO c VALUES (1);"))
	r2.BeforeCommit = func(_ context.Context, v uint, up bool) error {
		if v == 2 && up {
			return stop
		}
		return nil
	}
	require.ErrorIs(t, r2.Up(ctx), stop)
	assert.Equal(t, uint(1), version(t, r2))
	assert.Equal(t, []string{"a"}, tables(t, db2))
	r2.BeforeCommit = nil
	require.NoError(t, r2.Up(ctx))
	assert.Equal(t, uint(4), version(t, r2))
}

// A store an earlier release left dirty (golang-migrate marked a step
// it did not finish) is refused until forced, and nothing is run.
func TestADirtyVersionIsRefusedUntilForced(t *testing.T) {
	ctx := context.Background()
	r, db := runner(t, files("INSERT INTO c VALUES (1);"))
	require.NoError(t, r.Goto(ctx, 1))
	_, err := db.Exec(`UPDATE schema_migrations SET version = 2, dirty = true`)
	require.NoError(t, err)
	var se *workspace.SchemaError
	require.ErrorAs(t, r.Up(ctx), &se)
	assert.True(t, se.Dirty)
	assert.Equal(t, int64(2), se.Current)
	assert.Equal(t, []string{"a"}, tables(t, db), "nothing ran")

	require.NoError(t, r.Force(ctx, 1))
	require.NoError(t, r.Up(ctx))
	assert.Equal(t, uint(4), version(t, r))
	require.NoError(t, r.Force(ctx, -1))
	assert.Equal(t, uint(0), version(t, r))
}

func TestLoadRefusesFilesOfAnotherShape(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"no number":     {"init.up.sql": {Data: []byte("SELECT 1")}},
		"no direction":  {"000001_init.sql": {Data: []byte("SELECT 1")}},
		"version zero":  {"000000_init.up.sql": {Data: []byte("SELECT 1")}},
		"two names":     {"000001_a.up.sql": {Data: []byte("SELECT 1")}, "000001_b.down.sql": {Data: []byte("SELECT 1")}},
		"down alone":    {"000001_a.down.sql": {Data: []byte("SELECT 1")}},
		"bad direction": {"000001_a.sideways.sql": {Data: []byte("SELECT 1")}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sqlmigrate.Load(fsys)
			require.Error(t, err)
		})
	}
}
