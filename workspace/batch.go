package workspace

import (
	"fmt"
	"reflect"
	"time"
)

// Batch is a set of writes applied all or nothing by Workspace.Commit. Its
// events get consecutive seqs. Each op keeps its own conditions.
type Batch struct {
	Actor string
	// IdempotencyKey, when set, makes a retried batch return the first
	// result and write nothing new. Keys are per actor; the same key with
	// different ops is ErrInvalid.
	IdempotencyKey string
	Ops            []Op
}

// Op is one write in a batch: one of the *Op types of this package, by
// value (a pointer to one is ErrInvalid).
type Op interface{ opName() string }

// Cond carries an op's optional conditions and message.
type Cond struct {
	IfVersion int64  // 0: unconditional; n: ErrConflict unless the stored version is n
	Fence     int64  // 0: none; t: ErrStaleFence if the record's lock issued a token newer than t
	Message   string // kept in the event log
}

// CreateArtifactOp creates an artifact.
type CreateArtifactOp struct {
	Artifact NewArtifact
	Message  string // kept in the event log
	// Fence, when set, is the token of the writer's lease on the artifact's
	// resource (ArtifactResource): the create fails with ErrStaleFence if
	// that lock has issued or revoked a newer token, as an update's does,
	// so an agent stopped or force-released cannot create the file late.
	Fence int64
	// Pin also pins the version the op writes (as Workspace.Pin, recorded as
	// its own note.put event), in the same batch. It needs what
	// Workspace.Pin needs (note.write on the pin kind); a batch refused it
	// writes nothing. Only the system's own batches (a change set's
	// promotion, whose pins are its bookkeeping) pin with no pin right of
	// their actor. Not carried over HTTP.
	Pin bool
}

// UpdateArtifactOp writes a new version of an artifact.
type UpdateArtifactOp struct {
	Ref    ArtifactRef
	Change ArtifactChange
	Cond
	Pin bool // as CreateArtifactOp's
}

// DeleteArtifactOp deletes an artifact.
type DeleteArtifactOp struct {
	Ref ArtifactRef
	Cond
}

// RollbackArtifactOp writes a new head from an old version.
type RollbackArtifactOp struct {
	Ref ArtifactRef
	To  int64
	Cond
}

// CreateTaskOp creates a task.
type CreateTaskOp struct {
	Task    NewTask
	Message string // kept in the event log
}

// UpdateTaskOp changes a task.
type UpdateTaskOp struct {
	ID     string
	Change TaskChange
	Cond
}

// PutNoteOp creates or updates a note.
type PutNoteOp struct {
	Note NotePut
	Cond
}

// DeleteNoteOp deletes a note.
type DeleteNoteOp struct {
	Kind, Key string
	Cond
}

// ReleaseLockOp releases a lease held by the batch's actor with Token.
type ReleaseLockOp struct {
	Resource string
	Token    int64
	Message  string
}

// StopActorOp ends everything Actor holds, for an operator stopping an
// agent that has gone wrong: every live lease Actor owns is force-released
// with its fencing token revoked (as Locks.ForceRelease), and every task
// Actor has claimed goes back to pending, each recorded as an event
// (lock.forced, task.released) by the batch's actor. Actor's later fenced
// writes fail with ErrStaleFence, and its Heartbeat, Complete and Fail of
// the returned tasks with ErrLockLost or ErrInvalid. It needs the admin
// "tokens" right: it is the engine's half of revoking an actor.
type StopActorOp struct {
	Actor   string
	Message string
}

func (CreateArtifactOp) opName() string   { return "create artifact" }
func (UpdateArtifactOp) opName() string   { return "update artifact" }
func (DeleteArtifactOp) opName() string   { return "delete artifact" }
func (RollbackArtifactOp) opName() string { return "rollback artifact" }
func (CreateTaskOp) opName() string       { return "create task" }
func (UpdateTaskOp) opName() string       { return "update task" }
func (PutNoteOp) opName() string          { return "put note" }
func (DeleteNoteOp) opName() string       { return "delete note" }
func (ReleaseLockOp) opName() string      { return "release lock" }
func (StopActorOp) opName() string        { return "stop actor" }

// OpResult is what one op produced: the record written (metadata only for
// artifacts), or nothing for deletes and releases.
type OpResult struct {
	Artifact *Artifact `json:"artifact,omitempty"`
	Task     *Task     `json:"task,omitempty"`
	Note     *Note     `json:"note,omitempty"`
	Msg      *Msg      `json:"message,omitempty"`
}

// BatchResult is what Commit returns: one result per op, in order, and the
// events the batch appended.
type BatchResult struct {
	Results []OpResult `json:"results"`
	Events  []Event    `json:"events"`
	// Replayed is set when the result is the stored one of an earlier call
	// with the same idempotency key: nothing was written this time.
	Replayed bool `json:"replayed"`
}

// BatchError says which op of a batch failed; it unwraps to that op's error,
// so errors.Is(err, ErrConflict) works on a batch's error too.
type BatchError struct {
	Index int
	Op    Op
	Err   error
}

// Error describes the failure in one line.
func (e *BatchError) Error() string {
	return fmt.Sprintf("batch op %d (%s): %v", e.Index, opName(e.Op), e.Err)
}

// Unwrap returns the op's error.
func (e *BatchError) Unwrap() error { return e.Err }

// opName names op for errors; a nil op or nil pointer to one by its type.
func opName(op Op) string {
	if v := reflect.ValueOf(op); !v.IsValid() || (v.Kind() == reflect.Pointer && v.IsNil()) {
		return fmt.Sprintf("%T", op)
	}
	return op.opName()
}

// Limits and defaults every handle applies.
const (
	// DefaultDSN is the store used when nothing else is configured.
	DefaultDSN             = "sqlite:.agentspace/workspace.db"
	DefaultMaxArtifactSize = 32 << 20
	DefaultPollInterval    = 50 * time.Millisecond
	DefaultGroupWait       = 2 * time.Millisecond
	DefaultPolicyRecheck   = 100 * time.Millisecond
	DefaultIdempotencyTTL  = 24 * time.Hour
	DefaultClaimLease      = 5 * time.Minute
	DefaultHeartbeat       = 5 * time.Second
	MaxTTL                 = 7 * 24 * time.Hour
	MinTTL                 = time.Millisecond
	MaxOpsPerBatch         = 1000
	MaxNameLen             = 1024
	MaxActorLen            = 256
	MaxKindLen             = 64
	MaxKeyLen              = 512
	MaxAreas               = 256 // areas one task may declare
	MaxTitleLen            = 4096
	MaxTextLen             = 1 << 20 // task descriptions, note bodies, messages
	MaxLabels              = 64
	MaxLabelLen            = 256
	MaxDependsOn           = 256
)
