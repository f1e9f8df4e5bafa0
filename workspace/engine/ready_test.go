package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentspace/agentspace/backend/json"
	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	_ "github.com/agentspace/agentspace/backend/sqlite"
	"github.com/agentspace/agentspace/workspace"
)

// readyLister is the method task ls --ready finds on a local
// workspace's Tasks.
type readyLister interface {
	ListReady(ctx context.Context, f workspace.TaskFilter) (workspace.TaskPage, error)
}

// TestListReadyIsListOfTheClaimable: ListReady returns, page by page, what
// List of the pending tasks returns less those with a dependency not done,
// under every filter, on each backend: SQLite and PostgreSQL answer it in
// one query (driver.ReadyLister), JSON through List and Get.
func TestListReadyIsListOfTheClaimable(t *testing.T) {
	dsns := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "ws.db") },
		"json":     func(t *testing.T) string { return "json:" + filepath.Join(t.TempDir(), "ws") },
		"postgres": func(t *testing.T) string { return pgtest.NewDSN(t) },
	}
	for name, dsn := range dsns {
		t.Run(name, func(t *testing.T) { testListReady(t, dsn(t)) })
	}
}

func testListReady(t *testing.T, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ws, err := workspace.Open(ctx, dsn)
	require.NoError(t, err)
	defer func() { _ = ws.Close() }()
	lead := workspace.Write{Actor: "lead"}
	rng := rand.New(rand.NewPCG(53, 3))

	// 80 tasks: some done (their dependencies done before them), some
	// cancelled or blocked, the rest pending on random earlier ones.
	var (
		ids  []string
		done []string
	)
	const n = 80
	for i := range n {
		nt := workspace.NewTask{
			Title:  fmt.Sprint("t", i),
			Labels: map[string]string{"n": strconv.Itoa(i), "team": []string{"a", "b"}[i%2]},
		}
		fate := rng.IntN(6)
		pool := ids
		if fate == 0 {
			pool = done // a task to be done waits only on done ones
		}
		for range rng.IntN(3) {
			if len(pool) > 0 {
				nt.DependsOn = append(nt.DependsOn, pool[rng.IntN(len(pool))])
			}
		}
		if i%7 == 3 && len(ids) > 0 {
			nt.ParentID = ids[0]
		}
		task, err := ws.Tasks().Create(ctx, lead, nt)
		require.NoError(t, err)
		ids = append(ids, task.ID)
		switch fate {
		case 0:
			c, err := ws.Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "lead", Labels: map[string]string{"n": strconv.Itoa(i)}})
			require.NoError(t, err)
			require.Equal(t, task.ID, c.ID)
			_, err = ws.Tasks().Complete(ctx, lead, c.ID, workspace.TaskResult{Summary: "ok"})
			require.NoError(t, err)
			done = append(done, task.ID)
		case 1:
			_, err = ws.Tasks().Update(ctx, lead, task.ID, workspace.TaskChange{Status: new(workspace.TaskCancelled)})
			require.NoError(t, err)
		case 2:
			_, err = ws.Tasks().Update(ctx, lead, task.ID, workspace.TaskChange{Status: new(workspace.TaskBlocked)})
			require.NoError(t, err)
		}
	}

	rl, ok := ws.Tasks().(readyLister)
	require.True(t, ok, "a local workspace's Tasks lists the ready tasks")
	filters := []workspace.TaskFilter{
		{},
		{Status: workspace.TaskPending},
		{Labels: map[string]string{"team": "a"}},
		{ParentID: ids[0]},
	}
	var seen int
	for _, f := range filters {
		want := model(t, ctx, ws, f)
		seen += len(want)
		for _, limit := range []int{1, 3, 1000} {
			var got []workspace.Task
			g := f
			g.Limit = limit
			for range n + 1 {
				page, err := rl.ListReady(ctx, g)
				require.NoError(t, err)
				got = append(got, page.Tasks...)
				if page.Next == "" {
					break
				}
				g.After = page.Next
			}
			assert.Equal(t, ids0(want), ids0(got), "filter %+v, limit %d", f, limit)
		}
	}
	assert.Positive(t, seen, "some tasks are ready")

	_, err = rl.ListReady(ctx, workspace.TaskFilter{Status: workspace.TaskDone})
	assert.ErrorIs(t, err, workspace.ErrInvalid, "ready tasks are pending")
}

// model is the ready tasks f lists, as task ls --ready found them before
// ListReady: every pending task, less those with a dependency not done.
func model(t *testing.T, ctx context.Context, ws *workspace.Workspace, f workspace.TaskFilter) []workspace.Task {
	f.Status, f.Limit = workspace.TaskPending, 1000
	page, err := ws.Tasks().List(ctx, f)
	require.NoError(t, err)
	var out []workspace.Task
next:
	for _, task := range page.Tasks {
		for _, dep := range task.DependsOn {
			d, err := ws.Tasks().Get(ctx, dep)
			require.NoError(t, err)
			if d.Status != workspace.TaskDone {
				continue next
			}
		}
		out = append(out, task)
	}
	return out
}

func ids0(ts []workspace.Task) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}
