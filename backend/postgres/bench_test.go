package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/workspace"
)

// BenchmarkNotePut measures single-record writes (one transaction, one
// event each) from 16 goroutines on 4 handles, as a team of agents would.
func BenchmarkNotePut(b *testing.B) {
	ctx := context.Background()
	dsn := pgtest.NewDSN(b)
	handles := make([]workspace.Workspace, 4)
	for i := range handles {
		ws, err := workspace.Open(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = ws.Close() })
		handles[i] = ws
	}
	var n atomic.Int64
	b.SetParallelism(8) // 8 x GOMAXPROCS (2 here) = 16 goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := n.Add(1)
		ws := handles[i%int64(len(handles))]
		for pb.Next() {
			k := n.Add(1)
			_, err := ws.Notes().Put(ctx, workspace.Write{Actor: "bench"}, workspace.NotePut{Kind: "decision", Key: fmt.Sprint(k), Body: "b"})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}
