package wire

import "github.com/agentspace/agentspace/workspace"

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

// OpBody is one op of a batch. Op says which (its code in the op table,
// ops.go; the enum below lists the same codes, TestOpCodesAreTheEnum);
// each op reads the fields
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
