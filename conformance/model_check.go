package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// runSingle runs op through the single-record call it stands for.
func runSingle(ctx context.Context, ws *workspace.Workspace, base workspace.Write, op workspace.Op) (workspace.OpResult, error) {
	switch o := op.(type) {
	case workspace.CreateArtifactOp:
		a, err := ws.Artifacts().Create(ctx, base, o.Artifact)
		return workspace.OpResult{Artifact: &a}, err
	case workspace.UpdateArtifactOp:
		a, err := ws.Artifacts().Update(ctx, writeOf(base, o.Cond), o.Ref, o.Change)
		return workspace.OpResult{Artifact: &a}, err
	case workspace.DeleteArtifactOp:
		return workspace.OpResult{}, ws.Artifacts().Delete(ctx, writeOf(base, o.Cond), o.Ref)
	case workspace.RollbackArtifactOp:
		a, err := ws.Artifacts().Rollback(ctx, writeOf(base, o.Cond), o.Ref, o.To)
		return workspace.OpResult{Artifact: &a}, err
	case workspace.PutNoteOp:
		n, err := ws.Notes().Put(ctx, writeOf(base, o.Cond), o.Note)
		return workspace.OpResult{Note: &n}, err
	case workspace.DeleteNoteOp:
		return workspace.OpResult{}, ws.Notes().Delete(ctx, writeOf(base, o.Cond), o.Kind, o.Key)
	case workspace.CreateTaskOp:
		t, err := ws.Tasks().Create(ctx, base, o.Task)
		return workspace.OpResult{Task: &t}, err
	case workspace.UpdateTaskOp:
		w := writeOf(base, o.Cond)
		var (
			t   workspace.Task
			err error
		)
		switch *o.Change.Status {
		case workspace.TaskDone:
			t, err = ws.Tasks().Complete(ctx, w, o.ID, workspace.TaskResult{Summary: "done"})
		case workspace.TaskFailed:
			t, err = ws.Tasks().Fail(ctx, w, o.ID, workspace.TaskResult{Summary: "failed"})
		case workspace.TaskPending:
			t, err = ws.Tasks().Release(ctx, w, o.ID)
		default:
			t, err = ws.Tasks().Update(ctx, w, o.ID, o.Change)
		}
		return workspace.OpResult{Task: &t}, err
	case workspace.ReleaseLockOp:
		return workspace.OpResult{}, ws.Locks().Release(ctx, workspace.Lease{Resource: o.Resource, Owner: base.Actor, Token: o.Token})
	}
	return workspace.OpResult{}, fmt.Errorf("unmodelled op %T", op)
}

func writeOf(base workspace.Write, c workspace.Cond) workspace.Write {
	base.IfVersion, base.Fence, base.Message = c.IfVersion, c.Fence, c.Message
	return base
}

// checkState compares the whole store with the model, through the other handle too.
func (r *modelRun) checkState() string {
	ctx, m := r.ctx, r.m
	for hi, ws := range r.hs {
		arts, err := ws.Artifacts().List(ctx, workspace.ArtifactFilter{Limit: 1000})
		if err != nil {
			return fmt.Sprintf("handle %d: list artifacts: %v", hi, err)
		}
		var have, want []string
		for _, a := range arts.Artifacts {
			have = append(have, fmt.Sprintf("artifact %s v%d", a.Name, a.Version))
		}
		for name, a := range m.arts {
			want = append(want, a.describe(name))
		}
		slices.Sort(want)
		if !slices.Equal(have, want) {
			return fmt.Sprintf("handle %d: artifacts %v, want %v", hi, have, want)
		}

		notes, err := ws.Notes().List(ctx, workspace.NoteFilter{Limit: 1000})
		if err != nil {
			return fmt.Sprintf("handle %d: list notes: %v", hi, err)
		}
		have, want = nil, nil
		for _, n := range notes.Notes {
			have = append(have, describeNote(n.Kind+"/"+n.Key, n.Version))
		}
		for k, v := range m.notes {
			want = append(want, describeNote(k, v))
		}
		slices.Sort(want)
		if !slices.Equal(have, want) {
			return fmt.Sprintf("handle %d: notes %v, want %v", hi, have, want)
		}

		tasks, err := ws.Tasks().List(ctx, workspace.TaskFilter{Limit: 1000})
		if err != nil {
			return fmt.Sprintf("handle %d: list tasks: %v", hi, err)
		}
		have, want = nil, nil
		for _, t := range tasks.Tasks {
			have = append(have, t.ID+" "+describeResult(workspace.OpResult{Task: &t}))
		}
		for _, t := range m.tasks {
			want = append(want, t.id+" "+t.describe())
		}
		if !slices.Equal(have, want) {
			return fmt.Sprintf("handle %d: tasks\n%s\nwant\n%s", hi, strings.Join(have, "\n"), strings.Join(want, "\n"))
		}

		leases, err := ws.Locks().List(ctx)
		if err != nil {
			return fmt.Sprintf("handle %d: list locks: %v", hi, err)
		}
		have, want = nil, nil
		for _, l := range leases {
			have = append(have, fmt.Sprintf("%s %s %d", l.Resource, l.Owner, l.Token))
		}
		for res, l := range m.locks {
			if l.owner != "" {
				want = append(want, fmt.Sprintf("%s %s %d", res, l.owner, l.token))
			}
		}
		slices.Sort(want)
		if !slices.Equal(have, want) {
			return fmt.Sprintf("handle %d: leases %v, want %v", hi, have, want)
		}
	}
	for name, a := range m.arts {
		got, err := r.hs[0].Artifacts().Get(ctx, workspace.ByName(name))
		if err != nil {
			return fmt.Sprintf("get %s: %v", name, err)
		}
		if want := a.contents[len(a.contents)-1]; string(got.Content) != want {
			return fmt.Sprintf("artifact %s v%d content %q, want %q", name, got.Version, got.Content, want)
		}
		// Every version keeps its own content, rollbacks included.
		vs, err := r.hs[1].Artifacts().Versions(ctx, workspace.ByName(name))
		if err != nil {
			return fmt.Sprintf("versions of %s: %v", name, err)
		}
		if len(vs) != len(a.contents) {
			return fmt.Sprintf("artifact %s has %d versions, want %d", name, len(vs), len(a.contents))
		}
		for i, v := range vs {
			sum := sha256.Sum256([]byte(a.contents[i]))
			if v.Version != int64(i+1) || v.SHA256 != hex.EncodeToString(sum[:]) {
				return fmt.Sprintf("artifact %s version %d (listed as v%d) has sha256 %s, want that of %q", name, i+1, v.Version, v.SHA256, a.contents[i])
			}
		}
	}
	head, err := r.hs[0].Events().Head(ctx)
	if err != nil || head != m.head {
		return fmt.Sprintf("head %d (%v), want %d", head, err, m.head)
	}
	return ""
}
