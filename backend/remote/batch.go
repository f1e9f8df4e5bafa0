package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// Commit sends the batch to /v1/batch. A failed op's error is a
// *workspace.BatchError whose Op is the caller's own b.Ops[Index].
func (c *Client) Commit(ctx context.Context, b workspace.Batch) (workspace.BatchResult, error) {
	var out workspace.BatchResult
	body := wire.BatchBody{Actor: b.Actor, IdempotencyKey: b.IdempotencyKey, Ops: make([]wire.OpBody, 0, len(b.Ops))}
	for i, op := range b.Ops {
		ob, err := c.opBody(op)
		if err != nil {
			return out, &workspace.BatchError{Index: i, Op: op, Err: err}
		}
		body.Ops = append(body.Ops, ob)
	}
	err := c.callRetry(ctx, http.MethodPost, "/v1/batch", nil, body, &out, b.IdempotencyKey != "")
	var be *workspace.BatchError
	if errors.As(err, &be) && be.Index >= 0 && be.Index < len(b.Ops) {
		be.Op = b.Ops[be.Index]
	}
	return out, err
}

// opBody puts one op on the wire. A nil op and a pointer to an op cannot be
// sent: they are refused here as the engine refuses them (ops are values).
// errPinOverHTTP refuses an op's Pin, which the wire does not carry:
// dropping it would lose the pin silently.
var errPinOverHTTP = &workspace.InvalidError{Field: "pin", Reason: "is not carried over HTTP: pins are reserved records, written against the store's own DSN (docs/policy.md, Reserved records)"}

func (c *Client) opBody(op workspace.Op) (wire.OpBody, error) {
	if op == nil {
		return wire.OpBody{}, &workspace.InvalidError{Field: "op", Reason: "is nil"}
	}
	if t := reflect.TypeOf(op); t.Kind() == reflect.Pointer {
		return wire.OpBody{}, &workspace.InvalidError{Field: "op", Reason: fmt.Sprintf("%v is a pointer: pass ops by value (%v)", t, t.Elem())}
	}
	str := func(s string) *string { return &s }
	cond := func(o *wire.OpBody, cd workspace.Cond) {
		o.IfVersion, o.Fence, o.Message = cd.IfVersion, cd.Fence, cd.Message
	}
	ref := func(o *wire.OpBody, r workspace.ArtifactRef) error {
		if r.Version != 0 {
			return &workspace.InvalidError{Field: "ref.version", Reason: "a write names the head, not a version"}
		}
		o.ID, o.Name = r.ID, r.Name
		return nil
	}
	switch o := op.(type) {
	case workspace.CreateArtifactOp:
		if o.Pin {
			return wire.OpBody{}, errPinOverHTTP
		}
		if err := c.checkContent(o.Artifact.Content); err != nil {
			return wire.OpBody{}, err
		}
		a := o.Artifact
		return wire.OpBody{Op: wire.OpCreateArtifact, Message: o.Message, Name: a.Name, Kind: str(a.Kind), ContentType: str(a.ContentType), Labels: a.Labels, TaskID: str(a.TaskID), Content: wire.ContentOf(a.Content)}, nil
	case workspace.UpdateArtifactOp:
		if o.Pin {
			return wire.OpBody{}, errPinOverHTTP
		}
		if err := c.checkContent(o.Change.Content); err != nil {
			return wire.OpBody{}, err
		}
		ch := o.Change
		b := wire.OpBody{Op: wire.OpUpdateArtifact, Kind: ch.Kind, ContentType: ch.ContentType, Owner: ch.Owner, TaskID: ch.TaskID, Labels: ch.Labels, Content: wire.ContentOf(ch.Content)}
		cond(&b, o.Cond)
		return b, ref(&b, o.Ref)
	case workspace.DeleteArtifactOp:
		b := wire.OpBody{Op: wire.OpDeleteArtifact}
		cond(&b, o.Cond)
		return b, ref(&b, o.Ref)
	case workspace.RollbackArtifactOp:
		b := wire.OpBody{Op: wire.OpRollbackArtifact, To: o.To}
		cond(&b, o.Cond)
		return b, ref(&b, o.Ref)
	case workspace.CreateTaskOp:
		t := o.Task
		return wire.OpBody{Op: wire.OpCreateTask, Message: o.Message, Title: str(t.Title), Description: str(t.Description), ParentID: t.ParentID, DependsOn: t.DependsOn, Areas: t.Areas, Priority: &t.Priority, Labels: t.Labels, Assignee: str(t.Assignee)}, nil
	case workspace.UpdateTaskOp:
		ch := o.Change
		b := wire.OpBody{Op: wire.OpUpdateTask, ID: o.ID, Status: ch.Status, Title: ch.Title, Description: ch.Description, Assignee: ch.Assignee, Priority: ch.Priority, Labels: ch.Labels, Result: ch.Result}
		cond(&b, o.Cond)
		return b, nil
	case workspace.PutNoteOp:
		b := wire.OpBody{Op: wire.OpPutNote, Kind: str(o.Note.Kind), Key: o.Note.Key, Title: str(o.Note.Title), Body: o.Note.Body}
		cond(&b, o.Cond)
		return b, nil
	case workspace.DeleteNoteOp:
		b := wire.OpBody{Op: wire.OpDeleteNote, Kind: str(o.Kind), Key: o.Key}
		cond(&b, o.Cond)
		return b, nil
	case workspace.ReleaseLockOp:
		return wire.OpBody{Op: wire.OpReleaseLock, Resource: o.Resource, Token: o.Token, Message: o.Message}, nil
	case workspace.StopActorOp:
		return wire.OpBody{Op: wire.OpStopActor, Actor: o.Actor, Message: o.Message}, nil
	}
	return wire.OpBody{}, &workspace.InvalidError{Field: "op", Reason: fmt.Sprintf("%T is not a batch op", op)}
}
