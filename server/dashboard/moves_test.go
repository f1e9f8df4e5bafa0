package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/workspace"
)

// TestStatusComesFromTheLogsStructureAndTheRecord: a task.updated's
// message says nothing to the views; typed events, the state machine and
// the task's record do.
func TestStatusComesFromTheLogsStructureAndTheRecord(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	f := newFlow(start, start.Add(time.Hour))
	seq, at := int64(0), start
	versions := map[string]int64{}
	ev := func(actor, typ, task, msg string) {
		seq++
		at = at.Add(time.Minute)
		versions[task]++
		f.add(workspace.Event{Seq: seq, Time: at, Actor: actor, Type: typ, Version: versions[task], Message: msg,
			Subject: workspace.Subject{Kind: workspace.SubjectTask, ID: task, Name: task}})
	}
	const (
		created, claimed, updated, released = workspace.EventTaskCreated, workspace.EventTaskClaimed, workspace.EventTaskUpdated, workspace.EventTaskReleased
	)
	// spoof: an edit whose message reads like the engine's; still running.
	ev("lead", created, "spoof", "")
	ev("x", claimed, "spoof", "attempt 1")
	ev("x", updated, "spoof", "status done")
	ev("x", updated, "spoof", "heartbeat")
	// quiet: finished with a message of its own, after a heartbeat.
	ev("lead", created, "quiet", "")
	ev("y", claimed, "quiet", "attempt 1")
	ev("y", updated, "quiet", "heartbeat")
	ev("y", updated, "quiet", "merged by merger as 0123abcd")
	doneAt := at
	// retried: failed or blocked, back to pending, claimed again, done.
	ev("lead", created, "retried", "")
	ev("z", claimed, "retried", "attempt 1")
	ev("z", updated, "retried", "no luck")
	ev("lead", updated, "retried", "try again")
	ev("z", claimed, "retried", "attempt 2")
	ev("z", updated, "retried", "there")
	// moved: its record has moved on past the read; drawn open until the
	// next render reads that too.
	ev("lead", created, "moved", "")
	ev("w", claimed, "moved", "attempt 1")
	ev("w", updated, "moved", "done")
	// dropped and lapsed: released by its claimer, then by another.
	ev("lead", created, "dropped", "")
	ev("v", claimed, "dropped", "attempt 1")
	ev("v", released, "dropped", "")
	ev("v", claimed, "dropped", "attempt 2")
	ev("ops", released, "dropped", "v stopped by ops")

	require.ElementsMatch(t, []string{"spoof", "quiet", "retried", "moved"}, f.unsettled())
	f.settleBy(map[string]workspace.Task{
		"spoof":   {ID: "spoof", Status: workspace.TaskInProgress, Version: versions["spoof"]},
		"quiet":   {ID: "quiet", Status: workspace.TaskDone, Version: versions["quiet"]},
		"retried": {ID: "retried", Status: workspace.TaskDone, Version: versions["retried"]},
		"moved":   {ID: "moved", Status: workspace.TaskDone, Version: versions["moved"] + 1},
	})
	f.finish()
	f.depthFrom(map[workspace.TaskStatus]int{workspace.TaskInProgress: 2, workspace.TaskDone: 3, workspace.TaskPending: 1})

	got := map[string][]string{}
	for _, b := range f.bars {
		got[b.ID] = append(got[b.ID], b.Actor+":"+b.Outcome)
		if b.ID == "quiet" {
			assert.Equal(t, doneAt, b.End, "done at its last task.updated")
		}
	}
	assert.Equal(t, map[string][]string{
		"spoof":   {"x:open"},
		"quiet":   {"y:done"},
		"retried": {"z:set-aside", "z:done"},
		"moved":   {"w:open"},
		"dropped": {"v:released", "v:lapsed"},
	}, got)
	done, failed, claims := 0, 0, 0
	for _, b := range f.Buckets {
		done, failed, claims = done+b.Done, failed+b.Failed, claims+b.Claimed
	}
	assert.Equal(t, []int{2, 0, 7}, []int{done, failed, claims}, "done, failed, claims")
	// Every task's moves were read from its creation: the depth at the
	// window's start is nothing.
	first := f.Buckets[0]
	assert.Equal(t, []int{0, 0, 0}, []int{first.Ready, first.Running, first.Blocked})
	assert.ElementsMatch(t, []string{"x", "y", "z", "w", "v"}, keys(f.lanes), "no lane for lead or ops: nothing of theirs is drawn")
}

// TestALeaseOwnersProcessesShareTheirActorsLane: the merge queue's lease
// owners ("merger#PID-…") are its actor's, on one lane.
func TestALeaseOwnersProcessesShareTheirActorsLane(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	f := newFlow(start, start.Add(time.Hour))
	q := workspace.Subject{Kind: workspace.SubjectLock, ID: "merge-queue:main", Name: "merge-queue:main"}
	for i, owner := range []string{"merger#101-aa", "merger#202-bb", "merger"} {
		at := start.Add(time.Duration(i+1) * time.Minute)
		f.add(workspace.Event{Seq: int64(2*i + 1), Time: at, Actor: owner, Type: workspace.EventLockAcquired, Subject: q})
		f.add(workspace.Event{Seq: int64(2*i + 2), Time: at.Add(time.Second), Actor: owner, Type: workspace.EventLockReleased, Subject: q})
	}
	f.finish()
	assert.Equal(t, []string{"merger"}, keys(f.lanes))
	assert.Len(t, f.bars, 3)
	assert.Equal(t, "merger", laneOf("merger#101-aa"))
	assert.Equal(t, "#odd", laneOf("#odd"), "a name that starts with # is its own")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
