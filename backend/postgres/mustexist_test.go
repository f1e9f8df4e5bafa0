package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/conformance"
	"github.com/agentspace/agentspace/workspace"
)

// schemaExists reports whether the server has the schema.
func schemaExists(t *testing.T, name string) bool {
	t.Helper()
	conn := pgtest.Connect(t)
	var ok bool
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, name).Scan(&ok))
	return ok
}

func TestMustExistOnAMissingSchemaCreatesNothing(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(t)
	schema := pgtest.SchemaOf(t, dsn)
	_, err := workspace.Open(ctx, dsn, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	assert.Contains(t, err.Error(), "the schema does not exist")
	_, err = workspace.OpenMigrator(ctx, dsn, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	assert.False(t, schemaExists(t, schema), "a failed must-exist open created the schema")
}

func TestMustExistOnAnEmptySchemaLeavesItEmpty(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(t)
	schema := pgtest.SchemaOf(t, dsn)
	conn := pgtest.Connect(t)
	_, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	_, err = workspace.Open(ctx, dsn, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	assert.Contains(t, err.Error(), "holds no agentspace schema version")
	var tables int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&tables))
	assert.Zero(t, tables)
}

func TestMustExistOpensACreatedSchemaAndNotAnEmptiedOne(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(t)
	ws, err := workspace.Open(ctx, dsn, workspace.Options{Private: true})
	require.NoError(t, err)
	require.NoError(t, ws.Close())
	ws, err = workspace.Open(ctx, dsn, workspace.Options{MustExist: true, Private: true})
	require.NoError(t, err)
	require.NoError(t, ws.Close())

	m, err := workspace.OpenMigrator(ctx, dsn, workspace.Options{MustExist: true})
	require.NoError(t, err)
	require.NoError(t, m.Down(ctx, 0))
	require.NoError(t, m.Close())
	_, err = workspace.Open(ctx, dsn, workspace.Options{MustExist: true, Private: true})
	conformance.RequireNoWorkspace(t, err)
}
