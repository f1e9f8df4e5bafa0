package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/server"
	"github.com/agentspace/agentspace/server/dashboard"
	"github.com/agentspace/agentspace/workspace"
)

// BenchmarkBoard10k renders the board of a workspace with 10,000 tasks
// (a quarter of them waiting on another), server-side, through the
// server's handler. Two baselines run beside it on the same store:
// "status" (Workspace.Status, the cheapest whole-workspace read) and
// "list" (reading all 10,000 tasks through Tasks.List, which the board
// does not do: it reads one page per open status).
func BenchmarkBoard10k(b *testing.B) {
	e := newEnv(b, server.Options{})
	ctx := context.Background()
	const n = 10_000
	var prev string
	for i := 0; i < n; i += workspace.MaxOpsPerBatch {
		ops := make([]workspace.Op, 0, workspace.MaxOpsPerBatch)
		for j := i; j < i+workspace.MaxOpsPerBatch; j++ {
			t := workspace.NewTask{Title: fmt.Sprintf("task %05d", j), Priority: j % 7, Labels: map[string]string{"team": strconv.Itoa(j % 5)}}
			// A quarter of each batch after the first waits on the
			// previous batch's last task.
			if prev != "" && j-i < workspace.MaxOpsPerBatch/4 {
				t.DependsOn = []string{prev}
			}
			ops = append(ops, workspace.CreateTaskOp{Task: t})
		}
		res, err := e.ws.Commit(ctx, workspace.Batch{Actor: "seed", Ops: ops})
		require.NoError(b, err)
		prev = res.Results[len(res.Results)-1].Task.ID
	}

	b.Run("status", func(b *testing.B) {
		for b.Loop() {
			_, err := e.ws.Status(ctx)
			require.NoError(b, err)
		}
	})
	b.Run("list", func(b *testing.B) {
		for b.Loop() {
			f := workspace.TaskFilter{Limit: 1000}
			count := 0
			for {
				p, err := e.ws.Tasks().List(ctx, f)
				require.NoError(b, err)
				count += len(p.Tasks)
				if p.Next == "" {
					break
				}
				f.After = p.Next
			}
			require.GreaterOrEqual(b, count, n)
		}
	})
	b.Run("render", func(b *testing.B) {
		for b.Loop() {
			rec := httptest.NewRecorder()
			e.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			require.Equal(b, http.StatusOK, rec.Code)
		}
	})
	b.Run("render-filtered", func(b *testing.B) {
		for b.Loop() {
			rec := httptest.NewRecorder()
			e.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?label=team%3D3", nil))
			require.Equal(b, http.StatusOK, rec.Code)
		}
	})
}

// BenchmarkTimelineDay renders the timeline and the charts of a window
// holding 10,000 events of a SQLite workspace (5,000 tasks created, each
// then set aside as blocked), through the server's handler: the log's
// read, the one pass and the SVG.
func BenchmarkTimelineDay(b *testing.B) {
	e := newEnv(b, server.Options{})
	ctx := context.Background()
	const tasks = 5_000
	for i := 0; i < tasks; i += workspace.MaxOpsPerBatch {
		ops := make([]workspace.Op, 0, workspace.MaxOpsPerBatch)
		for j := i; j < i+workspace.MaxOpsPerBatch && j < tasks; j++ {
			ops = append(ops, workspace.CreateTaskOp{Task: workspace.NewTask{Title: fmt.Sprintf("task %05d", j)}})
		}
		res, err := e.ws.Commit(ctx, workspace.Batch{Actor: fmt.Sprintf("agent-%d", i%7), Ops: ops})
		require.NoError(b, err)
		blocked := workspace.TaskBlocked
		ops = ops[:0]
		for _, r := range res.Results {
			ops = append(ops, workspace.UpdateTaskOp{ID: r.Task.ID, Change: workspace.TaskChange{Status: &blocked}})
		}
		_, err = e.ws.Commit(ctx, workspace.Batch{Actor: fmt.Sprintf("agent-%d", i%5), Ops: ops})
		require.NoError(b, err)
	}
	st, err := e.ws.Status(ctx)
	require.NoError(b, err)
	require.GreaterOrEqual(b, st.Head, int64(2*tasks))
	for _, page := range []string{"timeline", "charts"} {
		b.Run(page, func(b *testing.B) {
			cpu0 := dashboard.CPUTime()
			for b.Loop() {
				rec := httptest.NewRecorder()
				e.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/"+page+"?span=1h", nil))
				require.Equal(b, http.StatusOK, rec.Code)
			}
			b.ReportMetric(float64((dashboard.CPUTime()-cpu0).Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// BenchmarkAgentPage renders one agent's page, and the agents list, of a
// SQLite workspace whose log holds 12,000 events by ten agents (more than
// the 10,000 newest that agents.List scans), each agent holding a claim
// and a lease: the work one refresh of either page does.
func BenchmarkAgentPage(b *testing.B) {
	e := newEnv(b, server.Options{})
	ctx := context.Background()
	for i := range 10 {
		actor := fmt.Sprintf("agent-%02d", i)
		_, err := e.ws.Tasks().Create(ctx, workspace.Write{Actor: "lead"}, workspace.NewTask{Title: "task of " + actor})
		require.NoError(b, err)
		_, err = e.ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: actor, Lease: time.Hour})
		require.NoError(b, err)
		_, err = e.ws.Locks().Acquire(ctx, workspace.AcquireRequest{Resource: "file:" + actor, Owner: actor, TTL: time.Hour})
		require.NoError(b, err)
	}
	for i := range 12 {
		ops := make([]workspace.Op, 0, 1000)
		for j := range 1000 {
			ops = append(ops, workspace.PutNoteOp{Note: workspace.NotePut{Kind: "decision", Key: fmt.Sprintf("k%d-%d", i, j), Title: "bulk"}})
		}
		_, err := e.ws.Commit(ctx, workspace.Batch{Actor: fmt.Sprintf("agent-%02d", i%10), Ops: ops})
		require.NoError(b, err)
	}
	for _, path := range []string{"/ui/frag/agent?actor=agent-03", "/ui/frag/agents"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Get(e.hs.URL + path)
				require.NoError(b, err)
				_ = resp.Body.Close()
				require.Equal(b, http.StatusOK, resp.StatusCode)
			}
		})
	}
}
