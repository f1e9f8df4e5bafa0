package bench_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/bench"
)

// BenchmarkPgScale measures, in one run, W1 through 2 servers on one
// workspace, and on 2 and 4 (schemas of their own, 2 servers each), 32
// clients in all, as ratios to the raw driver (docs/postgres.md quotes it):
//
//	go test -run '^$' -bench PgScale -benchtime 1x ./bench/
func BenchmarkPgScale(b *testing.B) {
	dsn := pgtest.ServerDSN(b)
	for range b.N {
		rows, err := bench.RunPgScale(context.Background(), bench.PgScaleConfig{DSN: dsn, Duration: 2 * time.Second, Progress: os.Stderr})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rows {
			b.Logf("W1, %d workspace(s) x %d servers, %d clients: %.0f/s, raw %.0f/s, ratio %.2f, commits/op %.2f",
				r.Workspaces, r.Servers, r.Clients, r.OpsPerSec, r.RawOpsPerSec, r.Ratio, r.CommitsPerOp)
			b.ReportMetric(r.OpsPerSec, fmt.Sprintf("ops/s-%dws", r.Workspaces))
			b.ReportMetric(r.Ratio, fmt.Sprintf("ratio-%dws", r.Workspaces))
		}
	}
}
