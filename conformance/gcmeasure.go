package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// MeasureGC loads a store with events and, in artifacts of 1,001
// versions each, versions old versions (by importing an archive, which is
// far faster than writing them one by one), then measures gc of all but
// the newest 1000 events and each artifact's head while one writer keeps making W1's write (a
// version-checked update of a note it owns): the time gc takes, what it
// removed (canonical bytes), the space a reclaim step then gives back and
// how much smaller size reports the store (nil: not measured), the writer's longest and
// 99th-percentile write during gc and during the same time just before it,
// and its rate during gc as a ratio to its rate before. It reports them
// with b.ReportMetric.
func MeasureGC(b *testing.B, dsn string, events, versions int, size func() int64) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, dsn, workspace.Options{})
	require.NoError(b, err)
	defer ws.Close()
	_, err = ws.Import(ctx, bytes.NewReader(gcArchive(b, events, versions)), workspace.ArchiveOptions{})
	require.NoError(b, err)

	var before int64
	if size != nil {
		before = size()
	}
	n, err := ws.Notes().Put(ctx, as("writer"), workspace.NotePut{Kind: "load", Key: "w1"})
	require.NoError(b, err)
	version := n.Version
	// write makes W1 writes until stop closes, and returns their latencies.
	write := func(stop <-chan struct{}) []time.Duration {
		var lat []time.Duration
		for {
			select {
			case <-stop:
				return lat
			default:
			}
			start := time.Now()
			n, err := ws.Notes().Put(ctx, workspace.Write{Actor: "writer", IfVersion: version}, workspace.NotePut{Kind: "load", Key: "w1"})
			if err != nil {
				b.Error(err)
				return lat
			}
			lat = append(lat, time.Since(start))
			version = n.Version
		}
	}
	run := func(during func()) ([]time.Duration, time.Duration) {
		stop := make(chan struct{})
		var lat []time.Duration
		var wg sync.WaitGroup
		wg.Go(func() { lat = write(stop) })
		start := time.Now()
		during()
		took := time.Since(start)
		close(stop)
		wg.Wait()
		return lat, took
	}
	var r workspace.GCReport
	var gcErr error
	b.ResetTimer()
	p := workspace.GCPolicy{Actor: "gc", KeepEvents: 1000}
	if versions > 0 {
		p.KeepVersions = 1
	}
	gcLat, took := run(func() { r, gcErr = ws.GC(ctx, p) })
	b.StopTimer()
	require.NoError(b, gcErr)
	require.GreaterOrEqual(b, r.Events.Count, int64(events-1000))
	require.Equal(b, int64(versions/1000*1000), r.Versions.Count)
	// The baseline runs after gc, for as long, so that both see a store of
	// about the same size (the head's side of the log is what W1 touches).
	baseLat, baseTook := run(func() { time.Sleep(took) })

	b.ReportMetric(took.Seconds(), "gc_s")
	b.ReportMetric(float64(r.Events.Count), "events_removed")
	b.ReportMetric(float64(r.Versions.Count), "versions_removed")
	b.ReportMetric(float64(r.Batches), "batches")
	b.ReportMetric(float64(r.LongestBatch.Microseconds())/1e3, "longest_batch_ms")
	b.ReportMetric(ms(percentile(gcLat, 1)), "max_write_ms_during_gc")
	b.ReportMetric(ms(percentile(gcLat, 0.99)), "p99_write_ms_during_gc")
	b.ReportMetric(ms(percentile(baseLat, 1)), "max_write_ms_without")
	b.ReportMetric(ms(percentile(baseLat, 0.99)), "p99_write_ms_without")
	b.ReportMetric((float64(len(gcLat))/took.Seconds())/(float64(len(baseLat))/baseTook.Seconds()), "write_rate_ratio")
	b.ReportMetric(float64(r.Events.Bytes+r.Versions.Bytes)/(1<<20), "MiB_removed")
	// Then the space: a reclaim step (SQLite's incremental vacuum, in short
	// steps; nothing to do on Postgres, whose deletes leave pages that
	// vacuum makes reusable, or on json, whose files are rewritten), timed
	// apart, and the store's size before the load's gc and after it.
	start := time.Now()
	rr, err := ws.GC(ctx, workspace.GCPolicy{Actor: "gc", Reclaim: true})
	require.NoError(b, err)
	b.ReportMetric(time.Since(start).Seconds(), "reclaim_s")
	b.ReportMetric(float64(rr.Reclaimed)/(1<<20), "MiB_given_back")
	if size != nil {
		b.ReportMetric(float64(before-size())/(1<<20), "MiB_smaller")
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// percentile returns the p-quantile of lat (0 for none), sorting it.
func percentile(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, int(float64(len(lat))*p))]
}

// BenchArchive is the archive MeasureGC loads: n note events and
// versions/1000 artifacts of 1,001 small versions each, for benchmarks
// that need a large store quickly.
func BenchArchive(b *testing.B, n, versions int) []byte { return gcArchive(b, n, versions) }

// gcArchive is an archive of n note events and versions/1000 artifacts
// of 1,001 small versions each, and nothing else (no hashes: the
// importing store chains them).
func gcArchive(b *testing.B, n, versions int) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
	require.NoError(b, enc.Encode(map[string]any{"type": "header", "format": workspace.ArchiveFormat, "version": workspace.ArchiveVersion}))
	stats := workspace.ArchiveStats{Events: int64(n)}
	for a := range versions / 1000 {
		id := fmt.Sprintf("0190a000-0000-7000-8000-%012d", a)
		stats.Artifacts++
		for v := int64(1); v <= 1001; v++ {
			content := []byte(fmt.Sprintf("artifact %d version %d: a line of content", a, v))
			sum := sha256.Sum256(content)
			at := t0.Add(time.Duration(v) * time.Millisecond)
			require.NoError(b, enc.Encode(map[string]any{"type": "artifact", "artifact": workspace.Artifact{ID: id, Name: fmt.Sprintf("load/a%04d.md", a),
				Kind: "plan", Owner: "loader", Version: v, Content: content, ContentType: "text/markdown", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(content)),
				CreatedAt: t0, CreatedBy: "loader", UpdatedAt: at, UpdatedBy: "loader"}}))
			stats.Versions++
			stats.ContentBytes += int64(len(content))
		}
	}
	require.NoError(b, enc.Encode(map[string]any{"type": "log", "floor": 1, "head": n}))
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("k%07d", i)
		require.NoError(b, enc.Encode(map[string]any{"type": "event", "event": workspace.Event{Seq: int64(i), Time: t0.Add(time.Duration(i) * time.Microsecond),
			Actor: "loader", Type: workspace.EventNotePut, Subject: workspace.Subject{Kind: "note", ID: "load/" + key, Name: key}, Version: 1,
			Message: "a message of a typical length for an agent's write"}}))
	}
	require.NoError(b, enc.Encode(map[string]any{"type": "end", "counts": stats}))
	return buf.Bytes()
}
