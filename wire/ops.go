package wire

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// The op table: each batch op's code, and how its value goes into an OpBody
// and comes back out, declared once per op type. The remote client encodes
// with EncodeOp and the server decodes with OpBody.WorkspaceOp, both through
// this table. Adding an op is its entry in the engine's table
// (workspace/engine/ops.go), one entry here (and its code in OpBody's enum)
// and its conformance case; TestEveryOpTypeHasAWireEntry fails while an op
// type of package workspace has no entry here.
//
// Invariant: decoding what an entry encodes gives back the op it was given
// (TestEveryOpSurvivesTheWire fills every field), so the server applies the
// op the client's caller built.

// opCodec is one op type's entry.
type opCodec struct {
	code   string
	typ    reflect.Type
	encode func(op workspace.Op, check func([]byte) error) (OpBody, error)
	decode func(b OpBody) (workspace.Op, error)
}

var (
	opsByCode = map[string]*opCodec{}
	opsByType = map[reflect.Type]*opCodec{}
)

// declare enters op type O under code: enc puts an O into a body (its Op
// field is set here), calling check on any content it carries before
// encoding it; dec takes it back out.
func declare[O workspace.Op](code string, enc func(o O, check func([]byte) error) (OpBody, error), dec func(b OpBody) (O, error)) {
	t := reflect.TypeFor[O]()
	c := &opCodec{
		code: code,
		typ:  t,
		encode: func(op workspace.Op, check func([]byte) error) (OpBody, error) {
			b, err := enc(op.(O), check)
			b.Op = code
			return b, err
		},
		decode: func(b OpBody) (workspace.Op, error) { return dec(b) },
	}
	if opsByCode[code] != nil || opsByType[t] != nil {
		panic("wire: op declared twice: " + code)
	}
	opsByCode[code], opsByType[t] = c, c
}

func init() {
	declare(OpCreateArtifact,
		func(o workspace.CreateArtifactOp, check func([]byte) error) (OpBody, error) {
			if o.Pin {
				return OpBody{}, errPinOverHTTP
			}
			a := o.Artifact
			if err := check(a.Content); err != nil {
				return OpBody{}, err
			}
			return OpBody{Message: o.Message, Fence: o.Fence, Name: a.Name, Kind: &a.Kind, ContentType: &a.ContentType, Labels: a.Labels, TaskID: &a.TaskID, Content: ContentOf(a.Content)}, nil
		},
		func(b OpBody) (workspace.CreateArtifactOp, error) {
			c, err := b.Bytes()
			return workspace.CreateArtifactOp{Message: b.Message, Fence: b.Fence, Artifact: workspace.NewArtifact{Name: b.Name, Kind: deref(b.Kind), Content: c, ContentType: deref(b.ContentType), Labels: b.Labels, TaskID: deref(b.TaskID)}}, err
		})
	declare(OpUpdateArtifact,
		func(o workspace.UpdateArtifactOp, check func([]byte) error) (OpBody, error) {
			if o.Pin {
				return OpBody{}, errPinOverHTTP
			}
			ch := o.Change
			if err := check(ch.Content); err != nil {
				return OpBody{}, err
			}
			b := OpBody{Kind: ch.Kind, ContentType: ch.ContentType, Owner: ch.Owner, TaskID: ch.TaskID, Labels: ch.Labels, Content: ContentOf(ch.Content)}
			b.setCond(o.Cond)
			return b, b.setRef(o.Ref)
		},
		func(b OpBody) (workspace.UpdateArtifactOp, error) {
			c, err := b.Bytes()
			return workspace.UpdateArtifactOp{Ref: b.ref(), Cond: b.cond(), Change: workspace.ArtifactChange{Content: c, Kind: b.Kind, ContentType: b.ContentType, Owner: b.Owner, TaskID: b.TaskID, Labels: b.Labels}}, err
		})
	declare(OpDeleteArtifact,
		func(o workspace.DeleteArtifactOp, _ func([]byte) error) (OpBody, error) {
			var b OpBody
			b.setCond(o.Cond)
			return b, b.setRef(o.Ref)
		},
		func(b OpBody) (workspace.DeleteArtifactOp, error) {
			return workspace.DeleteArtifactOp{Ref: b.ref(), Cond: b.cond()}, nil
		})
	declare(OpRollbackArtifact,
		func(o workspace.RollbackArtifactOp, _ func([]byte) error) (OpBody, error) {
			b := OpBody{To: o.To}
			b.setCond(o.Cond)
			return b, b.setRef(o.Ref)
		},
		func(b OpBody) (workspace.RollbackArtifactOp, error) {
			return workspace.RollbackArtifactOp{Ref: b.ref(), To: b.To, Cond: b.cond()}, nil
		})
	declare(OpCreateTask,
		func(o workspace.CreateTaskOp, _ func([]byte) error) (OpBody, error) {
			t := o.Task
			return OpBody{Message: o.Message, Title: &t.Title, Description: &t.Description, ParentID: t.ParentID, DependsOn: t.DependsOn, Areas: t.Areas, Priority: &t.Priority, Labels: t.Labels, Assignee: &t.Assignee}, nil
		},
		func(b OpBody) (workspace.CreateTaskOp, error) {
			return workspace.CreateTaskOp{Message: b.Message, Task: workspace.NewTask{Title: deref(b.Title), Description: deref(b.Description), ParentID: b.ParentID, DependsOn: b.DependsOn, Areas: b.Areas, Priority: deref(b.Priority), Labels: b.Labels, Assignee: deref(b.Assignee)}}, nil
		})
	declare(OpUpdateTask,
		func(o workspace.UpdateTaskOp, _ func([]byte) error) (OpBody, error) {
			ch := o.Change
			b := OpBody{ID: o.ID, Status: ch.Status, Title: ch.Title, Description: ch.Description, Assignee: ch.Assignee, Priority: ch.Priority, Labels: ch.Labels, Result: ch.Result}
			b.setCond(o.Cond)
			return b, nil
		},
		func(b OpBody) (workspace.UpdateTaskOp, error) {
			return workspace.UpdateTaskOp{ID: b.ID, Cond: b.cond(), Change: workspace.TaskChange{Status: b.Status, Title: b.Title, Description: b.Description, Assignee: b.Assignee, Priority: b.Priority, Labels: b.Labels, Result: b.Result}}, nil
		})
	declare(OpPutNote,
		func(o workspace.PutNoteOp, _ func([]byte) error) (OpBody, error) {
			n := o.Note
			b := OpBody{Kind: &n.Kind, Key: n.Key, Title: &n.Title, Body: n.Body}
			b.setCond(o.Cond)
			return b, nil
		},
		func(b OpBody) (workspace.PutNoteOp, error) {
			return workspace.PutNoteOp{Cond: b.cond(), Note: workspace.NotePut{Kind: deref(b.Kind), Key: b.Key, Title: deref(b.Title), Body: b.Body}}, nil
		})
	declare(OpDeleteNote,
		func(o workspace.DeleteNoteOp, _ func([]byte) error) (OpBody, error) {
			b := OpBody{Kind: &o.Kind, Key: o.Key}
			b.setCond(o.Cond)
			return b, nil
		},
		func(b OpBody) (workspace.DeleteNoteOp, error) {
			return workspace.DeleteNoteOp{Cond: b.cond(), Kind: deref(b.Kind), Key: b.Key}, nil
		})
	declare(OpReleaseLock,
		func(o workspace.ReleaseLockOp, _ func([]byte) error) (OpBody, error) {
			return OpBody{Resource: o.Resource, Token: o.Token, Message: o.Message}, nil
		},
		func(b OpBody) (workspace.ReleaseLockOp, error) {
			return workspace.ReleaseLockOp{Resource: b.Resource, Token: b.Token, Message: b.Message}, nil
		})
	declare(OpStopActor,
		func(o workspace.StopActorOp, _ func([]byte) error) (OpBody, error) {
			return OpBody{Actor: o.Actor, Message: o.Message}, nil
		},
		func(b OpBody) (workspace.StopActorOp, error) {
			return workspace.StopActorOp{Actor: b.Actor, Message: b.Message}, nil
		})
	declare(OpSendMessage,
		func(o workspace.SendMessageOp, _ func([]byte) error) (OpBody, error) {
			m := MessageBodyOf(o.Message)
			return OpBody{Msg: &m}, nil
		},
		func(b OpBody) (workspace.SendMessageOp, error) {
			if b.Msg == nil {
				return workspace.SendMessageOp{}, &workspace.InvalidError{Field: "msg", Reason: "a send_message op needs its msg"}
			}
			return workspace.SendMessageOp{Message: b.Msg.NewMsg()}, nil
		})
	declare(OpAckMessage,
		func(o workspace.AckMessageOp, _ func([]byte) error) (OpBody, error) {
			return OpBody{ID: o.ID, Reply: o.Reply}, nil
		},
		func(b OpBody) (workspace.AckMessageOp, error) {
			return workspace.AckMessageOp{ID: b.ID, Reply: b.Reply}, nil
		})
	declare(OpPauseActor,
		func(o workspace.PauseActorOp, _ func([]byte) error) (OpBody, error) {
			b := OpBody{Actor: o.Actor, Message: o.Message}
			if o.AckTimeout != 0 {
				b.AckTimeout = o.AckTimeout.String()
			}
			return b, nil
		},
		func(b OpBody) (workspace.PauseActorOp, error) {
			o := workspace.PauseActorOp{Actor: b.Actor, Message: b.Message}
			if b.AckTimeout != "" {
				d, err := time.ParseDuration(b.AckTimeout)
				if err != nil {
					return o, &workspace.InvalidError{Field: "ack_timeout", Reason: fmt.Sprintf("%q is not a duration (e.g. 30s, 5m)", b.AckTimeout)}
				}
				o.AckTimeout = d
			}
			return o, nil
		})
	declare(OpResumeActor,
		func(o workspace.ResumeActorOp, _ func([]byte) error) (OpBody, error) {
			return OpBody{Actor: o.Actor, Message: o.Message}, nil
		},
		func(b OpBody) (workspace.ResumeActorOp, error) {
			return workspace.ResumeActorOp{Actor: b.Actor, Message: b.Message}, nil
		})
}

// OpCodes returns every batch op code the table holds, sorted.
func OpCodes() []string {
	out := make([]string, 0, len(opsByCode))
	for code := range opsByCode {
		out = append(out, code)
	}
	slices.Sort(out)
	return out
}

// errPinOverHTTP refuses an op's Pin, which the wire does not carry:
// dropping it would lose the pin silently. Pins are reserved records, and
// a reserved record's grant does not cross a network.
var errPinOverHTTP = &workspace.InvalidError{Field: "pin", Reason: "is not carried over HTTP: pins are reserved records, written against the store's own DSN (docs/policy.md, Reserved records)"}

// EncodeOp puts one op on the wire. check, when not nil, is called on the
// content an op carries before it is encoded (the remote client refuses
// content over its limit there). A nil op, a pointer to an op (ops are
// values, as the engine takes them) and a type outside the table are an
// *InvalidError naming op.
func EncodeOp(op workspace.Op, check func([]byte) error) (OpBody, error) {
	if op == nil {
		return OpBody{}, &workspace.InvalidError{Field: "op", Reason: "is nil"}
	}
	t := reflect.TypeOf(op)
	c := opsByType[t]
	if c == nil {
		if t.Kind() == reflect.Pointer {
			return OpBody{}, &workspace.InvalidError{Field: "op", Reason: fmt.Sprintf("%v is a pointer: pass ops by value (%v)", t, t.Elem())}
		}
		return OpBody{}, &workspace.InvalidError{Field: "op", Reason: fmt.Sprintf("%T is not a batch op", op)}
	}
	if check == nil {
		check = func([]byte) error { return nil }
	}
	return c.encode(op, check)
}

// WorkspaceOp returns the op the body stands for; an unknown op code or a
// bad content encoding is an *InvalidError naming it (with a bad
// encoding, the op is returned too, for the error to name).
func (o OpBody) WorkspaceOp() (workspace.Op, error) {
	if c := opsByCode[o.Op]; c != nil {
		return c.decode(o)
	}
	return nil, &workspace.InvalidError{Field: "op", Reason: fmt.Sprintf("%q is not a batch op", truncate(o.Op, 32))}
}

func (o OpBody) ref() workspace.ArtifactRef { return workspace.ArtifactRef{ID: o.ID, Name: o.Name} }

func (o OpBody) cond() workspace.Cond {
	return workspace.Cond{IfVersion: o.IfVersion, Fence: o.Fence, Message: o.Message}
}

func (o *OpBody) setCond(c workspace.Cond) {
	o.IfVersion, o.Fence, o.Message = c.IfVersion, c.Fence, c.Message
}

// setRef names the artifact a write op acts on: its head, never a version.
func (o *OpBody) setRef(r workspace.ArtifactRef) error {
	if r.Version != 0 {
		return &workspace.InvalidError{Field: "ref.version", Reason: "a write names the head, not a version"}
	}
	o.ID, o.Name = r.ID, r.Name
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
