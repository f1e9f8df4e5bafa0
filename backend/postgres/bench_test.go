package postgres_test

import (
	"testing"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/bench"
)

// BenchmarkSuite runs the shared workloads (W1-W7, ours next to raw pgx).
// Single-record writes from 16 goroutines on 4 handles are W1/c=16.
func BenchmarkSuite(b *testing.B) { bench.Run(b, bench.Harness{NewDSN: pgtest.NewDSN}) }
