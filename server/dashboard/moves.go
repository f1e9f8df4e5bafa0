package dashboard

import (
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// A task's status, as the views follow it, comes from the log's structure
// and the task's record, never from an event's message (which a writer
// chooses). The typed events say it: task.created (pending), task.claimed
// (pending to in progress), task.released (in progress to pending). A
// task.updated does not: a heartbeat, an edit and a completion all write
// one. So the pass keeps each task's task.updated events since its last
// typed one, and settles them when the next typed event or the task's
// record says where they led: the state machine (workspace.TaskStatus.
// CanBecome) gives the moves between, which the pass places on the last
// of those events (a completion comes after the heartbeats before it).
// The record settles a task's last events only if its version is the one
// of the newest event read; one that moved on since is settled by the
// next render.

// statusSetAside is where a task went between in progress and pending
// through two task.updated events: failed then retried, or blocked then
// returned. The log does not say which; the charts count it as neither.
const statusSetAside workspace.TaskStatus = "set aside"

// outSetAside is the outcome of an attempt that ended that way.
const outSetAside = "set-aside"

// update is one task.updated event, kept until its move is known.
type update struct {
	At      time.Time
	Actor   string
	Name    string // the task's title
	Version int64
	Inside  bool // in the window (not past its end)
}

// taskTrack is what the pass knows of one task.
type taskTrack struct {
	status     workspace.TaskStatus // after the last move the pass knows; "" before the first
	updates    int                  // task.updated events since that move
	last, prev update               // the newest two of them
	claimer    string               // the lane of its last claim ("" when it came before the pass)
}

// before is the task's status before a typed event that needs want:
// what the pass knows, else want (the event says it).
func (tr *taskTrack) before(want workspace.TaskStatus) workspace.TaskStatus {
	if tr.status != "" {
		return tr.status
	}
	return want
}

// usualFrom is, for a task whose status before the pass is unknown, the
// status its first known move into a status most often comes from.
var usualFrom = map[workspace.TaskStatus]workspace.TaskStatus{
	workspace.TaskDone:      workspace.TaskInProgress,
	workspace.TaskFailed:    workspace.TaskInProgress,
	workspace.TaskBlocked:   workspace.TaskPending,
	workspace.TaskCancelled: workspace.TaskPending,
}

// settle places the moves of tr's pending task.updated events, which led
// the task to end.
func (f *flow) settle(id string, tr *taskTrack, end workspace.TaskStatus) {
	n := tr.updates
	tr.updates = 0
	if n == 0 {
		return
	}
	from := tr.status
	switch {
	case from == end:
		// Heartbeats and edits. (Blocked and back to pending between
		// two typed events is not seen.)
	case from == "":
		if u, ok := usualFrom[end]; ok {
			f.move(id, tr, u, end, tr.last, "")
		}
	case from == workspace.TaskInProgress && end == workspace.TaskPending && n >= 2:
		f.move(id, tr, from, statusSetAside, tr.prev, outSetAside)
		f.move(id, tr, statusSetAside, end, tr.last, "")
	default:
		f.move(id, tr, from, end, tr.last, "")
	}
	tr.status = end
}

// move records one move of a task's status, made by u's event: the
// queue counts, the throughput, and its attempts' bars. out, if set, is
// the outcome of the attempt it ends.
func (f *flow) move(id string, tr *taskTrack, from, to workspace.TaskStatus, u update, out string) {
	tr.status = to
	f.net[to]++
	if from != "" {
		f.net[from]--
	}
	if to == workspace.TaskInProgress {
		tr.claimer = laneOf(u.Actor)
	}
	if !u.Inside {
		return
	}
	i := f.bucketOf(u.At)
	if f.moves[i] == nil {
		f.moves[i] = map[workspace.TaskStatus]int{}
	}
	f.moves[i][to]++
	if from != "" {
		f.moves[i][from]--
	}
	b := &f.Buckets[i]
	switch to {
	case workspace.TaskInProgress:
		b.Claimed++
		f.closeAttempt(id, u.At, outLapsed)
		f.attempts[id] = f.open(bar{Actor: u.Actor, ID: id, Name: u.Name, Start: u.At})
		return
	case workspace.TaskDone:
		b.Done++
	case workspace.TaskFailed:
		b.Failed++
	}
	if from != workspace.TaskInProgress {
		return
	}
	if out == "" {
		out = string(to)
	}
	if _, ok := f.attempts[id]; !ok && tr.claimer == "" {
		// Claimed before the pass, by the actor that ends it.
		f.attempts[id] = f.open(bar{Actor: u.Actor, ID: id, Name: u.Name, Start: f.From, Clipped: true})
	}
	f.closeAttempt(id, u.At, out)
}

// laneOf is the lane of an actor: the actor itself, or for a lease owner
// such as the merge queue's "merger#PID-…" (one process's lease of the
// actor's, as the engine counts it) the actor before the "#".
func laneOf(actor string) string {
	if i := strings.IndexByte(actor, '#'); i > 0 {
		return actor[:i]
	}
	return actor
}

// unsettled lists the tasks whose last task.updated events are still to
// be settled by their records.
func (f *flow) unsettled() []string {
	var ids []string
	for id, tr := range f.tasks {
		if tr.updates > 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

// settleBy settles each task's last task.updated events by its record:
// its status at the version of the newest event read.
func (f *flow) settleBy(recs map[string]workspace.Task) {
	for id, t := range recs {
		if tr := f.tasks[id]; tr != nil && tr.updates > 0 && t.Version == tr.last.Version {
			f.settle(id, tr, t.Status)
		}
	}
}
