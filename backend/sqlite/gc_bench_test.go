package sqlite_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/agentspace/agentspace/conformance"
)

// gcEvents is how many events BenchmarkGC loads (AGENTSPACE_BENCH_GC_EVENTS).
func gcEvents() int {
	if n, err := strconv.Atoi(os.Getenv("AGENTSPACE_BENCH_GC_EVENTS")); err == nil && n > 1000 {
		return n
	}
	return 100000
}

// gcVersions is how many old artifact versions BenchmarkGC loads
// (AGENTSPACE_BENCH_GC_VERSIONS, in thousands' multiples; default none).
func gcVersions() int {
	n, _ := strconv.Atoi(os.Getenv("AGENTSPACE_BENCH_GC_VERSIONS"))
	return max(n, 0)
}

// BenchmarkGC measures gc of a large log under a concurrent writer: run it
// with -benchtime 1x. Space is the database file plus its WAL: deleted
// rows go to SQLite's free list, reused by later writes.
func BenchmarkGC(b *testing.B) {
	path := filepath.Join(b.TempDir(), "ws.db")
	size := func() int64 {
		var n int64
		for _, p := range []string{path, path + "-wal"} {
			if fi, err := os.Stat(p); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	conformance.MeasureGC(b, "sqlite:"+path, gcEvents(), gcVersions(), size)
}
