package wire

import (
	"fmt"

	"github.com/agentspace/agentspace/workspace"
)

// Batch op codes, the "op" of an OpBody.
const (
	OpCreateArtifact   = "create_artifact"
	OpUpdateArtifact   = "update_artifact"
	OpDeleteArtifact   = "delete_artifact"
	OpRollbackArtifact = "rollback_artifact"
	OpCreateTask       = "create_task"
	OpUpdateTask       = "update_task"
	OpPutNote          = "put_note"
	OpDeleteNote       = "delete_note"
	OpReleaseLock      = "release_lock"
	OpStopActor        = "stop_actor"
)

// BatchBody is a batch: writes applied all or nothing (workspace.Batch).
type BatchBody struct {
	Actor          string   `json:"actor,omitempty"`
	IdempotencyKey string   `json:"idempotency_key,omitempty"`
	Ops            []OpBody `json:"ops" maxItems:"1000"`
}

// OpBody is one op of a batch. Op says which; each op reads the fields
// of its workspace op type (workspace.CreateArtifactOp, ...) under their
// snake_case names. Kind and title serve both artifacts and notes (and
// tasks for title); id names an artifact (instead of name) or a task.
type OpBody struct {
	Op string `json:"op" enum:"create_artifact,update_artifact,delete_artifact,rollback_artifact,create_task,update_task,put_note,delete_note,release_lock,stop_actor"`

	Name        string                `json:"name,omitempty"`
	ID          string                `json:"id,omitempty"`
	Kind        *string               `json:"kind,omitempty"`
	Key         string                `json:"key,omitempty"`
	ContentType *string               `json:"content_type,omitempty"`
	Owner       *string               `json:"owner,omitempty"`
	TaskID      *string               `json:"task_id,omitempty"`
	Labels      map[string]string     `json:"labels,omitzero"`
	To          int64                 `json:"to,omitempty"`
	Title       *string               `json:"title,omitempty"`
	Description *string               `json:"description,omitempty"`
	ParentID    string                `json:"parent_id,omitempty"`
	DependsOn   []string              `json:"depends_on,omitempty"`
	Areas       []string              `json:"areas,omitempty"`
	Priority    *int                  `json:"priority,omitempty"`
	Assignee    *string               `json:"assignee,omitempty"`
	Status      *workspace.TaskStatus `json:"status,omitempty" enum:"pending,in_progress,blocked,done,failed,cancelled"`
	Result      *workspace.TaskResult `json:"result,omitempty"`
	Body        string                `json:"body,omitempty"`
	Resource    string                `json:"resource,omitempty"`
	Token       int64                 `json:"token,omitempty"`
	IfVersion   int64                 `json:"if_version,omitempty"`
	Fence       int64                 `json:"fence,omitempty"`
	Message     string                `json:"message,omitempty"`
	Actor       string                `json:"actor,omitempty"` // the actor a stop_actor op stops
	Content
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func (o OpBody) ref() workspace.ArtifactRef {
	return workspace.ArtifactRef{ID: o.ID, Name: o.Name}
}

// WorkspaceOp returns the op the body stands for; an unknown op code or a
// bad content encoding is an *InvalidError naming it.
func (o OpBody) WorkspaceOp() (workspace.Op, error) {
	cond := workspace.Cond{IfVersion: o.IfVersion, Fence: o.Fence, Message: o.Message}
	switch o.Op {
	case OpCreateArtifact:
		c, err := o.Bytes()
		return workspace.CreateArtifactOp{Message: o.Message, Artifact: workspace.NewArtifact{Name: o.Name, Kind: deref(o.Kind), Content: c, ContentType: deref(o.ContentType), Labels: o.Labels, TaskID: deref(o.TaskID)}}, err
	case OpUpdateArtifact:
		c, err := o.Bytes()
		return workspace.UpdateArtifactOp{Ref: o.ref(), Cond: cond, Change: workspace.ArtifactChange{Content: c, Kind: o.Kind, ContentType: o.ContentType, Owner: o.Owner, TaskID: o.TaskID, Labels: o.Labels}}, err
	case OpDeleteArtifact:
		return workspace.DeleteArtifactOp{Ref: o.ref(), Cond: cond}, nil
	case OpRollbackArtifact:
		return workspace.RollbackArtifactOp{Ref: o.ref(), To: o.To, Cond: cond}, nil
	case OpCreateTask:
		return workspace.CreateTaskOp{Message: o.Message, Task: workspace.NewTask{Title: deref(o.Title), Description: deref(o.Description), ParentID: o.ParentID, DependsOn: o.DependsOn, Areas: o.Areas, Priority: deref(o.Priority), Labels: o.Labels, Assignee: deref(o.Assignee)}}, nil
	case OpUpdateTask:
		return workspace.UpdateTaskOp{ID: o.ID, Cond: cond, Change: workspace.TaskChange{Status: o.Status, Title: o.Title, Description: o.Description, Assignee: o.Assignee, Priority: o.Priority, Labels: o.Labels, Result: o.Result}}, nil
	case OpPutNote:
		return workspace.PutNoteOp{Cond: cond, Note: workspace.NotePut{Kind: deref(o.Kind), Key: o.Key, Title: deref(o.Title), Body: o.Body}}, nil
	case OpDeleteNote:
		return workspace.DeleteNoteOp{Cond: cond, Kind: deref(o.Kind), Key: o.Key}, nil
	case OpReleaseLock:
		return workspace.ReleaseLockOp{Resource: o.Resource, Token: o.Token, Message: o.Message}, nil
	case OpStopActor:
		return workspace.StopActorOp{Actor: o.Actor, Message: o.Message}, nil
	}
	return nil, &workspace.InvalidError{Field: "op", Reason: fmt.Sprintf("%q is not a batch op", truncate(o.Op, 32))}
}
