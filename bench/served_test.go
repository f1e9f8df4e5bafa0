package bench_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/bench"
	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/workspace"
)

// TestServedRowsCompareEachListenerWithInProcess: with Serve, every row is
// measured through the server on each listener, next to the same workload
// in process (its raw columns and ratio), and W1 gains a row run by child
// processes through the server.
func TestServedRowsCompareEachListenerWithInProcess(t *testing.T) {
	// Postgres runs the listener and workloads the figures need;
	// sqlite every variant, on both listeners.
	cases := map[string]struct {
		dsn       func(t *testing.T) string
		serve     []string
		workloads []string
		want      []string
	}{
		"sqlite": {
			dsn:       func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") },
			serve:     []string{"tcp", "unix"},
			workloads: []string{"W1", "W4", "W6"},
			want:      []string{"W1 via %s", "W1 via %s, 2 processes", "W1 2 processes on the store", "HTTP bare via %s, 2 processes", "W4 via %s", "W4 via %s handover other handle", "W6 via %s same handle", "W6 via %s other process", "W6 via %s resume"},
		},
		"postgres": {
			dsn:       func(t *testing.T) string { return pgtest.NewDSN(t) },
			serve:     []string{"unix"},
			workloads: []string{"W1"},
			want:      []string{"W1 via %s", "W1 via %s, 2 processes", "W1 2 processes on the store", "HTTP bare via %s, 2 processes"},
		},
	}
	for backend, tc := range cases {
		t.Run(backend, func(t *testing.T) {
			cfg := bench.Config{
				DSN: tc.dsn(t), Duration: 20 * time.Millisecond, Workloads: tc.workloads, Concurrency: []int{2},
				Serve: tc.serve, Processes: 2, Child: testChild,
			}
			rows, err := bench.RunAll(context.Background(), cfg, nil)
			require.NoError(t, err)
			seen := map[string]bool{}
			for _, r := range rows {
				name := r.Workload + " " + r.Variant
				seen[name] = true
				if r.Workload == "HTTP" {
					// The transport's ceiling: no store, so no backend and
					// no baseline; its ratio is the served row's rate over it.
					assert.True(t, strings.HasPrefix(r.Variant, "bare via "), name)
					assert.Equal(t, "-", r.Backend, name)
					assert.Positive(t, r.OpsPerSec, name)
					assert.Positive(t, r.Ratio, name)
					assert.Contains(t, r.Note, "clients' CPU per op", name)
					assertMachineCPU(t, r, name)
					continue
				}
				if strings.HasSuffix(name, "processes") {
					assert.Contains(t, r.Note, "clients' CPU per op", name)
					assertMachineCPU(t, r, name)
					// What bounds it: the store's one committer, through
					// the server and in process.
					assert.Regexp(t, `the store's committer was busy \d+% of the time \(running groups \d+%, gathering them \d+%\), [0-9.]+ writes per group, \S+ per group's transaction \(c=2 in process: busy.*\); a client's p50 is [0-9.]+ committer cycles \(gathering and running a group: \S+\)`, r.Note, name)
				}
				if strings.HasSuffix(r.Variant, "processes on the store") {
					assertMachineCPU(t, r, name)
					// The same children on the store itself: no server, so
					// no baseline; its ratio is the served row's rate over it.
					assert.Equal(t, backend, r.Backend, name)
					assert.Positive(t, r.OpsPerSec, name)
					assert.Positive(t, r.Ratio, name)
					continue
				}
				assert.Equal(t, backend, r.Backend, name)
				assert.True(t, strings.HasPrefix(r.Variant, "via tcp") || strings.HasPrefix(r.Variant, "via unix"), name)
				assert.Contains(t, r.Note, "in process on the same store", name)
				assert.Positive(t, r.OpsPerSec, name)
				assert.Positive(t, r.RawOpsPerSec, name)
				// A latency row's ratio is of p99s: through a server the
				// event may reach the subscriber before the commit's
				// answer reaches the writer, a latency of 0, and in
				// process on one handle it may be under a microsecond.
				if r.P99us > 0 && r.RawP99us > 0 {
					assert.Positive(t, r.Ratio, name)
				}
			}
			for _, via := range tc.serve {
				for _, v := range tc.want {
					name := strings.Replace(v, "%s", via, 1)
					assert.True(t, seen[name], "no row for %s", name)
				}
			}
			assert.False(t, seen["W1 via tcp vs raw+notify"], "the raw+notify row has no place through a server")
			assert.False(t, seen["W6 via tcp other pool"])
		})
	}
}

// TestThousandStreamsEachGetEveryEvent holds 1,000 event streams open on
// one server (in a child process), commits events, and checks that every
// stream receives every one (RunAll fails otherwise); the row reports the
// server's memory per idle stream.
func TestThousandStreamsEachGetEveryEvent(t *testing.T) {
	cfg := bench.Config{
		DSN: "sqlite:" + filepath.Join(t.TempDir(), "ws.db"), Workloads: []string{"SSE"}, Streams: 1000, Child: testChild,
	}
	rows, err := bench.RunAll(context.Background(), cfg, nil)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	idle, fan := rows[0], rows[1]
	assert.Equal(t, "idle streams", idle.Variant)
	assert.Equal(t, 1000, idle.Concurrency)
	assert.Positive(t, idle.HeapKiB, "1,000 open streams hold memory in the server")
	assert.Contains(t, idle.Note, "per stream")
	assert.Equal(t, "fan-out", fan.Variant)
	assert.Contains(t, fan.Note, "all 5 events reached every stream")
	assert.GreaterOrEqual(t, fan.P99us, fan.P50us)
}

// TestRunAllAcceptsAServersDSN: pointed at a server's DSN, the workloads
// run through it (no raw baseline: the store is the server's).
func TestRunAllAcceptsAServersDSN(t *testing.T) {
	ctx := context.Background()
	ws, err := workspace.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "ws.db"))
	require.NoError(t, err)
	srv, err := server.New(ws, server.Options{})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	hs.RegisterOnShutdown(srv.Drain)
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	t.Cleanup(func() {
		_ = hs.Shutdown(context.Background())
		assert.True(t, errors.Is(<-done, http.ErrServerClosed))
		_ = ws.Close()
	})

	cfg := bench.Config{DSN: "http://" + ln.Addr().String(), Duration: 20 * time.Millisecond, Workloads: []string{"W1", "W2", "W6"}, Concurrency: []int{2}}
	rows, err := bench.RunAll(ctx, cfg, nil)
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	for _, r := range rows {
		assert.Equal(t, "http", r.Backend)
		assert.Positive(t, r.OpsPerSec, r.Workload+" "+r.Variant)
		assert.Zero(t, r.RawOpsPerSec)
	}
}

func TestParseServeRejectsAnUnknownListener(t *testing.T) {
	got, err := bench.ParseServe("TCP, unix")
	require.NoError(t, err)
	assert.Equal(t, []string{"tcp", "unix"}, got)
	_, err = bench.ParseServe("tcp,udp")
	assert.ErrorIs(t, err, bench.ErrUnknownServe)
}

// assertMachineCPU checks that a many-processes row's figure of the
// machine's CPU per op and its note agree: /proc/stat counts in 10ms
// ticks, so rounds as short as this test's may see none (see
// TestProcessRowsCountTheMachinesCPU).
func assertMachineCPU(t *testing.T, r bench.Row, name string) {
	t.Helper()
	phrase := regexp.MustCompile(`the machine's CPU per op, every process counted: \d+µs \((the server \d+µs, )?the clients \d+µs, the rest \d+µs\), its CPUs \d+% busy`)
	if r.MachineCPUusPerOp > 0 {
		assert.Regexp(t, phrase, r.Note, name)
	} else {
		assert.NotRegexp(t, phrase, r.Note, name)
	}
}

// The many-processes rows count every process's CPU on the machine per
// op: the clients', the server's and a local database's, which neither
// the server's nor the clients' figure has alone. Only Linux's /proc/stat
// has it; elsewhere the rows carry no figure and say nothing of it.
func TestProcessRowsCountTheMachinesCPU(t *testing.T) {
	linux := runtime.GOOS == "linux"
	cfg := bench.Config{
		DSN: "sqlite:" + filepath.Join(t.TempDir(), "ws.db"), Duration: 400 * time.Millisecond, Workloads: []string{"W1"},
		Concurrency: []int{2}, Serve: []string{"unix"}, Processes: 2, Child: testChild,
	}
	rows, err := bench.RunAll(context.Background(), cfg, nil)
	require.NoError(t, err)
	seen := 0
	for _, r := range rows {
		name := r.Workload + " " + r.Variant
		if !strings.Contains(r.Variant, "processes") {
			assert.Zero(t, r.MachineCPUusPerOp, name)
			continue
		}
		seen++
		assertMachineCPU(t, r, name)
		if !linux {
			assert.Zero(t, r.MachineCPUusPerOp, name)
			assert.Zero(t, r.MachineBusy, name)
			continue
		}
		// Every process counted: at least the clients' and the
		// server's own CPU per op (ticks of 10ms make it coarse).
		assert.Positive(t, r.MachineCPUusPerOp, name)
		assert.Positive(t, r.MachineBusy, name)
		assert.LessOrEqual(t, r.MachineBusy, 1.0, name)
		// The split: the clients' share is their own CPU, read from
		// their rusage, and the server's where the row has one.
		assert.Positive(t, r.ClientCPUusPerOp, name)
		assert.Equal(t, r.Workload != "W1" || strings.HasPrefix(r.Variant, "via "), strings.Contains(r.Note, "(the server "),
			"%s: the served and bare rows name the server's share, the on-the-store row has none: %s", name, r.Note)
	}
	assert.Equal(t, 3, seen, "the served, on-the-store and bare rows")
}

// With Servers, the processes go through that many servers, each a store
// of its own on the DSN (many servers, one store): the row says so, and
// every child's writes land (the row measures some, and its commits are
// counted across the servers' stores).
func TestProcessesSpreadOverServers(t *testing.T) {
	cfg := bench.Config{
		DSN: "sqlite:" + filepath.Join(t.TempDir(), "ws.db"), Duration: 400 * time.Millisecond, Workloads: []string{"W1"},
		Concurrency: []int{2}, Serve: []string{"unix"}, Processes: 2, Servers: 2, Child: testChild,
	}
	rows, err := bench.RunAll(context.Background(), cfg, nil)
	require.NoError(t, err)
	var found bool
	for _, r := range rows {
		if r.Variant != "via unix, 2 processes, 2 servers" {
			continue
		}
		found = true
		assert.Positive(t, r.OpsPerSec)
		assert.Positive(t, r.CommitsPerOp, "the commits of both servers' stores")
		assert.Contains(t, r.Note, "through 2 servers")
	}
	assert.True(t, found, "no row through 2 servers in %+v", rows)
}
