package remote_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// BenchmarkW1 is bench's W1 (an IfVersion update of a 1 KiB artifact, one
// artifact per goroutine) in process and through a server on a unix socket
// in front of the same store, so that a CPU profile of the served
// sub-benchmark shows what the HTTP hop costs. Compare the two with
// -cpu and benchstat; wsctl bench --serve gives the ratios we publish.
func BenchmarkW1(b *testing.B) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "ws.db"))
	require.NoError(b, err)
	b.Cleanup(func() { _ = ws.Close() })
	srv, err := server.New(ws, server.Options{})
	require.NoError(b, err)
	dir, err := os.MkdirTemp("", "ws")
	require.NoError(b, err)
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(b, err)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	b.Cleanup(func() { _ = hs.Close() })
	client, err := workspace.Open(ctx, "http+unix://"+sock)
	require.NoError(b, err)
	b.Cleanup(func() { _ = client.Close() })

	body := make([]byte, 1024)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for _, via := range []struct {
		name string
		ws   *workspace.Workspace
	}{{"inprocess", ws}, {"unix", client}} {
		b.Run(via.name, func(b *testing.B) {
			cpu0 := cpuTime()
			b.SetParallelism(8) // 16 goroutines on 2 CPUs, as W1 c=16
			b.RunParallel(func(pb *testing.PB) {
				name := fmt.Sprintf("bench/%s/%d", via.name, workers.Add(1))
				a, err := via.ws.Artifacts().Create(ctx, workspace.Write{Actor: "bench"}, workspace.NewArtifact{Name: name, Kind: "output", Content: body})
				if err != nil {
					b.Error(err)
					return
				}
				v := a.Version
				for pb.Next() {
					body := append([]byte(nil), body...)
					body[0] = byte('0' + v%10)
					a, err := via.ws.Artifacts().Update(ctx, workspace.Write{Actor: "bench", IfVersion: v},
						workspace.ArtifactRef{Name: name}, workspace.ArtifactChange{Content: body})
					if err != nil {
						b.Error(err)
						return
					}
					v = a.Version
				}
			})
			// CPU time moves less with the machine's load than ns/op.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// workers names each goroutine's artifact uniquely across runs.
var workers atomic.Int64

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
