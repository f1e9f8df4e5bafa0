package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/agentspace/agentspace/conformance"
	"github.com/agentspace/agentspace/workspace"
)

func benchWS(b *testing.B, params string) *workspace.Workspace {
	b.Helper()
	ws, err := workspace.Open(context.Background(), "sqlite:"+filepath.Join(b.TempDir(), "ws.db")+params)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ws.Close() })
	return ws
}

// BenchmarkNotePut measures durable single-record writes (one transaction,
// one event each) from parallel goroutines on one handle.
func BenchmarkNotePut(b *testing.B) {
	for _, params := range []string{"", "?ws_synchronous=NORMAL"} {
		b.Run("sync="+map[string]string{"": "FULL", "?ws_synchronous=NORMAL": "NORMAL"}[params], func(b *testing.B) {
			ws := benchWS(b, params)
			ctx := context.Background()
			var n atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: "bench"},
						workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", i), Body: "body"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkClaim measures claiming from a queue of pending tasks.
func BenchmarkClaim(b *testing.B) {
	ws := benchWS(b, "?ws_synchronous=NORMAL")
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		if _, err := ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "t", Priority: i % 7}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "w"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNotePutManyHandles is BenchmarkNotePut with each goroutine on its
// own handle, as separate agents would be: in one process, handles opened
// on one DSN share a store and so their commits ("shared"); with stores of
// their own ("private", as in separate processes) writers meet at SQLite's
// file lock instead.
func BenchmarkNotePutManyHandles(b *testing.B) {
	b.Run("shared", func(b *testing.B) { benchNotePutManyHandles(b, "") })
	b.Run("private", func(b *testing.B) { benchNotePutManyHandles(b, "&ws_private=true") })
}

func benchNotePutManyHandles(b *testing.B, params string) {
	dsn := "sqlite:" + filepath.Join(b.TempDir(), "ws.db") + "?ws_synchronous=NORMAL" + params
	ctx := context.Background()
	first, err := workspace.Open(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = first.Close() })
	var n atomic.Int64
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		ws, err := workspace.Open(ctx, dsn)
		if err != nil {
			b.Error(err)
			return
		}
		defer ws.Close()
		for pb.Next() {
			i := n.Add(1)
			if _, err := ws.Notes().Put(ctx, workspace.Write{Actor: "bench"},
				workspace.NotePut{Kind: "decision", Key: fmt.Sprint("k", i), Body: "body"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkW1 is W1 at c=16 on one handle (conformance.MeasureW1).
func BenchmarkW1(b *testing.B) {
	conformance.MeasureW1(b, "sqlite:"+filepath.Join(b.TempDir(), "ws.db"), 16)
}
