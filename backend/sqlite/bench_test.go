package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/agentspace/agentspace/bench"
)

// BenchmarkSuite runs the shared workloads (W1-W7, ours next to raw modernc).
func BenchmarkSuite(b *testing.B) {
	bench.Run(b, bench.Harness{NewDSN: func(tb testing.TB) string { return "sqlite:" + filepath.Join(tb.TempDir(), "ws.db") }})
}
