package engine

import (
	"context"
	"fmt"
	"reflect"

	"github.com/agentspace/agentspace/policy"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// The op table: everything the engine knows of each batch op type, declared
// once. Adding an op is its type in package workspace, an entry here, its
// code in package wire and its conformance case; TestOpTableCoversEveryOp
// fails while an op type of package workspace has no entry.
//
// An entry's functions take the op as its own type (opEntry[O]); the table
// keys them by that type, so ops are values: a pointer to an op is not in
// the table and is refused as ErrInvalid.
var opTable = map[reflect.Type]opSpec{}

func init() {
	declare(opEntry[workspace.CreateArtifactOp]{
		check: checkCreateArtifact,
		hint: func(o workspace.CreateArtifactOp) driver.ReadHint {
			return driver.ReadHint{Artifact: workspace.ArtifactRef{Name: o.Artifact.Name}}
		},
		action: func(ctx context.Context, x *exec, _ who, o workspace.CreateArtifactOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return x.artifactNeeds(ctx, workspace.ByName(o.Artifact.Name), policy.ArtifactWrite)
		},
		policySource: func(_ context.Context, _ *exec, o workspace.CreateArtifactOp) ([]byte, bool, error) {
			return o.Artifact.Content, o.Artifact.Name == workspace.PolicyArtifact, nil
		},
		pins: func(o workspace.CreateArtifactOp) bool { return o.Pin },
		apply: func(ctx context.Context, x *exec, o workspace.CreateArtifactOp) (workspace.OpResult, error) {
			a, err := x.createArtifact(ctx, o)
			if err == nil && o.Pin {
				err = x.pinWritten(ctx, a)
			}
			return workspace.OpResult{Artifact: a}, err
		},
	})
	declare(opEntry[workspace.UpdateArtifactOp]{
		check: checkUpdateArtifact,
		hint: func(o workspace.UpdateArtifactOp) driver.ReadHint {
			return driver.ReadHint{Artifact: workspace.ArtifactRef{ID: o.Ref.ID, Name: o.Ref.Name}}
		},
		message: func(o workspace.UpdateArtifactOp) string { return o.Message },
		action: func(ctx context.Context, x *exec, _ who, o workspace.UpdateArtifactOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return x.artifactNeeds(ctx, o.Ref, policy.ArtifactWrite)
		},
		policySource: func(_ context.Context, x *exec, o workspace.UpdateArtifactOp) ([]byte, bool, error) {
			return o.Change.Content, o.Change.Content != nil && x.isPolicy(o.Ref), nil
		},
		pins: func(o workspace.UpdateArtifactOp) bool { return o.Pin },
		apply: func(ctx context.Context, x *exec, o workspace.UpdateArtifactOp) (workspace.OpResult, error) {
			a, err := x.updateArtifact(ctx, o)
			if err == nil && o.Pin {
				err = x.pinWritten(ctx, a)
			}
			return workspace.OpResult{Artifact: a}, err
		},
	})
	declare(opEntry[workspace.DeleteArtifactOp]{
		check:   checkDeleteArtifact,
		message: func(o workspace.DeleteArtifactOp) string { return o.Message },
		action: func(ctx context.Context, x *exec, _ who, o workspace.DeleteArtifactOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return x.artifactNeeds(ctx, o.Ref, policy.ArtifactDelete)
		},
		apply: func(ctx context.Context, x *exec, o workspace.DeleteArtifactOp) (workspace.OpResult, error) {
			return workspace.OpResult{}, x.deleteArtifact(ctx, o)
		},
	})
	declare(opEntry[workspace.RollbackArtifactOp]{
		check:   checkRollbackArtifact,
		message: func(o workspace.RollbackArtifactOp) string { return o.Message },
		action: func(ctx context.Context, x *exec, _ who, o workspace.RollbackArtifactOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return x.artifactNeeds(ctx, o.Ref, policy.ArtifactWrite)
		},
		policySource: func(ctx context.Context, x *exec, o workspace.RollbackArtifactOp) ([]byte, bool, error) {
			return x.rollbackPolicySource(ctx, o)
		},
		apply: func(ctx context.Context, x *exec, o workspace.RollbackArtifactOp) (workspace.OpResult, error) {
			a, err := x.rollbackArtifact(ctx, o)
			return workspace.OpResult{Artifact: a}, err
		},
	})
	declare(opEntry[workspace.CreateTaskOp]{
		check: checkCreateTask,
		action: func(_ context.Context, _ *exec, _ who, o workspace.CreateTaskOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return policy.TaskAdd, "", workspace.Subject{Kind: "task", Name: o.Task.Title}, nil
		},
		apply: func(ctx context.Context, x *exec, o workspace.CreateTaskOp) (workspace.OpResult, error) {
			t, err := x.createTask(ctx, o)
			return workspace.OpResult{Task: t}, err
		},
	})
	declare(opEntry[workspace.UpdateTaskOp]{
		check:   checkUpdateTask,
		hint:    func(o workspace.UpdateTaskOp) driver.ReadHint { return driver.ReadHint{Task: o.ID} },
		message: func(o workspace.UpdateTaskOp) string { return o.Message },
		action: func(ctx context.Context, x *exec, w who, o workspace.UpdateTaskOp, first bool) (policy.Action, string, workspace.Subject, error) {
			return x.taskUpdateNeeds(ctx, w, o, first)
		},
		apply: func(ctx context.Context, x *exec, o workspace.UpdateTaskOp) (workspace.OpResult, error) {
			t, err := x.updateTask(ctx, o)
			return workspace.OpResult{Task: t}, err
		},
	})
	declare(opEntry[workspace.PutNoteOp]{
		check:    checkPutNote,
		reserved: func(o workspace.PutNoteOp) string { return o.Note.Kind },
		hint: func(o workspace.PutNoteOp) driver.ReadHint {
			return driver.ReadHint{NoteKind: o.Note.Kind, NoteKey: o.Note.Key}
		},
		message: func(o workspace.PutNoteOp) string { return o.Message },
		action: func(_ context.Context, _ *exec, _ who, o workspace.PutNoteOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return noteNeeds(o.Note.Kind, o.Note.Key)
		},
		apply: func(ctx context.Context, x *exec, o workspace.PutNoteOp) (workspace.OpResult, error) {
			n, err := x.putNote(ctx, o)
			return workspace.OpResult{Note: n}, err
		},
	})
	declare(opEntry[workspace.DeleteNoteOp]{
		check:    checkDeleteNote,
		reserved: func(o workspace.DeleteNoteOp) string { return o.Kind },
		hint: func(o workspace.DeleteNoteOp) driver.ReadHint {
			return driver.ReadHint{NoteKind: o.Kind, NoteKey: o.Key}
		},
		message: func(o workspace.DeleteNoteOp) string { return o.Message },
		action: func(_ context.Context, _ *exec, _ who, o workspace.DeleteNoteOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return noteNeeds(o.Kind, o.Key)
		},
		apply: func(ctx context.Context, x *exec, o workspace.DeleteNoteOp) (workspace.OpResult, error) {
			return workspace.OpResult{}, x.deleteNote(ctx, o)
		},
	})
	declare(opEntry[workspace.ReleaseLockOp]{
		check: checkReleaseLock,
		hint:  func(o workspace.ReleaseLockOp) driver.ReadHint { return driver.ReadHint{Lease: o.Resource} },
		action: func(_ context.Context, _ *exec, _ who, o workspace.ReleaseLockOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return policy.Lock, o.Resource, workspace.Subject{Kind: "lock", Name: o.Resource}, nil
		},
		apply: func(ctx context.Context, x *exec, o workspace.ReleaseLockOp) (workspace.OpResult, error) {
			return workspace.OpResult{}, x.releaseLock(ctx, o.Resource, x.actor, o.Token, o.Message)
		},
	})
	declare(opEntry[workspace.StopActorOp]{
		check:   checkStopActor,
		message: func(o workspace.StopActorOp) string { return o.Message },
		action: func(_ context.Context, _ *exec, _ who, o workspace.StopActorOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return policy.AdminTokens, "", workspace.Subject{Kind: "actor", Name: o.Actor}, nil
		},
		apply: func(ctx context.Context, x *exec, o workspace.StopActorOp) (workspace.OpResult, error) {
			return workspace.OpResult{}, x.stopActor(ctx, o)
		},
		operator: true,
	})
	declare(opEntry[workspace.SendMessageOp]{
		check: checkSendMessage,
		action: func(_ context.Context, x *exec, w who, o workspace.SendMessageOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			subj := workspace.Subject{Kind: workspace.SubjectMessage, Name: o.Message.Subject}
			to := o.Message.To
			for _, r := range to[:len(to)-1] {
				if err := x.allow(w, policy.MessageSend, r, subj); err != nil {
					return "", "", subj, err
				}
			}
			return policy.MessageSend, to[len(to)-1], subj, nil
		},
		apply: func(ctx context.Context, x *exec, o workspace.SendMessageOp) (workspace.OpResult, error) {
			m, err := x.sendMessage(ctx, o.Message, "")
			return workspace.OpResult{Msg: m}, err
		},
	})
	declare(opEntry[workspace.AckMessageOp]{
		check: func(_ *handle, o workspace.AckMessageOp) error {
			if err := checkID("message id", o.ID); err != nil {
				return err
			}
			return checkText("reply", o.Reply, maxReplyLen)
		},
		hint: func(o workspace.AckMessageOp) driver.ReadHint {
			return driver.ReadHint{NoteKind: msgKind, NoteKey: o.ID}
		},
		// Who may ack is decided by the message's recipients (ackMessage),
		// not by a rule: an ack needs no right of the policy.
		action: func(context.Context, *exec, who, workspace.AckMessageOp, bool) (policy.Action, string, workspace.Subject, error) {
			return "", "", workspace.Subject{}, nil
		},
		apply: func(ctx context.Context, x *exec, o workspace.AckMessageOp) (workspace.OpResult, error) {
			m, err := x.ackMessage(ctx, o)
			return workspace.OpResult{Msg: m}, err
		},
	})
	declare(opEntry[workspace.PauseActorOp]{
		check: func(_ *handle, o workspace.PauseActorOp) error {
			if err := checkActor(o.Actor); err != nil {
				return err
			}
			if o.AckTimeout < 0 || o.AckTimeout > workspace.MaxTTL {
				return invalid("ack timeout", "%v is out of range (0 for none, at most %v)", o.AckTimeout, workspace.MaxTTL)
			}
			return checkText("message", o.Message, workspace.MaxTextLen)
		},
		message: func(o workspace.PauseActorOp) string { return o.Message },
		action: func(_ context.Context, _ *exec, _ who, o workspace.PauseActorOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return policy.AdminTokens, "", workspace.Subject{Kind: workspace.SubjectActor, Name: o.Actor}, nil
		},
		apply: func(ctx context.Context, x *exec, o workspace.PauseActorOp) (workspace.OpResult, error) {
			m, err := x.pauseActor(ctx, o)
			return workspace.OpResult{Msg: m}, err
		},
		operator: true,
	})
	declare(opEntry[workspace.ResumeActorOp]{
		check: func(_ *handle, o workspace.ResumeActorOp) error {
			if err := checkActor(o.Actor); err != nil {
				return err
			}
			return checkText("message", o.Message, workspace.MaxTextLen)
		},
		message: func(o workspace.ResumeActorOp) string { return o.Message },
		action: func(_ context.Context, _ *exec, _ who, o workspace.ResumeActorOp, _ bool) (policy.Action, string, workspace.Subject, error) {
			return policy.AdminTokens, "", workspace.Subject{Kind: workspace.SubjectActor, Name: o.Actor}, nil
		},
		apply: func(ctx context.Context, x *exec, o workspace.ResumeActorOp) (workspace.OpResult, error) {
			return workspace.OpResult{}, x.resumeActor(ctx, o)
		},
		operator: true,
	})
}

// opEntry declares one op type O: every field but check, action and apply
// may be nil.
type opEntry[O workspace.Op] struct {
	// check validates the op alone, before the batch is queued.
	check func(h *handle, o O) error
	// reserved names the note kind the op writes, for the reserved-kind
	// check; nil for an op that writes no note.
	reserved func(o O) string
	// hint names the record the op reads first (ReadHint).
	hint func(o O) driver.ReadHint
	// message is the op's own message, kept on a conflict event.
	message func(o O) string
	// action is what the policy must allow, read in the transaction.
	action func(ctx context.Context, x *exec, w who, o O, first bool) (policy.Action, string, workspace.Subject, error)
	// policySource is the content of the policy the op would write, and
	// whether it writes one; nil for an op that cannot.
	policySource func(ctx context.Context, x *exec, o O) ([]byte, bool, error)
	// pins reports whether the op also pins the version it writes (its
	// Pin), which needs what a pin needs (pinNeeds); nil for an op that
	// cannot pin.
	pins func(o O) bool
	// apply makes the op's change and emits its events.
	apply func(ctx context.Context, x *exec, o O) (workspace.OpResult, error)
	// operator marks an op that acts on other actors' holdings (stopping
	// an agent): with no policy, a bound principal needs the admin role
	// for it (exec.ungoverned).
	operator bool
}

// opSpec is an opEntry with the op's type erased, as the table keeps it.
type opSpec struct {
	check        func(h *handle, op workspace.Op) error
	reserved     func(op workspace.Op) string
	hint         func(op workspace.Op) driver.ReadHint
	message      func(op workspace.Op) string
	action       func(ctx context.Context, x *exec, w who, op workspace.Op, first bool) (policy.Action, string, workspace.Subject, error)
	policySource func(ctx context.Context, x *exec, op workspace.Op) ([]byte, bool, error)
	pins         func(op workspace.Op) bool
	apply        func(ctx context.Context, x *exec, op workspace.Op) (workspace.OpResult, error)
	operator     bool
}

// declare puts e in the table. Each erased function asserts its op's type,
// which the table's key guarantees.
func declare[O workspace.Op](e opEntry[O]) {
	t := reflect.TypeFor[O]()
	if _, dup := opTable[t]; dup || e.check == nil || e.action == nil || e.apply == nil {
		panic(fmt.Sprintf("driver: op %v declared twice or without check, action and apply", t))
	}
	s := opSpec{
		check: func(h *handle, op workspace.Op) error { return e.check(h, op.(O)) },
		hint:  func(workspace.Op) driver.ReadHint { return driver.ReadHint{} },
		message: func(workspace.Op) string {
			return ""
		},
		reserved: func(workspace.Op) string { return "" },
		pins:     func(workspace.Op) bool { return false },
		action: func(ctx context.Context, x *exec, w who, op workspace.Op, first bool) (policy.Action, string, workspace.Subject, error) {
			return e.action(ctx, x, w, op.(O), first)
		},
		apply: func(ctx context.Context, x *exec, op workspace.Op) (workspace.OpResult, error) {
			return e.apply(ctx, x, op.(O))
		},
		operator: e.operator,
	}
	if e.hint != nil {
		s.hint = func(op workspace.Op) driver.ReadHint { return e.hint(op.(O)) }
	}
	if e.message != nil {
		s.message = func(op workspace.Op) string { return e.message(op.(O)) }
	}
	if e.reserved != nil {
		s.reserved = func(op workspace.Op) string { return e.reserved(op.(O)) }
	}
	if e.pins != nil {
		s.pins = func(op workspace.Op) bool { return e.pins(op.(O)) }
	}
	if e.policySource != nil {
		s.policySource = func(ctx context.Context, x *exec, op workspace.Op) ([]byte, bool, error) {
			return e.policySource(ctx, x, op.(O))
		}
	}
	opTable[t] = s
}

// specOf returns op's table entry; an op the table does not know (a
// pointer to an op among them) is ErrInvalid.
func specOf(op workspace.Op) (opSpec, error) {
	t := reflect.TypeOf(op)
	if s, ok := opTable[t]; ok {
		return s, nil
	}
	if t != nil && t.Kind() == reflect.Pointer {
		if _, ok := opTable[t.Elem()]; ok {
			return opSpec{}, invalid("op", "%v is a pointer: pass ops by value (%v)", t, t.Elem())
		}
	}
	return opSpec{}, invalid("op", "unknown op type %T", op)
}
