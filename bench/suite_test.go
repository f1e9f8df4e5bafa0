package bench_test

import (
	"path/filepath"
	"testing"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/bench"
)

// BenchmarkSuite runs the shared workloads (W1-W7) on each backend, ours
// next to its raw baseline (modernc SQLite, plain file calls, raw pgx).
// It lives here rather than in the backends' packages so that no
// backend's test binary links the suite (and through it the server).
// Single-record writes from 16 goroutines on 4 handles are W1/c=16.
func BenchmarkSuite(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		bench.Run(b, bench.Harness{NewDSN: func(tb testing.TB) string { return "sqlite:" + filepath.Join(tb.TempDir(), "ws.db") }})
	})
	b.Run("json", func(b *testing.B) {
		bench.Run(b, bench.Harness{NewDSN: func(tb testing.TB) string { return "json:" + tb.TempDir() }})
	})
	b.Run("postgres", func(b *testing.B) { bench.Run(b, bench.Harness{NewDSN: pgtest.NewDSN}) })
}
