package bench_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/bench"
)

// TestRunAllProducesARowPerWorkloadVariantAndLevel runs every workload for
// a few milliseconds: it checks the rows, not the numbers.
func TestRunAllProducesARowPerWorkloadVariantAndLevel(t *testing.T) {
	cfg := bench.Config{
		DSN:         "sqlite:" + filepath.Join(t.TempDir(), "ws.db"),
		Duration:    10 * time.Millisecond,
		Concurrency: []int{2},
		Artifacts:   150,
		Tasks:       50,
	}
	var emitted []bench.Row
	rows, err := bench.RunAll(context.Background(), cfg, func(r bench.Row) { emitted = append(emitted, r) })
	require.NoError(t, err)
	assert.Equal(t, rows, emitted)
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Workload] = true
		assert.Equal(t, "sqlite", r.Backend)
		assert.Positive(t, r.OpsPerSec, "%s %s c=%d", r.Workload, r.Variant, r.Concurrency)
		assert.GreaterOrEqual(t, r.P99us, r.P50us, "%s %s c=%d", r.Workload, r.Variant, r.Concurrency)
		if r.Workload == "W1" {
			assert.Positive(t, r.RawOpsPerSec)
			assert.Positive(t, r.Ratio)
			assert.Positive(t, r.CommitsPerOp)
		}
	}
	for _, w := range bench.Workloads {
		assert.True(t, seen[w], "no row for %s", w)
	}
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
	_, err = bench.ParseWorkloads("W1,W9")
	assert.ErrorIs(t, err, bench.ErrUnknownWorkload)
}
