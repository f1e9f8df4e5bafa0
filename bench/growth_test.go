package bench_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/bench"
)

// checkGrowthRows: every measure and whole-store operation has a row at
// each size, with figures, and the larger size's measures give their
// ratio to the smaller's.
func checkGrowthRows(t *testing.T, rows []bench.Row, backend string) {
	t.Helper()
	seen := map[string]bench.Row{}
	for _, r := range rows {
		assert.Equal(t, "GROWTH", r.Workload)
		assert.Equal(t, backend, r.Backend)
		assert.Positive(t, r.P50us, r.Variant)
		assert.Positive(t, r.P99us, r.Variant)
		assert.Positive(t, r.OpsPerSec, r.Variant)
		seen[r.Variant] = r
	}
	measures := []string{"W1", "W2", "W5", "board", "events after head-100", "resume from head-1000"}
	admin := []string{"verify", "backup", "export", "gc"}
	for _, size := range []string{"500", "1.5k"} {
		for _, m := range measures {
			r, ok := seen[m+" at "+size+" events"]
			if assert.True(t, ok, "no row for %s at %s", m, size) && size == "1.5k" {
				assert.Contains(t, r.Note, "x the p50 at 500 events", m)
			}
			if ok && backend == "postgres" {
				assert.Contains(t, r.Note, "ANALYZE after the fill", "%s at %s: statistics as autovacuum keeps them", m, size)
			}
		}
		for _, m := range admin {
			r, ok := seen[m+" at "+size+" events"]
			if assert.True(t, ok, "no row for %s at %s", m, size) {
				assert.Contains(t, r.Note, "per million events", m)
			}
		}
	}
	assert.Len(t, rows, 2*(len(measures)+len(admin)))
}

// TestGrowthSQLite: RunGrowth fills a SQLite store of its own to 500 and
// 1,500 events (300 tasks) and measures every operation at each.
func TestGrowthSQLite(t *testing.T) {
	dir := t.TempDir()
	rows, err := bench.RunGrowth(context.Background(), bench.GrowthConfig{
		DSN: "sqlite:" + filepath.Join(dir, "unused.db"), Sizes: []int64{500, 1500}, Tasks: 300, Duration: 20 * time.Millisecond, Dir: dir,
	})
	require.NoError(t, err)
	checkGrowthRows(t, rows, "sqlite")
}

// TestGrowthPostgres: the same on a schema of its own on PostgreSQL.
func TestGrowthPostgres(t *testing.T) {
	dsn := pgtest.ServerDSN(t)
	rows, err := bench.RunGrowth(context.Background(), bench.GrowthConfig{
		DSN: dsn, Sizes: []int64{500, 1500}, Tasks: 300, Duration: 20 * time.Millisecond, Dir: t.TempDir(),
	})
	require.NoError(t, err)
	checkGrowthRows(t, rows, "postgres")
}

// TestGrowthRefusesJSONAboveItsBound: a json store is not filled past
// MaxJSONGrowthEvents; the error says so and why, before anything is made.
func TestGrowthRefusesJSONAboveItsBound(t *testing.T) {
	dir := t.TempDir()
	_, err := bench.RunGrowth(context.Background(), bench.GrowthConfig{
		DSN: "json:" + filepath.Join(dir, "ws"), Sizes: []int64{10_000, bench.MaxJSONGrowthEvents + 1}, Dir: dir,
	})
	var se *bench.GrowthSizeError
	require.True(t, errors.As(err, &se), "%v", err)
	assert.Equal(t, "json", se.Backend)
	assert.Equal(t, int64(bench.MaxJSONGrowthEvents), se.Max)
	assert.True(t, strings.Contains(err.Error(), "in memory"), err.Error())
	entries, _ := filepath.Glob(filepath.Join(dir, "*"))
	assert.Empty(t, entries, "nothing was made")
}

// TestGrowthJSONAtSmallSizes: below its bound the json store is measured.
func TestGrowthJSONAtSmallSizes(t *testing.T) {
	dir := t.TempDir()
	rows, err := bench.RunGrowth(context.Background(), bench.GrowthConfig{
		DSN: "json:" + filepath.Join(dir, "ws"), Sizes: []int64{500, 1500}, Tasks: 300, Duration: 20 * time.Millisecond, Dir: dir,
	})
	require.NoError(t, err)
	checkGrowthRows(t, rows, "json")
}
