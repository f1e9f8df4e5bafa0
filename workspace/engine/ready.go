package engine

import (
	"context"
	"errors"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// listReady returns the ready tasks among those f (Status pending) lists:
// from the store's ReadyLister when it has one, else by paging ListTasks
// and reading each dependency, stopping once f.Limit are found.
func listReady(ctx context.Context, tx driver.ReadTx, f workspace.TaskFilter) ([]workspace.Task, error) {
	if rl, ok := tx.(driver.ReadyLister); ok {
		return rl.ListReadyTasks(ctx, f)
	}
	want := f.Limit
	var out []workspace.Task
	done := map[string]bool{}
	for {
		f.Limit = maxPageLimit
		page, err := tx.ListTasks(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, t := range page {
			ok, err := depsDone(ctx, tx, t, done)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, t)
				if len(out) == want {
					return out, nil
				}
			}
		}
		if len(page) < f.Limit {
			return out, nil
		}
		f.After = page[len(page)-1].ID
	}
}

// depsDone reports whether every dependency of t is done; done caches the
// dependencies read so far. A dependency that is gone holds t back, as in
// ReadyTask.
func depsDone(ctx context.Context, tx driver.ReadTx, t workspace.Task, done map[string]bool) (bool, error) {
	for _, id := range t.DependsOn {
		d, seen := done[id]
		if !seen {
			dep, err := tx.Task(ctx, id)
			switch {
			case errors.Is(err, workspace.ErrNotFound):
			case err != nil:
				return false, err
			}
			d = err == nil && dep.Status == workspace.TaskDone
			done[id] = d
		}
		if !d {
			return false, nil
		}
	}
	return true, nil
}
