package wire

import (
	"encoding/json"
	"time"

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
	OpSendMessage      = "send_message"
	OpAckMessage       = "ack_message"
	OpPauseActor       = "pause_actor"
	OpResumeActor      = "resume_actor"
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
	Op string `json:"op" enum:"create_artifact,update_artifact,delete_artifact,rollback_artifact,create_task,update_task,put_note,delete_note,release_lock,stop_actor,send_message,ack_message,pause_actor,resume_actor"`

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
	Actor       string                `json:"actor,omitempty"` // the actor a stop_actor, pause_actor or resume_actor op names
	// Msg is a send_message op's message.
	Msg *MessageBody `json:"msg,omitempty"`
	// Reply is an ack_message op's reply (its ID is ID).
	Reply string `json:"reply,omitempty"`
	// AckTimeout is a pause_actor op's time for the agent to ack its
	// pause, as a Go duration ("30s"; empty: no deadline).
	AckTimeout string `json:"ack_timeout,omitempty"`
	Content
}

// MessageBody is a message to send: the body of POST /v1/messages and a
// send_message op's msg. Its fields are workspace.NewMsg's.
type MessageBody struct {
	To          []string        `json:"to"`
	Each        bool            `json:"each,omitempty"`
	ReplyTo     string          `json:"reply_to,omitempty"`
	Type        string          `json:"type,omitempty"`
	Severity    string          `json:"severity,omitempty"`
	Subject     string          `json:"subject,omitempty"`
	Body        string          `json:"body"`
	Data        json.RawMessage `json:"data,omitempty" doc:"Structured data: a JSON object."`
	RequiresAck bool            `json:"requires_ack,omitempty"`
	Deadline    time.Time       `json:"deadline,omitzero" doc:"When the ack is due (needs requires_ack); past it unacknowledged, the message is escalated once."`
	EscalateTo  []string        `json:"escalate_to,omitempty" doc:"Whom to escalate to (default role:admin)."`
}

// MessageBodyOf is m as a MessageBody. Data that is not JSON at all goes
// as a JSON string, which the engine refuses as it refuses the bytes in
// process (data must be a JSON object): the rule stays the engine's.
func MessageBodyOf(m workspace.NewMsg) MessageBody {
	data := m.Data
	if data != nil && !json.Valid(data) {
		data, _ = json.Marshal(string(data))
	}
	return MessageBody{To: m.To, Each: m.Each, ReplyTo: m.ReplyTo, Type: m.Type, Severity: m.Severity, Subject: m.Subject,
		Body: m.Body, Data: data, RequiresAck: m.RequiresAck, Deadline: m.Deadline, EscalateTo: m.EscalateTo}
}

// NewMsg is b as the workspace's input.
func (b MessageBody) NewMsg() workspace.NewMsg {
	return workspace.NewMsg{To: b.To, Each: b.Each, ReplyTo: b.ReplyTo, Type: b.Type, Severity: b.Severity, Subject: b.Subject,
		Body: b.Body, Data: b.Data, RequiresAck: b.RequiresAck, Deadline: b.Deadline, EscalateTo: b.EscalateTo}
}
