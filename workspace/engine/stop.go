package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

func checkStopActor(_ *handle, o workspace.StopActorOp) error {
	if err := checkActor(o.Actor); err != nil {
		return err
	}
	return checkText("message", o.Message, workspace.MaxTextLen)
}

// stopActor force-releases every live lease o.Actor owns and returns every
// task it has claimed to pending, in the batch's transaction: no lease or
// claim of the actor's survives it, and none is taken by it meanwhile,
// since each write of the actor's serialises with this transaction. The
// actor's own are those of its names (ownName): "bob#merger-1" is bob's.
func (x *exec) stopActor(ctx context.Context, o workspace.StopActorOp) error {
	why := o.Message
	if why == "" {
		why = fmt.Sprintf("%s stopped by %s", o.Actor, x.actor)
	}
	leases, err := x.tx.ListLeases(ctx, x.now)
	if err != nil {
		return err
	}
	for _, l := range leases {
		if !ownName(l.Owner, o.Actor) {
			continue
		}
		if err := x.forceRelease(ctx, l.Resource, fmt.Sprintf("%s: forced release of its lease (token %d)", why, l.Token)); err != nil {
			return err
		}
	}
	// Collect the claims first: returning one while paging would move the
	// listing under the cursor on some backends. The listing filters by
	// status only, since an assignee filter matches one name exactly.
	var claimed []workspace.Task
	f := workspace.TaskFilter{Status: workspace.TaskInProgress, Limit: maxPageLimit}
	for {
		page, err := x.tx.ListTasks(ctx, f)
		if err != nil {
			return err
		}
		for _, t := range page {
			if ownName(t.Assignee, o.Actor) {
				claimed = append(claimed, t)
			}
		}
		if len(page) < f.Limit {
			break
		}
		f.After = page[len(page)-1].ID
	}
	for _, t := range claimed {
		t.Status, t.Assignee, t.LeaseExpiresAt = workspace.TaskPending, "", time.Time{}
		t.Version++
		t.UpdatedAt, t.UpdatedBy = x.now, x.actor
		if err := x.tx.PutTask(ctx, t); err != nil {
			return err
		}
		x.emit(workspace.EventTaskReleased, taskSubject(t), t.Version, why+": its claim returned")
	}
	return nil
}
