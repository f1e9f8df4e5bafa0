package conformance

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// The model-based test's operations are drawn from a seed as descriptions
// that name records by small indexes and conditions by mode ("the current
// version", "a stale one"); they are resolved against the model when run.
// So any subsequence of a sequence is itself a valid sequence, which is
// what shrinking needs.

var (
	modelActors    = []string{"alice", "bob", "carol"}
	modelNames     = []string{"plans/a.md", "plans/b.md", "src/c.go", "d"}
	modelNoteKeys  = [][2]string{{"decision", "db"}, {"decision", "api"}, {"glossary", "lease"}}
	modelResources = []string{"artifact:plans/a.md", "artifact:src/c.go", "note:decision/db", "role:lead"}
	modelStatuses  = []workspace.TaskStatus{
		workspace.TaskDone, workspace.TaskFailed, workspace.TaskPending,
		workspace.TaskBlocked, workspace.TaskCancelled, workspace.TaskInProgress,
	}
)

// missingTask is a well-formed task id that no store has.
const missingTask = "00000000-0000-7000-8000-000000000000"

// Condition modes of mop.Cond and mop.Fence.
const (
	modeNone    = 0 // no condition
	modeCurrent = 1 // the current version (token)
	modeStale   = 2 // a version (token) that is not the current one
)

// mop is one generated operation.
type mop struct {
	Kind    string
	H       int // which handle runs it
	Actor   int
	Target  int // artifact name, note key, resource or task, by index
	Cond    int // IfVersion mode
	Fence   int // fence (or release token) mode
	Content int
	To      int // rollback target, taken modulo the version
	Status  workspace.TaskStatus
	Prio    int
	Deps    []int
	Sub     []mop // a batch's ops
	Key     bool  // sent with a fresh idempotency key (writes other than lock calls)
}

func (o mop) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "h%d %s %s", o.H, modelActors[o.Actor], o.Kind)
	if o.Key {
		b.WriteString(" (keyed)")
	}
	switch {
	case o.Kind == "batch":
		parts := make([]string, len(o.Sub))
		for i, s := range o.Sub {
			parts[i] = strings.TrimPrefix(s.String(), fmt.Sprintf("h%d %s ", s.H, modelActors[s.Actor]))
		}
		fmt.Fprintf(&b, " [%s]", strings.Join(parts, "; "))
	case strings.HasPrefix(o.Kind, "art."):
		fmt.Fprintf(&b, " %s cond=%d fence=%d content=%d to=%d", modelNames[o.Target%len(modelNames)], o.Cond, o.Fence, o.Content, o.To)
	case strings.HasPrefix(o.Kind, "note."):
		k := modelNoteKeys[o.Target%len(modelNoteKeys)]
		fmt.Fprintf(&b, " %s/%s cond=%d fence=%d", k[0], k[1], o.Cond, o.Fence)
	case strings.HasPrefix(o.Kind, "lock."):
		fmt.Fprintf(&b, " %s token=%d", modelResources[o.Target%len(modelResources)], o.Fence)
	case o.Kind == "task.create":
		fmt.Fprintf(&b, " prio=%d deps=%v", o.Prio, o.Deps)
	case o.Kind == "task.status":
		fmt.Fprintf(&b, " #%d -> %s cond=%d", o.Target, o.Status, o.Cond)
	case o.Kind == "task.heartbeat":
		fmt.Fprintf(&b, " #%d cond=%d", o.Target, o.Cond)
	}
	return b.String()
}

var modelWeights = []struct {
	kind   string
	weight int
}{
	{"art.create", 10}, {"art.update", 14}, {"art.delete", 4}, {"art.rollback", 5},
	{"note.put", 10}, {"note.delete", 4},
	{"task.create", 10}, {"task.status", 10}, {"task.claim", 8}, {"task.heartbeat", 3},
	{"lock.acquire", 8}, {"lock.release", 6}, {"lock.force", 2},
	{"batch", 8}, {"replay", 4},
}

// batchable kinds can be ops of a batch.
var batchable = map[string]bool{
	"art.create": true, "art.update": true, "art.delete": true, "art.rollback": true,
	"note.put": true, "note.delete": true, "task.create": true, "task.status": true, "lock.release": true,
}

func genOps(rng *rand.Rand, n int) []mop {
	ops := make([]mop, n)
	for i := range ops {
		ops[i] = genOp(rng, true)
	}
	return ops
}

func genOp(rng *rand.Rand, allowBatch bool) mop {
	total := 0
	for _, w := range modelWeights {
		total += w.weight
	}
	var kind string
	for {
		r := rng.IntN(total)
		for _, w := range modelWeights {
			if r < w.weight {
				kind = w.kind
				break
			}
			r -= w.weight
		}
		if kind != "batch" || allowBatch {
			break
		}
	}
	o := mop{
		Kind: kind, H: rng.IntN(2), Actor: rng.IntN(len(modelActors)),
		Target: rng.IntN(16), Cond: rng.IntN(3), Fence: rng.IntN(3),
		Content: rng.IntN(4), To: rng.IntN(8), Prio: rng.IntN(3),
		Status: modelStatuses[rng.IntN(len(modelStatuses))],
	}
	if rng.IntN(4) == 0 {
		o.Fence = modeNone
	}
	for range rng.IntN(3) {
		o.Deps = append(o.Deps, rng.IntN(16))
	}
	o.Key = batchable[kind] && kind != "lock.release" && rng.IntN(4) == 0
	if kind == "batch" {
		o.Key = rng.IntN(4) == 0
		for range 2 + rng.IntN(3) {
			s := genOp(rng, false)
			for !batchable[s.Kind] {
				s = genOp(rng, false)
			}
			s.H, s.Actor, s.Key = o.H, o.Actor, false
			o.Sub = append(o.Sub, s)
		}
	}
	return o
}

// version picks the IfVersion for mode given the current version (0: none).
func condVersion(mode int, cur int64) int64 {
	switch mode {
	case modeCurrent:
		return cur
	case modeStale:
		if cur > 1 {
			return cur - 1
		}
		return cur + 1
	}
	return 0
}

// fenceFor picks a fence for the record guarded by resource.
func (m *model) fenceFor(mode int, resource string) int64 {
	l, found := m.locks[resource]
	if !found {
		return 0
	}
	switch mode {
	case modeCurrent:
		return l.token
	case modeStale:
		return l.token - 1 // 0 (no fence) for the first token
	}
	return 0
}

// tokenFor picks the token a release presents.
func (m *model) tokenFor(mode int, resource string) int64 {
	var cur int64
	if l, found := m.locks[resource]; found {
		cur = l.token
	}
	switch mode {
	case modeStale:
		if cur > 1 {
			return cur - 1
		}
		return cur + 2
	case modeNone:
		return cur + 1
	}
	return max(cur, 1)
}

func (m *model) taskID(target int) string {
	if len(m.tasks) == 0 {
		return missingTask
	}
	return m.tasks[target%len(m.tasks)].id
}

// resolve turns a batchable mop into the workspace.Op it stands for now.
func (m *model) resolve(o mop) workspace.Op {
	name := modelNames[o.Target%len(modelNames)]
	var ver int64
	if a, live := m.arts[name]; live {
		ver = a.version()
	}
	content := []byte(fmt.Sprintf("content %d", o.Content))
	switch o.Kind {
	case "art.create":
		return workspace.CreateArtifactOp{Artifact: workspace.NewArtifact{Name: name, Kind: "plan", Content: content}}
	case "art.update":
		c := workspace.ArtifactChange{Content: content}
		if o.Content == 3 {
			kind := "review"
			c = workspace.ArtifactChange{Kind: &kind} // metadata only: the content stays
		}
		return workspace.UpdateArtifactOp{Ref: workspace.ByName(name), Change: c,
			Cond: workspace.Cond{IfVersion: condVersion(o.Cond, ver), Fence: m.fenceFor(o.Fence, "artifact:"+name)}}
	case "art.delete":
		return workspace.DeleteArtifactOp{Ref: workspace.ByName(name),
			Cond: workspace.Cond{IfVersion: condVersion(o.Cond, ver), Fence: m.fenceFor(o.Fence, "artifact:"+name)}}
	case "art.rollback":
		return workspace.RollbackArtifactOp{Ref: workspace.ByName(name), To: 1 + int64(o.To)%(ver+1),
			Cond: workspace.Cond{IfVersion: condVersion(o.Cond, ver), Fence: m.fenceFor(o.Fence, "artifact:"+name)}}
	case "note.put", "note.delete":
		k := modelNoteKeys[o.Target%len(modelNoteKeys)]
		cond := workspace.Cond{IfVersion: condVersion(o.Cond, m.notes[k[0]+"/"+k[1]]), Fence: m.fenceFor(o.Fence, "note:"+k[0]+"/"+k[1])}
		if o.Kind == "note.delete" {
			return workspace.DeleteNoteOp{Kind: k[0], Key: k[1], Cond: cond}
		}
		return workspace.PutNoteOp{Note: workspace.NotePut{Kind: k[0], Key: k[1], Body: string(content)}, Cond: cond}
	case "task.create":
		nt := workspace.NewTask{Title: fmt.Sprintf("task %d", len(m.tasks)), Priority: o.Prio}
		for _, d := range o.Deps {
			if len(m.tasks) > 0 {
				nt.DependsOn = append(nt.DependsOn, m.taskID(d))
			}
		}
		return workspace.CreateTaskOp{Task: nt}
	case "task.status":
		var ver int64
		if len(m.tasks) > 0 {
			ver = m.tasks[o.Target%len(m.tasks)].version
		}
		s := o.Status
		return workspace.UpdateTaskOp{ID: m.taskID(o.Target), Change: workspace.TaskChange{Status: &s},
			Cond: workspace.Cond{IfVersion: condVersion(o.Cond, ver)}}
	case "lock.release":
		res := modelResources[o.Target%len(modelResources)]
		return workspace.ReleaseLockOp{Resource: res, Token: m.tokenFor(o.Fence, res)}
	}
	return nil
}
