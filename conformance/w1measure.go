package conformance

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// MeasureW1 is wsctl bench's W1 at concurrency c as a Go benchmark: c
// goroutines share one handle on dsn, each making version-checked 1 KiB
// updates of an artifact of its own, while one subscriber drains the
// log. Its figures are per write: the allocations and, with -cpuprofile,
// a profile of the engine and the store alone, without the bench's raw
// rounds interleaved.
func MeasureW1(b *testing.B, dsn string, c int) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, dsn, workspace.Options{})
	require.NoError(b, err)
	defer ws.Close()
	head, err := ws.Events().Head(ctx)
	require.NoError(b, err)
	sub, err := ws.Events().Subscribe(ctx, workspace.SubscribeRequest{Query: workspace.EventQuery{AfterSeq: head}})
	require.NoError(b, err)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for range sub.C() {
		}
	}()
	defer func() { _ = sub.Close(); <-drained }()
	content := make([]byte, 1024)
	_, _ = rand.Read(content)
	names := make([]string, c)
	for i := range names {
		names[i] = fmt.Sprintf("w1/%d", i)
	}
	versions := make([]int64, c)
	for i := range c {
		a, err := ws.Artifacts().Create(ctx, as("bench"), workspace.NewArtifact{Name: names[i], Kind: "output", Content: content})
		require.NoError(b, err)
		versions[i] = a.Version
	}
	var (
		left atomic.Int64
		wg   sync.WaitGroup
	)
	left.Store(int64(b.N))
	b.ReportAllocs()
	b.ResetTimer()
	for w := range c {
		wg.Go(func() {
			body := append([]byte(nil), content...)
			for left.Add(-1) >= 0 {
				body[0]++
				a, err := ws.Artifacts().Update(ctx, workspace.Write{Actor: "bench", IfVersion: versions[w]},
					workspace.ArtifactRef{Name: names[w]}, workspace.ArtifactChange{Content: body})
				if err != nil {
					b.Error(err)
					return
				}
				versions[w] = a.Version
			}
		})
	}
	wg.Wait()
}
