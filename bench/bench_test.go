package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	_ "github.com/agentspace/agentspace/backend/postgres"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/bench"
	"github.com/agentspace/agentspace/internal/wsctltest"
)

// childEnv makes this test binary the suite's child process (W6 other
// process, MEM) when set.
const childEnv = "AGENTSPACE_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := bench.ServeChild(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testChild re-executes this test binary as the suite's child. A
// race-enabled binary sleeps a second at exit by default (GORACE's
// atexit_sleep_ms), and the suite stops its children one after another:
// the docs run alone stopped some twenty, a second each.
func testChild(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$") // #nosec G204 -- this very test binary
	cmd.Env = append(os.Environ(), childEnv+"=1", wsctltest.QuietRaceExit())
	cmd.Stderr = os.Stderr
	return cmd
}

// TestRunAllProducesARowPerWorkloadVariantAndLevel runs every workload for
// a few milliseconds: it checks the rows, not the numbers.
func TestRunAllProducesARowPerWorkloadVariantAndLevel(t *testing.T) {
	cfg := bench.Config{
		DSN:         "sqlite:" + filepath.Join(t.TempDir(), "ws.db"),
		Duration:    10 * time.Millisecond,
		Concurrency: []int{2},
		Artifacts:   150,
		Tasks:       50,
		Streams:     20,
		PollEvery:   5 * time.Millisecond,
		Child:       testChild,
	}
	var emitted []bench.Row
	rows, err := bench.RunAll(context.Background(), cfg, func(r bench.Row) { emitted = append(emitted, r) })
	require.NoError(t, err)
	assert.Equal(t, rows, emitted)
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Workload] = true
		seen[r.Workload+" "+r.Variant] = true
		assert.Equal(t, "sqlite", r.Backend)
		if r.Workload == "MEM" {
			assert.Contains(t, r.Note, "child process")
			assert.NotZero(t, r.HeapKiB, "%s %s c=%d", r.Workload, r.Variant, r.Concurrency)
			continue
		}
		if r.Workload == "SSE" {
			assert.Equal(t, 20, r.Concurrency)
			assert.Contains(t, r.Note, "server in a child process")
			continue
		}
		assert.Positive(t, r.OpsPerSec, "%s %s c=%d", r.Workload, r.Variant, r.Concurrency)
		assert.GreaterOrEqual(t, r.P99us, r.P50us, "%s %s c=%d", r.Workload, r.Variant, r.Concurrency)
		if r.Workload == "W8" {
			// Its latencies may be 0: a poll can find the message before
			// the sender's call has returned.
			assert.Positive(t, r.RawOpsPerSec, "the polling baseline ran")
		}
		if r.Workload == "W1" {
			assert.Positive(t, r.RawOpsPerSec)
			assert.Positive(t, r.Ratio)
			assert.Positive(t, r.CommitsPerOp)
		}
	}
	for _, w := range bench.Workloads {
		assert.True(t, seen[w], "no row for %s", w)
	}
	for _, v := range []string{"W8 same handle", "W8 other handle", "W6 other process", "SSE idle streams", "SSE fan-out", "MEM idle handle", "MEM idle shared handle", "MEM subscribers", "MEM subscribers after 2000 events"} {
		assert.True(t, seen[v], "no row for %s", v)
	}
}

// TestMemInThisProcessWithoutAChild: without Config.Child, MEM measures in
// the process itself and says so, and W6 has no other-process row.
func TestMemInThisProcessWithoutAChild(t *testing.T) {
	cfg := bench.Config{
		DSN:       "sqlite:" + filepath.Join(t.TempDir(), "ws.db"),
		Duration:  10 * time.Millisecond,
		Workloads: []string{"W6", "MEM"},
	}
	rows, err := bench.RunAll(context.Background(), cfg, nil)
	require.NoError(t, err)
	var mem int
	for _, r := range rows {
		assert.NotEqual(t, "other process", r.Variant)
		if r.Workload == "MEM" {
			mem++
			assert.True(t, strings.HasSuffix(r.Note, "in the bench process") || strings.Contains(r.Note, "no /proc"), r.Note)
		}
	}
	assert.Equal(t, 8, mem, "idle handle, idle shared handle, then 3 rows for each of 1 and 100 subscribers")
}

func TestRowEncodesTheDocumentedJSONFields(t *testing.T) {
	enc, err := json.Marshal(bench.Row{Workload: "W1", Backend: "sqlite", Concurrency: 4, OpsPerSec: 1, P50us: 2, P99us: 3, RawOpsPerSec: 4, Ratio: 0.25})
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(enc, &m))
	for _, f := range []string{"workload", "backend", "concurrency", "ops_per_sec", "p50_us", "p99_us", "raw_ops_per_sec", "ratio"} {
		assert.Contains(t, m, f)
	}
}

func TestParseWorkloadsRejectsAnUnknownName(t *testing.T) {
	got, err := bench.ParseWorkloads("w1, W4")
	require.NoError(t, err)
	assert.Equal(t, []string{"W1", "W4"}, got)
	got, err = bench.ParseWorkloads("mem")
	require.NoError(t, err)
	assert.Equal(t, []string{"MEM"}, got)
	_, err = bench.ParseWorkloads("W1,W9")
	assert.ErrorIs(t, err, bench.ErrUnknownWorkload)
}

// TestW6AndMemOnEveryBackend: W6 has its other-process row everywhere and
// its other-pool row on Postgres, and MEM measures in the child.
func TestW6AndMemOnEveryBackend(t *testing.T) {
	dsns := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") },
		"json":     func(t *testing.T) string { return "json:" + filepath.Join(t.TempDir(), "ws") },
		"postgres": func(t *testing.T) string { return pgtest.NewDSN(t) },
	}
	for backend, dsn := range dsns {
		t.Run(backend, func(t *testing.T) {
			cfg := bench.Config{DSN: dsn(t), Duration: 10 * time.Millisecond, Workloads: []string{"W6", "MEM"}, Child: testChild}
			rows, err := bench.RunAll(context.Background(), cfg, nil)
			require.NoError(t, err)
			seen := map[string]bool{}
			for _, r := range rows {
				seen[r.Workload+" "+r.Variant] = true
				assert.Equal(t, backend, r.Backend)
				if r.Workload == "W6" {
					assert.Positive(t, r.OpsPerSec, r.Variant)
				}
			}
			assert.True(t, seen["W6 other process"])
			assert.Equal(t, backend == "postgres", seen["W6 other pool"])
			assert.True(t, seen["MEM subscribers after 2000 events"])
		})
	}
}

// TestAnalyzeAfterTheLoadOnPostgres: --analyze runs ANALYZE on the
// workspace's tables after W3's load, and the row says so.
func TestAnalyzeAfterTheLoadOnPostgres(t *testing.T) {
	dsn := pgtest.NewDSN(t)
	cfg := bench.Config{DSN: dsn, Duration: 10 * time.Millisecond, Workloads: []string{"W3"}, Concurrency: []int{1}, Artifacts: 150, Analyze: true}
	rows, err := bench.RunAll(context.Background(), cfg, nil)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, "N=150, analyzed", rows[0].Note)
	// ANALYZE sets pg_class.reltuples, in its own transaction (it is -1
	// on a table never analyzed or vacuumed).
	conn := pgtest.Connect(t)
	var tuples float64
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		  WHERE c.relname = 'artifacts' AND n.nspname = substring($1 from 'ws_schema=([a-z0-9_]+)')`, dsn).Scan(&tuples))
	assert.GreaterOrEqual(t, tuples, 150.0)
}
