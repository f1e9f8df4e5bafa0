package bench_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/bench"
	"github.com/agentspace/agentspace/workspace"
)

// With Workspaces, the processes are spread over that many workspaces on
// one PostgreSQL database (the DSN's schema and its siblings), each
// through its own server: the row says so, carries the rates and CPU per
// op, and every workspace received its children's writes (each child's
// artifact there was updated past its first version).
func TestProcessesSpreadOverWorkspaces(t *testing.T) {
	const (
		spaces    = 3
		processes = 6
	)
	dsn := pgtest.NewDSN(t)
	conn := pgtest.Connect(t)
	for k := 2; k <= spaces; k++ {
		schema := pgtest.SchemaOf(t, dsn) + "_w" + strconv.Itoa(k)
		t.Cleanup(func() {
			_, err := conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			assert.NoError(t, err)
		})
	}
	cfg := bench.Config{
		DSN: dsn, Duration: 400 * time.Millisecond, Workloads: []string{"W1"}, Concurrency: []int{2},
		Serve: []string{"unix"}, Processes: processes, Workspaces: spaces, Child: testChild,
	}
	rows, err := bench.RunAll(context.Background(), cfg, nil)
	require.NoError(t, err)
	seen := map[string]bench.Row{}
	for _, r := range rows {
		seen[r.Variant] = r
	}
	served, ok := seen[fmt.Sprintf("via unix, %d processes, %d workspaces", processes, spaces)]
	require.True(t, ok, "no row over %d workspaces in %+v", spaces, rows)
	assert.Equal(t, "postgres", served.Backend)
	assert.Equal(t, processes, served.Concurrency)
	assert.Positive(t, served.OpsPerSec)
	assert.Positive(t, served.P50us)
	assert.Positive(t, served.RawOpsPerSec, "c=6 in process over the same stores")
	assert.Positive(t, served.CommitsPerOp, "the transactions of every workspace's store")
	assert.Positive(t, served.CPUusPerOp, "the servers' CPU per op")
	assertMachineCPU(t, served, served.Variant)
	assert.Contains(t, served.Note, fmt.Sprintf("over %d workspaces on the database", spaces))
	m := regexp.MustCompile(`store transactions per workspace: (\d+(?:, \d+)*)`).FindStringSubmatch(served.Note)
	require.NotNil(t, m, served.Note)
	counts := strings.Split(m[1], ", ")
	require.Len(t, counts, spaces)
	for k, c := range counts {
		n, err := strconv.Atoi(c)
		require.NoError(t, err)
		assert.Positive(t, n, "workspace %d committed nothing while the children ran", k+1)
	}
	alone, ok := seen[fmt.Sprintf("%d processes on the stores, %d workspaces", processes, spaces)]
	require.True(t, ok, "no row of the processes on the stores themselves")
	assert.Positive(t, alone.OpsPerSec)

	// Each workspace holds the artifacts of its children (child i on
	// workspace i mod 3), each updated past its first version.
	child := regexp.MustCompile(`/p(\d+)/w1/c1/0$`)
	for k := 1; k <= spaces; k++ {
		wdsn, err := bench.WorkspaceDSN(dsn, k)
		require.NoError(t, err)
		ws, err := workspace.Open(context.Background(), wdsn)
		require.NoError(t, err)
		page, err := ws.Artifacts().List(context.Background(), workspace.ArtifactFilter{NamePrefix: "bench-", Limit: 1000})
		require.NoError(t, err)
		var got []int
		for _, a := range page.Artifacts {
			if m := child.FindStringSubmatch(a.Name); m != nil {
				i, _ := strconv.Atoi(m[1])
				got = append(got, i)
				assert.Greater(t, a.Version, int64(1), "%s in workspace %d was never updated", a.Name, k)
			}
		}
		var want []int
		for i := k - 1; i < processes; i += spaces {
			want = append(want, i)
		}
		assert.ElementsMatch(t, want, got, "the children's artifacts in workspace %d", k)
		require.NoError(t, ws.Close())
	}
}

// WorkspaceDSN names a PostgreSQL workspace's sibling schemas and a
// SQLite workspace's sibling files; CheckWorkspaces refuses a count out
// of range, above the processes, or on a backend with no siblings.
func TestWorkspaceDSNNamesSiblings(t *testing.T) {
	cases := map[string]struct{ dsn, want string }{
		"postgres url":        {"postgres://u@h:5432/db?sslmode=disable&ws_schema=team", "postgres://u@h:5432/db?sslmode=disable&ws_schema=team_w3"},
		"postgres no schema":  {"postgresql://u@h/db", "postgresql://u@h/db?ws_schema=agentspace_w3"},
		"postgres key=value":  {"postgres:host=h dbname=db?ws_schema=team", "postgres:host=h dbname=db?ws_schema=team_w3"},
		"sqlite":              {"sqlite:/tmp/x/ws.db", "sqlite:/tmp/x/ws-w3.db"},
		"sqlite with params":  {"sqlite:rel/ws.db?ws_synchronous=normal", "sqlite:rel/ws-w3.db?ws_synchronous=normal"},
		"sqlite no extension": {"sqlite:/tmp/ws", "sqlite:/tmp/ws-w3"},
	}
	for name, tc := range cases {
		got, err := bench.WorkspaceDSN(tc.dsn, 3)
		require.NoError(t, err, name)
		assert.Equal(t, tc.want, got, name)
		first, err := bench.WorkspaceDSN(tc.dsn, 1)
		require.NoError(t, err, name)
		assert.Equal(t, tc.dsn, first, "workspace 1 is the DSN's own")
	}
	sqlite := "sqlite:" + filepath.Join(t.TempDir(), "ws.db")
	assert.NoError(t, bench.CheckWorkspaces(sqlite, 4, 16))
	assert.NoError(t, bench.CheckWorkspaces("json:/tmp/ws", 1, 0), "one workspace is the DSN's own, on any backend")
	for name, err := range map[string]error{
		"zero":           bench.CheckWorkspaces(sqlite, 0, 16),
		"negative":       bench.CheckWorkspaces(sqlite, -2, 16),
		"too many":       bench.CheckWorkspaces(sqlite, bench.MaxWorkspaces+1, 1000),
		"no processes":   bench.CheckWorkspaces(sqlite, 2, 0),
		"over processes": bench.CheckWorkspaces(sqlite, 8, 4),
		"json":           bench.CheckWorkspaces("json:/tmp/ws", 2, 16),
		"a server's":     bench.CheckWorkspaces("http://127.0.0.1:7465", 2, 16),
		"sqlite memory":  bench.CheckWorkspaces("sqlite::memory:", 2, 16),
	} {
		assert.ErrorIs(t, err, bench.ErrWorkspaces, name)
	}
	_, err := bench.RunAll(context.Background(), bench.Config{DSN: sqlite, Workloads: []string{"W1"}, Workspaces: 2, Processes: 2}, nil)
	assert.ErrorIs(t, err, bench.ErrWorkspaces, "RunAll refuses workspaces without Serve")
}
