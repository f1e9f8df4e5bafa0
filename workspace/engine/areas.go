package engine

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// checkArea reports whether area is a usable task area: a path as
// workspace.ValidateName accepts it, optionally ending in '/' (a
// directory). Its refusal names the field "areas".
func checkArea(area string) error {
	return checkName("areas", strings.TrimSuffix(area, "/"))
}

// readyApart is ReadyTask for a claim with AvoidOverlap: the best ready
// task whose areas overlap no in_progress task's, else the best ready
// task. It lives here, above the stores, so every backend keeps the rule;
// it reads every in_progress and pending task matching r, so its cost
// grows with the queue (ReadyTask's does not).
func (x *exec) readyApart(ctx context.Context, r workspace.ClaimRequest) (workspace.Task, error) {
	var busy []string
	err := x.eachTask(ctx, workspace.TaskFilter{Status: workspace.TaskInProgress}, func(t workspace.Task) error {
		busy = append(busy, t.Areas...)
		return nil
	})
	if err != nil || len(busy) == 0 {
		if err != nil {
			return workspace.Task{}, err
		}
		return x.tx.ReadyTask(ctx, r)
	}
	var ready []workspace.Task
	done := map[string]bool{}
	err = x.eachTask(ctx, workspace.TaskFilter{Status: workspace.TaskPending, Labels: r.Labels, ParentID: r.ParentID}, func(t workspace.Task) error {
		ok, err := depsDone(ctx, x.tx, t, done)
		if err != nil {
			return err
		}
		if ok && !areasOverlap(t.Areas, busy) {
			ready = append(ready, t)
		}
		return nil
	})
	if err != nil {
		return workspace.Task{}, err
	}
	if len(ready) == 0 {
		return x.tx.ReadyTask(ctx, r)
	}
	return slices.MinFunc(ready, func(a, b workspace.Task) int {
		if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	}), nil
}

// eachTask calls fn for every task matching f, page by page.
func (x *exec) eachTask(ctx context.Context, f workspace.TaskFilter, fn func(workspace.Task) error) error {
	f.Limit = 1000
	for {
		page, err := x.tx.ListTasks(ctx, f)
		if err != nil {
			return err
		}
		for _, t := range page {
			if err := fn(t); err != nil {
				return err
			}
		}
		if len(page) < f.Limit {
			return nil
		}
		f.After = page[len(page)-1].ID
	}
}

// areasOverlap reports whether some area of a and some area of b may name
// the same file: they are equal, or one is a directory prefix of the other
// on a segment boundary ("src/api" and "src/api/", "src/api/x.go";
// not "src/apix"). Tasks without areas overlap nothing: nothing is known.
func areasOverlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if areaContains(x, y) || areaContains(y, x) {
				return true
			}
		}
	}
	return false
}

// areaContains reports whether path y is x or lies under x.
func areaContains(x, y string) bool {
	x, y = strings.TrimSuffix(x, "/"), strings.TrimSuffix(y, "/")
	return x == y || strings.HasPrefix(y, x+"/")
}
