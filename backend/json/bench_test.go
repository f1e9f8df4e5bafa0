package jsonstore_test

import (
	"testing"

	"github.com/agentspace/agentspace/bench"
)

// BenchmarkSuite runs the shared workloads (W1-W7, ours next to plain file calls).
func BenchmarkSuite(b *testing.B) {
	bench.Run(b, bench.Harness{NewDSN: func(tb testing.TB) string { return "json:" + tb.TempDir() }})
}
