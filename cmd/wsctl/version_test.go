package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// TestVersionReportsTheSchemaEachMigratorKnows checks `wsctl version`
// against what each backend's migrator says is its newest schema.
func TestVersionReportsTheSchemaEachMigratorKnows(t *testing.T) {
	ctx := context.Background()
	b := readBuildInfo()
	dir := t.TempDir()
	dsns := map[string]string{
		"sqlite": "sqlite:" + filepath.Join(dir, "ws.db"),
		"json":   "json:" + filepath.Join(dir, "ws"),
	}
	// Looking for the server in a subtest skips only postgres when there is none.
	server := ""
	t.Run("postgres-server", func(t *testing.T) { server = pgtest.ServerDSN(t) })
	if server != "" {
		dsns["postgres"] = pgtest.NewDSN(t)
	}
	for scheme, dsn := range dsns {
		m, err := workspace.OpenMigrator(ctx, dsn)
		require.NoError(t, err, scheme)
		assert.Equal(t, m.Latest(), b.Schemas[scheme], scheme)
		require.NoError(t, m.Close())
	}
	assert.NotEmpty(t, b.Go)
	assert.Contains(t, b.String(), "schema versions: json ")
}
