package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// MeasureGC loads a store with events (by importing an archive, which is
// far faster than writing them one by one), then measures gc of all but
// the newest 1000 while one writer keeps putting notes: the time gc takes,
// the space size reports reclaimed (nil: not measured), the longest write
// while it runs, and the writer's rate during gc as a ratio to its rate
// just before. It reports them with b.ReportMetric.
func MeasureGC(b *testing.B, dsn string, events int, size func() int64) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, dsn, workspace.Options{})
	require.NoError(b, err)
	defer ws.Close()
	_, err = workspace.Import(ctx, ws, bytes.NewReader(eventArchive(b, events)), workspace.ArchiveOptions{})
	require.NoError(b, err)

	var before int64
	if size != nil {
		before = size()
	}
	// The writer's rate without gc, then with it.
	write := func(stop <-chan struct{}, n *atomic.Int64, worst *atomic.Int64) {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			_, err := ws.Notes().Put(ctx, as("writer"), workspace.NotePut{Kind: "load", Key: fmt.Sprint(i % 100)})
			if err != nil {
				b.Error(err)
				return
			}
			d := time.Since(start).Nanoseconds()
			for w := worst.Load(); d > w && !worst.CompareAndSwap(w, d); w = worst.Load() {
			}
			n.Add(1)
		}
	}
	var base, baseWorst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { write(stop, &base, &baseWorst) })
	const baseFor = 3 * time.Second
	time.Sleep(baseFor)
	close(stop)
	wg.Wait()

	var during, worst atomic.Int64
	stop = make(chan struct{})
	wg.Go(func() { write(stop, &during, &worst) })
	b.ResetTimer()
	start := time.Now()
	r, err := workspace.GC(ctx, ws, workspace.GCPolicy{Actor: "gc", KeepEvents: 1000})
	took := time.Since(start)
	b.StopTimer()
	close(stop)
	wg.Wait()
	require.NoError(b, err)
	require.GreaterOrEqual(b, r.Events.Count, int64(events-1000))

	b.ReportMetric(took.Seconds(), "gc_s")
	b.ReportMetric(float64(r.Events.Count), "events_removed")
	b.ReportMetric(float64(r.Batches), "batches")
	b.ReportMetric(float64(worst.Load())/1e6, "max_write_ms_during_gc")
	b.ReportMetric(float64(baseWorst.Load())/1e6, "max_write_ms_before")
	b.ReportMetric((float64(during.Load())/took.Seconds())/(float64(base.Load())/baseFor.Seconds()), "write_rate_ratio")
	if size != nil {
		b.ReportMetric(float64(before-size())/(1<<20), "MiB_reclaimed")
	}
}

// eventArchive is an archive of n note events and nothing else (no
// hashes: the importing store chains them).
func eventArchive(b *testing.B, n int) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
	require.NoError(b, enc.Encode(map[string]any{"type": "header", "format": workspace.ArchiveFormat, "version": workspace.ArchiveVersion}))
	require.NoError(b, enc.Encode(map[string]any{"type": "log", "floor": 1, "head": n}))
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("k%07d", i)
		require.NoError(b, enc.Encode(map[string]any{"type": "event", "event": workspace.Event{Seq: int64(i), Time: t0.Add(time.Duration(i) * time.Microsecond),
			Actor: "loader", Type: workspace.EventNotePut, Subject: workspace.Subject{Kind: "note", ID: "load/" + key, Name: key}, Version: 1,
			Message: "a message of a typical length for an agent's write"}}))
	}
	require.NoError(b, enc.Encode(map[string]any{"type": "end", "counts": workspace.ArchiveStats{Events: int64(n)}}))
	return buf.Bytes()
}
