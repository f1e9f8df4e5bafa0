package backup_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backup"
	"github.com/agentspace/agentspace/conformance"
	"github.com/agentspace/agentspace/workspace"
)

// BenchmarkBackup times both backups of one SQLite store of
// AGENTSPACE_BENCH_BACKUP_EVENTS events (default 100,000) and 10,000
// artifact versions, interleaved in each iteration: the copy of the file
// (VACUUM INTO, integrity check and verify of the copy) and the archive
// (export, import into a scratch SQLite store, verify, export again and
// compare). It reports each one's milliseconds and size, and their ratio.
func BenchmarkBackup(b *testing.B) {
	n := 100000
	if v, err := strconv.Atoi(os.Getenv("AGENTSPACE_BENCH_BACKUP_EVENTS")); err == nil && v > 1000 {
		n = v
	}
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "ws.db"))
	require.NoError(b, err)
	defer ws.Close()
	_, err = ws.Import(ctx, bytes.NewReader(conformance.BenchArchive(b, n, 10000)), workspace.ArchiveOptions{})
	require.NoError(b, err)
	var fileTook, archiveTook time.Duration
	var fileBytes, archiveBytes int64
	b.ResetTimer()
	for b.Loop() {
		dir := b.TempDir()
		start := time.Now()
		r, err := backup.Write(ctx, ws, dir, backup.Options{})
		require.NoError(b, err)
		fileTook += time.Since(start)
		fileBytes = r.Bytes
		start = time.Now()
		r, err = backup.Write(ctx, ws, dir, backup.Options{Archive: true})
		require.NoError(b, err)
		archiveTook += time.Since(start)
		archiveBytes = r.Bytes
	}
	b.ReportMetric(float64(fileTook.Milliseconds())/float64(b.N), "file_ms")
	b.ReportMetric(float64(archiveTook.Milliseconds())/float64(b.N), "archive_ms")
	b.ReportMetric(float64(archiveTook)/float64(fileTook), "archive/file")
	b.ReportMetric(float64(fileBytes)/(1<<20), "file_MiB")
	b.ReportMetric(float64(archiveBytes)/(1<<20), "archive_MiB")
}
