package conformance

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/agentspace/agentspace/workspace"
)

// model is the in-memory reference of the semantics the model-based test
// checks a store against: what each write does to versions, which error
// it gets, and which events it appends. No lease or claim ever expires in
// the test (TTLs are long), so the model has no clock.
type model struct {
	arts  map[string]*mArt   // live artifacts by name
	notes map[string]int64   // "kind/key" -> version
	tasks []*mTask           // in creation order
	locks map[string]*mLease // lease rows by resource; owner "" once released
	head  int64
}

type mArt struct {
	id       string
	contents []string // contents[v-1] is version v's
}

func (a *mArt) version() int64 { return int64(len(a.contents)) }

type mTask struct {
	id       string
	status   workspace.TaskStatus
	assignee string
	version  int64
	attempts int
	priority int
	deps     []int // indexes into model.tasks
}

type mLease struct {
	owner string
	token int64
}

// outcome is what the model expects of one call.
type outcome struct {
	class   string   // errClass of the expected error ("ok" for none)
	current int64    // for a conflict: the version it must carry
	events  []string // the event types a success appends
	result  string   // a success's result record, as describeResult puts it
}

func ok(events ...string) outcome { return outcome{class: "ok", events: events} }

func (o outcome) with(result string) outcome { o.result = result; return o }

func (a *mArt) describe(name string) string { return fmt.Sprintf("artifact %s v%d", name, a.version()) }

func (t *mTask) describe() string {
	return fmt.Sprintf("task %s v%d attempts %d assignee %q", t.status, t.version, t.attempts, t.assignee)
}

func describeNote(k string, v int64) string { return fmt.Sprintf("note %s v%d", k, v) }

// describeResult puts a store's op result in the model's words.
func describeResult(r workspace.OpResult) string {
	switch {
	case r.Artifact != nil:
		return fmt.Sprintf("artifact %s v%d", r.Artifact.Name, r.Artifact.Version)
	case r.Task != nil:
		t := r.Task
		return fmt.Sprintf("task %s v%d attempts %d assignee %q", t.Status, t.Version, t.Attempts, t.Assignee)
	case r.Note != nil:
		return describeNote(r.Note.Kind+"/"+r.Note.Key, r.Note.Version)
	}
	return ""
}
func fail(class string) outcome  { return outcome{class: class} }
func conflict(cur int64) outcome { return outcome{class: "conflict", current: cur} }

func newModel() *model {
	return &model{arts: map[string]*mArt{}, notes: map[string]int64{}, locks: map[string]*mLease{}}
}

func (m *model) clone() *model {
	c := &model{arts: map[string]*mArt{}, notes: maps.Clone(m.notes), locks: map[string]*mLease{}, head: m.head}
	for k, a := range m.arts {
		c.arts[k] = &mArt{id: a.id, contents: slices.Clone(a.contents)}
	}
	for _, t := range m.tasks {
		tc := *t
		tc.deps = slices.Clone(t.deps)
		c.tasks = append(c.tasks, &tc)
	}
	for k, l := range m.locks {
		lc := *l
		c.locks[k] = &lc
	}
	return c
}

// guard is the engine's lock rule for a write to a record guarded by resource.
func (m *model) guard(resource string, fence int64, actor string) string {
	l, found := m.locks[resource]
	if !found {
		return ""
	}
	if fence > 0 && l.token > fence {
		return "stale_fence"
	}
	if l.owner != "" && l.owner != actor {
		return "locked"
	}
	return ""
}

func (m *model) taskIndex(id string) int {
	return slices.IndexFunc(m.tasks, func(t *mTask) bool { return t.id == id })
}

// apply plays one batch op by actor on m. On a failure m is left
// half-changed: callers apply batches to a clone.
func (m *model) apply(actor string, op workspace.Op) outcome {
	switch o := op.(type) {
	case workspace.CreateArtifactOp:
		if _, live := m.arts[o.Artifact.Name]; live {
			return fail("exists")
		}
		if g := m.guard("artifact:"+o.Artifact.Name, 0, actor); g != "" {
			return fail(g)
		}
		a := &mArt{contents: []string{string(o.Artifact.Content)}}
		m.arts[o.Artifact.Name] = a
		return ok(workspace.EventArtifactCreated).with(a.describe(o.Artifact.Name))
	case workspace.UpdateArtifactOp:
		a, live := m.arts[o.Ref.Name]
		if !live {
			return fail("not_found")
		}
		if o.IfVersion != 0 && o.IfVersion != a.version() {
			return conflict(a.version())
		}
		if g := m.guard("artifact:"+o.Ref.Name, o.Fence, actor); g != "" {
			return fail(g)
		}
		next := a.contents[len(a.contents)-1]
		if o.Change.Content != nil {
			next = string(o.Change.Content)
		}
		a.contents = append(a.contents, next)
		return ok(workspace.EventArtifactUpdated).with(a.describe(o.Ref.Name))
	case workspace.DeleteArtifactOp:
		a, live := m.arts[o.Ref.Name]
		if !live {
			return fail("not_found")
		}
		if o.IfVersion != 0 && o.IfVersion != a.version() {
			return conflict(a.version())
		}
		if g := m.guard("artifact:"+o.Ref.Name, o.Fence, actor); g != "" {
			return fail(g)
		}
		delete(m.arts, o.Ref.Name)
		return ok(workspace.EventArtifactDeleted)
	case workspace.RollbackArtifactOp:
		a, live := m.arts[o.Ref.Name]
		if !live {
			return fail("not_found")
		}
		if o.IfVersion != 0 && o.IfVersion != a.version() {
			return conflict(a.version())
		}
		if g := m.guard("artifact:"+o.Ref.Name, o.Fence, actor); g != "" {
			return fail(g)
		}
		if o.To >= a.version() {
			return fail("invalid")
		}
		a.contents = append(a.contents, a.contents[o.To-1])
		return ok(workspace.EventArtifactRolledBack).with(a.describe(o.Ref.Name))
	case workspace.PutNoteOp:
		k := o.Note.Kind + "/" + o.Note.Key
		cur := m.notes[k]
		if o.IfVersion != 0 && o.IfVersion != cur {
			return conflict(cur)
		}
		if g := m.guard("note:"+k, o.Fence, actor); g != "" {
			return fail(g)
		}
		m.notes[k] = cur + 1
		return ok(workspace.EventNotePut).with(describeNote(k, cur+1))
	case workspace.DeleteNoteOp:
		k := o.Kind + "/" + o.Key
		cur, found := m.notes[k]
		if !found {
			return fail("not_found")
		}
		if o.IfVersion != 0 && o.IfVersion != cur {
			return conflict(cur)
		}
		if g := m.guard("note:"+k, o.Fence, actor); g != "" {
			return fail(g)
		}
		delete(m.notes, k)
		return ok(workspace.EventNoteDeleted)
	case workspace.CreateTaskOp:
		t := &mTask{status: workspace.TaskPending, version: 1, priority: o.Task.Priority}
		for _, d := range o.Task.DependsOn {
			i := m.taskIndex(d)
			if i < 0 {
				return fail("not_found")
			}
			if !slices.Contains(t.deps, i) {
				t.deps = append(t.deps, i)
			}
		}
		m.tasks = append(m.tasks, t)
		return ok(workspace.EventTaskCreated).with(t.describe())
	case workspace.UpdateTaskOp:
		return m.updateTask(actor, o)
	case workspace.ReleaseLockOp:
		return m.release(actor, o.Resource, o.Token)
	}
	return fail("unmodelled op")
}

// updateTask follows the state machine of workspace.TaskStatus.
func (m *model) updateTask(actor string, o workspace.UpdateTaskOp) outcome {
	i := m.taskIndex(o.ID)
	if i < 0 {
		return fail("not_found")
	}
	t := m.tasks[i]
	if o.IfVersion != 0 && o.IfVersion != t.version {
		return conflict(t.version)
	}
	typ := workspace.EventTaskUpdated
	if o.Change.Status != nil {
		next := *o.Change.Status
		switch {
		case next == workspace.TaskInProgress:
			return fail("invalid")
		case t.status == workspace.TaskPending && (next == workspace.TaskDone || next == workspace.TaskFailed):
			return fail("not_holder") // a pending task has no holder to finish it
		case !t.status.CanBecome(next):
			return fail("invalid") // a status is not a transition to itself either
		case t.status == workspace.TaskInProgress && next != workspace.TaskCancelled && t.assignee != actor:
			return fail("not_holder")
		}
		if t.status == workspace.TaskInProgress && next == workspace.TaskPending {
			t.assignee = ""
			typ = workspace.EventTaskReleased
		}
		t.status = next
	}
	t.version++
	return ok(typ).with(t.describe())
}

// claim gives the best ready task: pending, every dependency done; highest
// priority, then oldest (lowest id). It returns its index, or -1.
func (m *model) claim(actor string) (int, outcome) {
	best := -1
	for i, t := range m.tasks {
		if t.status != workspace.TaskPending {
			continue
		}
		ready := true
		for _, d := range t.deps {
			ready = ready && m.tasks[d].status == workspace.TaskDone
		}
		if !ready {
			continue
		}
		if best < 0 || cmp.Or(cmp.Compare(m.tasks[best].priority, t.priority), cmp.Compare(t.id, m.tasks[best].id)) < 0 {
			best = i
		}
	}
	if best < 0 {
		return -1, fail("no_task")
	}
	t := m.tasks[best]
	t.status, t.assignee = workspace.TaskInProgress, actor
	t.attempts++
	t.version++
	return best, ok(workspace.EventTaskClaimed).with(t.describe())
}

// heartbeat extends a claim: only its assignee, while in progress.
func (m *model) heartbeat(actor, id string, ifVersion int64) outcome {
	i := m.taskIndex(id)
	if i < 0 {
		return fail("not_found")
	}
	t := m.tasks[i]
	if ifVersion != 0 && ifVersion != t.version {
		return conflict(t.version)
	}
	if t.status != workspace.TaskInProgress || t.assignee != actor {
		return fail("lock_lost")
	}
	t.version++
	return ok(workspace.EventTaskUpdated).with(t.describe())
}

func (m *model) taskVersion(id string) int64 {
	if i := m.taskIndex(id); i >= 0 {
		return m.tasks[i].version
	}
	return 0
}

func (m *model) acquire(actor, resource string) outcome {
	l, found := m.locks[resource]
	if found && l.owner != "" {
		if l.owner != actor {
			return fail("locked")
		}
		return ok(workspace.EventLockRenewed)
	}
	if !found {
		l = &mLease{}
		m.locks[resource] = l
	}
	l.owner = actor
	l.token++
	return ok(workspace.EventLockAcquired)
}

func (m *model) release(actor, resource string, token int64) outcome {
	l, found := m.locks[resource]
	switch {
	case !found:
		return fail("not_holder")
	case l.token > token:
		return fail("lock_lost")
	case l.token == token && l.owner == "":
		return fail("lock_lost")
	case l.token != token || l.owner != actor:
		return fail("not_holder")
	}
	l.owner = ""
	return ok(workspace.EventLockReleased)
}

func (m *model) forceRelease(resource string) outcome {
	l, found := m.locks[resource]
	if !found || l.owner == "" {
		return fail("not_found")
	}
	l.owner = ""
	l.token++ // the holder's token is revoked: its fence is stale
	return ok(workspace.EventLockForced)
}
