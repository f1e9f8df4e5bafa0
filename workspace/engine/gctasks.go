package engine

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// finished reports whether a task's status is final: done or cancelled.
// A failed task may still be retried, so it is not.
func finished(s workspace.TaskStatus) bool {
	return s == workspace.TaskDone || s == workspace.TaskCancelled
}

// gcTaskPlan returns the tasks policy p removes, newest first, with the
// size of each (its JSON), from one snapshot: finished tasks last updated
// before now-p.KeepTasksFor, except those that a task which stays depends
// on or has as its parent. Newest first, so that a task goes before the
// older ones it depends on.
func gcTaskPlan(ctx context.Context, tx driver.ReadTx, p workspace.GCPolicy) ([]string, []int64, error) {
	if p.KeepTasksFor <= 0 {
		return nil, nil, nil
	}
	cutoff := tx.Now().Add(-p.KeepTasksFor)
	old := map[string]bool{}
	size := map[string]int64{}
	refs := map[string][]string{} // task -> the tasks naming it
	f := workspace.TaskFilter{Limit: archivePage}
	for {
		ts, err := tx.ListTasks(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		for _, t := range ts {
			if finished(t.Status) && t.UpdatedAt.Before(cutoff) {
				old[t.ID] = true
				b, err := json.Marshal(t)
				if err != nil {
					return nil, nil, err
				}
				size[t.ID] = int64(len(b))
			}
			for _, d := range t.DependsOn {
				refs[d] = append(refs[d], t.ID)
			}
			if t.ParentID != "" {
				refs[t.ParentID] = append(refs[t.ParentID], t.ID)
			}
		}
		if len(ts) < archivePage {
			break
		}
		f.After = ts[len(ts)-1].ID
	}
	// A task goes if it is old and every task naming it goes too. Names
	// point to older tasks (a task's dependencies and parent exist when it
	// is created), so this terminates; seen guards against a cycle anyway.
	goes := map[string]bool{}
	seen := map[string]bool{}
	var removable func(id string) bool
	removable = func(id string) bool {
		if v, ok := goes[id]; ok {
			return v
		}
		if !old[id] || seen[id] {
			return false
		}
		seen[id] = true
		ok := true
		for _, r := range refs[id] {
			if !removable(r) {
				ok = false
				break
			}
		}
		goes[id] = ok
		return ok
	}
	var ids []string
	for id := range old {
		if removable(id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	sizes := make([]int64, len(ids))
	for i, id := range ids {
		sizes[i] = size[id]
	}
	return ids, sizes, nil
}

// gcTasks removes the planned tasks in short transactions paced as the
// events' are. A task that changed since the plan (it cannot become
// unfinished, but it may have been touched) or that a task created since
// names is skipped: the store refuses to remove a task another names.
func (h *handle) gcTasks(ctx context.Context, p workspace.GCPolicy, ids []string, sizes []int64, r *workspace.GCReport) error {
	return h.removeInBatches(ctx, p, len(ids), &r.Tasks, r, func(ctx context.Context, tx driver.Tx, i int) (bool, int64, error) {
		t, err := tx.Task(ctx, ids[i])
		if err != nil || !finished(t.Status) || !t.UpdatedAt.Before(tx.Now().Add(-p.KeepTasksFor)) {
			return false, 0, nil
		}
		ok, err := tx.DeleteTask(ctx, ids[i])
		return ok, sizes[i], err
	})
}

// removeInBatches removes n planned records, one(tx, i) each (which
// checks record i again and reports whether it removed it and its size),
// in short transactions sized and rested as the events' are, and counts
// what went into kind and r's batches.
func (h *handle) removeInBatches(ctx context.Context, p workspace.GCPolicy, n int, kind *workspace.GCKind, r *workspace.GCReport,
	one func(ctx context.Context, tx driver.Tx, i int) (bool, int64, error)) error {
	pace := gcPacer{size: min(minGCBatch, p.Batch), max: p.Batch, target: p.BatchTime}
	for from := 0; from < n; {
		to := min(from+int(pace.size), n)
		var locked time.Time
		var removed workspace.GCKind
		err := h.st.Update(ctx, func(tx driver.Tx) error {
			locked = time.Now()
			removed = workspace.GCKind{}
			for i := from; i < to; i++ {
				ok, size, err := one(ctx, tx, i)
				if err != nil {
					return err
				}
				if ok {
					removed.Count++
					removed.Bytes += size
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		took := time.Since(locked)
		kind.Count += removed.Count
		kind.Bytes += removed.Bytes
		r.Batches++
		r.LongestBatch = max(r.LongestBatch, took)
		pace.learn(int64(to-from), took)
		from = to
		if from < n {
			if err := rest(ctx, took); err != nil {
				return err
			}
		}
	}
	return nil
}
