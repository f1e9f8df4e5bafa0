package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/conformance"
	"github.com/agentspace/agentspace/workspace"
)

// TestAMissingDatabaseIsNoWorkspaceNotAnOutage: a DSN naming a database
// the server does not have is no workspace (with how to create the
// database), not ErrUnavailable, on every way in: open, open with
// MustExist (the probe) and the migrator. A role the server refuses is
// not an outage either.
func TestAMissingDatabaseIsNoWorkspaceNotAnOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := url.Parse(pgtest.ServerDSN(t))
	require.NoError(t, err)
	db := pgtest.RandomName("nodb")
	u.Path = "/" + db
	dsn := u.String()

	_, err = workspace.Open(ctx, dsn)
	conformance.RequireNoWorkspace(t, err)
	assert.NotErrorIs(t, err, workspace.ErrUnavailable)
	assert.Contains(t, err.Error(), `no workspace at database "`+db+`": the database does not exist on the server; create it first with 'createdb `)
	assert.Contains(t, err.Error(), " "+db+"' (or SQL's create database)")

	_, err = workspace.Open(ctx, dsn, workspace.Options{MustExist: true})
	conformance.RequireNoWorkspace(t, err)
	_, err = workspace.OpenMigrator(ctx, dsn, workspace.Options{})
	conformance.RequireNoWorkspace(t, err)

	r, err := url.Parse(pgtest.NewDSN(t))
	require.NoError(t, err)
	r.User = url.User(pgtest.RandomName("norole"))
	_, err = workspace.Open(ctx, r.String())
	require.Error(t, err)
	assert.NotErrorIs(t, err, workspace.ErrUnavailable, "a refused role is not an outage")
}
