package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// The migration lock's key is the one earlier releases' golang-migrate
// derives from the same names (values computed with golang-migrate
// v4.20.1's GenerateAdvisoryLockId), so that migrations by a release of
// each kind exclude each other.
func TestTheMigrationLockKeyIsTheOneEarlierReleasesTake(t *testing.T) {
	assert.Equal(t, int64(2691438403), migrateLockID("test", "agentspace"))
	assert.Equal(t, int64(26263431), migrateLockID("postgres", "team_1"))
}

// An earlier release migrating (holding its session-scoped lock) holds
// this release's migration off until it lets go; then four handles
// opening the schema at once, each with ws_automigrate, take the steps
// in turns: each step runs once, and every handle ends at the latest
// version, clean.
func TestMigrationsTakeTurnsWithEachOtherAndWithEarlierReleases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dsn := pgtest.NewDSN(t)
	schema := pgtest.SchemaOf(t, dsn)
	m, err := workspace.OpenMigrator(ctx, dsn)
	require.NoError(t, err)
	latest := m.Latest()
	require.NoError(t, m.Up(ctx))
	require.NoError(t, m.Down(ctx, 3))
	require.NoError(t, m.Close())

	// An earlier release's lock: pg_advisory_lock on its own session.
	old := pgtest.Connect(t)
	_, err = old.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLockID(old.Config().Database, schema))
	require.NoError(t, err)

	var steps sync.Map // version -> times run
	clear := setMigrateHook(schema, func(_ context.Context, v uint, up bool) error {
		n, _ := steps.LoadOrStore(v, new(int))
		*n.(*int)++ // under the migration lock: one step at a time
		return nil
	})
	defer clear()

	var wg sync.WaitGroup
	errs := make([]error, 4)
	opened := make(chan struct{}, 4)
	for i := range errs {
		wg.Go(func() {
			ws, err := workspace.Open(ctx, pgtest.WithParams(t, dsn, "ws_automigrate", "true"), workspace.Options{Private: true})
			if err == nil {
				opened <- struct{}{}
				err = ws.Close()
			}
			errs[i] = err
		})
	}
	select {
	case <-opened:
		t.Fatal("a handle opened while an earlier release held the migration lock")
	case <-time.After(500 * time.Millisecond):
	}
	_, err = old.Exec(ctx, `SELECT pg_advisory_unlock($1)`, migrateLockID(old.Config().Database, schema))
	require.NoError(t, err)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "handle %d", i)
	}
	for v := latest - 2; v <= latest; v++ {
		n, ok := steps.Load(v)
		require.True(t, ok, "step %d ran", v)
		assert.Equal(t, 1, *n.(*int), "step %d ran once", v)
	}
	m, err = workspace.OpenMigrator(ctx, dsn)
	require.NoError(t, err)
	defer m.Close()
	v, dirty, err := m.Version(ctx)
	require.NoError(t, err)
	assert.Equal(t, latest, v)
	assert.False(t, dirty)
}
