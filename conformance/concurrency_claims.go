package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// claimDAG creates tasks in layers of width (one batch per layer): the
// first chains tasks of each layer depend on the same task of the layer
// before (chains as long as the DAG is deep); the others depend on up to
// three random tasks of the two layers before. It returns the tasks in
// creation order.
func claimDAG(t *testing.T, ctx context.Context, ws *workspace.Workspace, layers, width, chains int) []workspace.Task {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11)) // #nosec G404 -- a fixed seed for a reproducible test shape
	var all []workspace.Task
	for l := range layers {
		ops := make([]workspace.Op, width)
		for j := range width {
			nt := workspace.NewTask{Title: fmt.Sprintf("task %d.%d", l, j), Priority: rng.IntN(3)}
			switch {
			case l == 0:
			case j < chains:
				nt.DependsOn = []string{all[(l-1)*width+j].ID}
			default:
				lo := max(0, (l-2)*width)
				for range rng.IntN(4) {
					nt.DependsOn = append(nt.DependsOn, all[lo+rng.IntN(l*width-lo)].ID)
				}
			}
			ops[j] = workspace.CreateTaskOp{Task: nt}
		}
		res, err := ws.Commit(ctx, workspace.Batch{Actor: "planner", Ops: ops})
		require.NoError(t, err, "create layer %d", l)
		for _, r := range res.Results {
			require.NotNil(t, r.Task)
			all = append(all, *r.Task)
		}
	}
	return all
}

// testConcurrentClaims: 8 claimers over 3 handles drain 200 tasks with
// dependencies. Every task is claimed exactly once, and never before all
// its dependencies are done (checked in the log: the claim's seq is after
// every dependency's done event).
func testConcurrentClaims(t *testing.T, h Harness) {
	const (
		claimers = 8
		layers   = 10
		width    = 20
		chains   = 4
	)
	ctx := caseCtx(t, 90*time.Second)
	dsn := h.NewDSN(t)
	hs := handles(t, dsn, 3)
	tasks := claimDAG(t, ctx, hs[0], layers, width, chains)
	n := len(tasks)
	require.Equal(t, 200, n)
	head0, err := hs[0].Events().Head(ctx)
	require.NoError(t, err)

	// Claimers wait for ready tasks; the last completion ends the waits.
	drained, stop := context.WithCancel(ctx)
	defer stop()
	var (
		done    atomic.Int64
		mu      sync.Mutex
		claimed = map[string][]string{} // task id -> claimers
	)
	errs := make([]error, claimers)
	var wg sync.WaitGroup
	for c := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := hs[c%len(hs)]
			actor := fmt.Sprintf("claimer-%d", c)
			for {
				task, err := ws.Tasks().Claim(drained, workspace.ClaimRequest{Actor: actor, Wait: true})
				if err != nil {
					if drained.Err() != nil {
						return // drained, or another claimer failed
					}
					errs[c] = fmt.Errorf("claim: %w", err)
					stop()
					return
				}
				mu.Lock()
				claimed[task.ID] = append(claimed[task.ID], actor)
				mu.Unlock()
				res := workspace.TaskResult{Summary: "ok " + task.ID}
				if task.Priority == 2 {
					name := "out/" + task.ID
					_, err := ws.Artifacts().Create(ctx, workspace.Write{Actor: actor},
						workspace.NewArtifact{Name: name, TaskID: task.ID, Content: []byte(task.Title)})
					if err != nil {
						errs[c] = fmt.Errorf("artifact for %s: %w", task.ID, err)
						stop()
						return
					}
					res.Artifacts = []string{name}
				}
				if _, err := ws.Tasks().Complete(ctx, workspace.Write{Actor: actor}, task.ID, res); err != nil {
					errs[c] = fmt.Errorf("complete %s: %w", task.ID, err)
					stop()
					return
				}
				if done.Add(1) == int64(n) {
					stop()
				}
			}
		}()
	}
	wg.Wait()
	for c, err := range errs {
		require.NoError(t, err, "claimer %d", c)
	}
	require.Equal(t, int64(n), done.Load(), "every task was completed")

	_, err = hs[1].Tasks().Claim(ctx, workspace.ClaimRequest{Actor: "late"})
	assert.ErrorIs(t, err, workspace.ErrNoTask, "nothing is left to claim")

	final := map[string]workspace.Task{}
	for _, task := range tasks {
		got, err := hs[2].Tasks().Get(ctx, task.ID)
		require.NoError(t, err)
		final[task.ID] = got
		assert.Equal(t, workspace.TaskDone, got.Status, "task %s", task.Title)
		assert.Equal(t, 1, got.Attempts, "task %s was claimed once", task.Title)
		if assert.Len(t, claimed[task.ID], 1, "task %s claimers", task.Title) {
			assert.Equal(t, claimed[task.ID][0], got.Assignee, "task %s assignee", task.Title)
		}
	}

	// The log: one claim per task, after each dependency's done event.
	claimSeq := map[string]int64{}
	doneSeq := map[string]int64{}
	for _, ev := range readAll(t, hs[1], workspace.EventQuery{AfterSeq: head0, SubjectKind: workspace.SubjectTask}) {
		id := ev.Subject.ID
		switch ev.Type {
		case workspace.EventTaskClaimed:
			if _, dup := claimSeq[id]; dup {
				t.Errorf("task %s claimed twice in the log (seq %d and %d)", id, claimSeq[id], ev.Seq)
			}
			claimSeq[id] = ev.Seq
			if len(claimed[id]) == 1 {
				assert.Equal(t, claimed[id][0], ev.Actor, "claim event actor of %s", id)
			}
		case workspace.EventTaskUpdated:
			if f, ok := final[id]; ok && ev.Version == f.Version {
				doneSeq[id] = ev.Seq
			}
		}
	}
	assert.Len(t, claimSeq, n, "one claim event per task")
	assert.Len(t, doneSeq, n, "one done event per task")
	for _, task := range tasks {
		cs, ok := claimSeq[task.ID]
		if !ok {
			continue
		}
		for _, dep := range task.DependsOn {
			ds, ok := doneSeq[dep]
			if assert.True(t, ok, "dependency %s of %s has no done event", dep, task.Title) {
				assert.Greater(t, cs, ds, "task %s was claimed (seq %d) before its dependency %s was done (seq %d)",
					task.Title, cs, final[dep].Title, ds)
			}
		}
	}
}
