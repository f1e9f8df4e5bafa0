// Package bench is agentspace's benchmark suite: the workloads of issue 7
// (W1-W7), run against a workspace and, side by side in the same run, against
// the bare driver doing the same minimal statements on the same kind of
// store (the raw baseline). The machine is noisy, so what matters is the
// ratio of the two, not absolute times.
//
// BenchmarkSuite in this package's tests runs them on every backend
// (go test -bench Suite/sqlite ./bench); a store of your own hooks in with
//
//	func BenchmarkSuite(b *testing.B) { bench.Run(b, bench.Harness{NewDSN: newDSN}) }
//
// and `wsctl bench --dsn DSN` runs the same workloads for a duration each
// with RunAll, printing one Row per workload, backend and concurrency.
//
// RunDocs runs every backend in one run (`wsctl bench docs`) and returns
// the Record that the docs' tables are rendered from (RenderRegion,
// UpdateRegions, between <!-- bench:begin --> and <!-- bench:end -->
// markers); Compare runs the workloads on two wsctl builds in turn, to show
// a change row by row against the build before it.
//
// The workloads write only under names, labels and resources that start
// with a per-run prefix ("bench-<id>"), so a run against a live workspace
// never touches its other records (it does add records and events). The
// raw baselines use their own tables: a sibling file for sqlite, a
// temporary schema for postgres, a temporary directory next to the store
// for json.
package bench
