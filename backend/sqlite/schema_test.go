package sqlite_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

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
	assert.Contains(t, err.Error(), "migrate the store up")
	assert.NotContains(t, err.Error(), "wsctl", "the CLI adds its own hint")

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
	assert.Contains(t, err.Error(), fmt.Sprintf("force its version to %d", sqlite.LatestVersion()))

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
	// One step down: the versions need not be consecutive.
	assert.Less(t, version(), latest)
	assert.Positive(t, version())
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
