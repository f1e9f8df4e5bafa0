// Package pgtest finds a PostgreSQL server for tests and hands out fresh
// workspaces on it, each in its own schema that is dropped when the test
// ends. It is for tests only: it reads the environment.
//
// The server is, in order:
//
//  1. AGENTSPACE_TEST_POSTGRES, a URL DSN (postgres://user:pw@host:port/db?sslmode=disable)
//     of a role that may create schemas and roles (to test as a non-superuser);
//  2. postgres://postgres@127.0.0.1:5432/test?sslmode=disable, if it answers;
//  3. a throwaway container (testcontainers-go's postgres module, image
//     postgres:16-alpine) where Docker runs; its reaper removes it when the
//     test process exits;
//  4. otherwise the tests skip with one loud line, or fail when
//     AGENTSPACE_TEST_REQUIRE_POSTGRES=1.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentspace/agentspace/internal/testskip"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Environment variables the package reads.
const (
	EnvDSN     = "AGENTSPACE_TEST_POSTGRES"
	EnvRequire = "AGENTSPACE_TEST_REQUIRE_POSTGRES"
	localDSN   = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
)

var (
	findOnce sync.Once
	found    string
	whyNot   string
)

func find() {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		found = dsn
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, localDSN)
	if err != nil {
		dsn, cerr := startContainer()
		if cerr != nil {
			whyNot = fmt.Sprintf("no PostgreSQL: %s is not set, 127.0.0.1:5432 does not answer (%v), and no container (%v)", EnvDSN, err, cerr)
			return
		}
		found = dsn
		return
	}
	_ = conn.Close(ctx)
	found = localDSN
}

// ServerDSN returns the admin DSN of the test server, or skips t (fails it
// when AGENTSPACE_TEST_REQUIRE_POSTGRES=1) if there is none.
func ServerDSN(t testing.TB) string {
	t.Helper()
	findOnce.Do(find)
	if found == "" {
		testskip.Skip(t, EnvRequire, "pgtest: SKIPPING POSTGRES TESTS: %s", whyNot)
	}
	return found
}

// Connect opens an admin connection to the test server, closed with t.Cleanup.
func Connect(t testing.TB) *pgx.Conn {
	t.Helper()
	dsn := ServerDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", driver.RedactError(err, dsn))
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// RandomName returns prefix followed by random hex: a fresh schema or role name.
func RandomName(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// WithParams returns dsn with the query parameters in kv (name, value, ...) set.
func WithParams(t testing.TB, dsn string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL DSN: %v", workspace.RedactDSN(dsn), err)
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// SchemaOf is the ws_schema a DSN names ("" when none).
func SchemaOf(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL DSN: %v", workspace.RedactDSN(dsn), err)
	}
	return u.Query().Get("ws_schema")
}

// Schema reserves a fresh schema name and drops the schema, if anything
// created it, when the test ends.
func Schema(t testing.TB) string {
	t.Helper()
	dsn := ServerDSN(t)
	name := RandomName("t_")
	t.Cleanup(func() { dropSchema(t, dsn, name) })
	return name
}

func dropSchema(t testing.TB, dsn, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Errorf("pgtest: drop schema %s: %v", name, driver.RedactError(err, dsn))
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", name, err)
	}
}

// NewDSN returns the DSN of a new, empty workspace: the test server with a
// fresh ws_schema, dropped when the test ends.
func NewDSN(t testing.TB) string {
	t.Helper()
	return WithParams(t, ServerDSN(t), "ws_schema", Schema(t))
}

// NewRoleDSN creates a LOGIN role that is not a superuser, may not create
// databases, roles or schemas, and owns only a fresh schema made for it;
// it returns a DSN that logs in as that role with ws_schema set to that
// schema. Role and schema are dropped when the test ends.
func NewRoleDSN(t testing.TB) string {
	t.Helper()
	admin := ServerDSN(t)
	conn := Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	role, schema := RandomName("r_"), RandomName("t_")
	password := RandomName("pw")
	roleID := pgx.Identifier{role}.Sanitize()
	stmts := []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD '%s'", roleID, password),
		fmt.Sprintf("CREATE SCHEMA %s AUTHORIZATION %s", pgx.Identifier{schema}.Sanitize(), roleID),
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("pgtest: create role: %v", err)
		}
	}
	t.Cleanup(func() {
		dropSchema(t, admin, schema)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("pgtest: drop role: %v", driver.RedactError(err, admin))
			return
		}
		defer c.Close(ctx)
		// The role's sessions must end before it can go.
		_, _ = c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		if _, err := c.Exec(ctx, "DROP ROLE IF EXISTS "+roleID); err != nil {
			t.Errorf("pgtest: drop role %s: %v", role, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgtest: %s is not a URL DSN: %v", workspace.RedactDSN(admin), err)
	}
	u.User = url.UserPassword(role, password)
	return WithParams(t, u.String(), "ws_schema", schema)
}
