package postgres_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/conformance"
)

// gcVersions is how many old artifact versions BenchmarkGC loads
// (AGENTSPACE_BENCH_GC_VERSIONS, in thousands' multiples; default none).
func gcVersions() int {
	n, _ := strconv.Atoi(os.Getenv("AGENTSPACE_BENCH_GC_VERSIONS"))
	return max(n, 0)
}

// BenchmarkGC measures gc of a large log under a concurrent writer: run it
// with -benchtime 1x (AGENTSPACE_BENCH_GC_EVENTS events, default 100000).
// Space is the events table's size after a plain VACUUM, which makes the
// deleted rows' pages reusable without locking out writers.
func BenchmarkGC(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("AGENTSPACE_BENCH_GC_EVENTS")); err == nil && v > 1000 {
		n = v
	}
	dsn := pgtest.NewDSN(b)
	conn := pgtest.Connect(b)
	table := pgx.Identifier{pgtest.SchemaOf(b, dsn), "events"}.Sanitize()
	size := func() int64 {
		_, err := conn.Exec(context.Background(), "VACUUM "+table)
		require.NoError(b, err)
		var s int64
		require.NoError(b, conn.QueryRow(context.Background(), "SELECT pg_table_size($1::regclass)", table).Scan(&s))
		return s
	}
	conformance.MeasureGC(b, dsn, n, gcVersions(), size)
}

// BenchmarkW1 is W1 at c=16 on one handle (conformance.MeasureW1).
func BenchmarkW1(b *testing.B) {
	conformance.MeasureW1(b, pgtest.NewDSN(b), 16)
}
