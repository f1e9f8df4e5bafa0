package workspace

import (
	"slices"
	"time"
)

// Write says who makes a single-record change and under what conditions.
type Write struct {
	// Actor is the agent's id: required, recorded on the record and in the event log.
	Actor string
	// IfVersion, when non-zero, makes the write fail with a *ConflictError
	// unless the record's stored version is exactly IfVersion.
	IfVersion int64
	// Fence, when non-zero, makes the write fail with ErrStaleFence if the
	// record's lock has issued a token newer than Fence.
	Fence int64
	// Message is an optional note on why, kept in the event log.
	Message string
	// IdempotencyKey, when set, makes a retried write return the first result
	// and write nothing new, for as long as the key is kept. Keys are per
	// actor; the same key with a different request is ErrInvalid.
	IdempotencyKey string
}

// Subject names the record an event is about.
type Subject struct {
	Kind string `json:"kind"` // "artifact", "task", "note", "lock"
	ID   string `json:"id"`   // artifact or task id; "KIND/KEY" for notes; the resource for locks
	Name string `json:"name"` // artifact name, task title, note key, lock resource
}

func (s Subject) label() string {
	if s.Name != "" {
		return "\"" + s.Name + "\""
	}
	return s.ID
}

// Artifact is one version of a piece of versioned content: a plan, code, a
// review, a test result. Metadata-only reads (List, Versions) leave Content nil.
//
// In JSON, Content is the "content" field: the text itself when it is
// UTF-8 without NUL bytes ("content_encoding": "utf-8"), else base64
// ("content_encoding": "base64"); both are absent when Content is nil.
type Artifact struct {
	ID          string            `json:"id"`           // UUIDv7, fixed for the artifact's life
	Name        string            `json:"name"`         // path-like key, unique among live artifacts
	Kind        string            `json:"kind"`         // design, code, review, test, plan, output, or any lower-case word
	Owner       string            `json:"owner"`        // the actor that created it, unless changed
	Version     int64             `json:"version"`      // 1 on create, +1 on every change
	Content     []byte            `json:"-"`            // the bytes of this version; JSON: see above
	ContentType string            `json:"content_type"` // a media type, e.g. text/markdown
	SHA256      string            `json:"sha256"`       // hex SHA-256 of Content
	Size        int64             `json:"size"`         // len(Content)
	Labels      map[string]string `json:"labels"`       // free-form key/value labels
	TaskID      string            `json:"task_id"`      // optional task this artifact belongs to
	CreatedAt   time.Time         `json:"created_at,omitzero"`
	CreatedBy   string            `json:"created_by"`
	UpdatedAt   time.Time         `json:"updated_at,omitzero"` // when this version was written
	UpdatedBy   string            `json:"updated_by"`          // who wrote this version
}

// ArtifactRef names an artifact by ID or by Name (exactly one), and
// optionally one of its versions (0: the head).
type ArtifactRef struct {
	ID      string
	Name    string
	Version int64
}

// ByName refers to the live artifact called name.
func ByName(name string) ArtifactRef { return ArtifactRef{Name: name} }

// ByID refers to the artifact with the given id.
func ByID(id string) ArtifactRef { return ArtifactRef{ID: id} }

// NewArtifact is what Create takes.
type NewArtifact struct {
	Name    string
	Kind    string // default "output"
	Content []byte
	// ContentType, when empty, is inferred the same way on every face and
	// backend: by Name's extension (a fixed table, case-insensitive), else
	// text/plain for valid UTF-8 without NUL bytes, else
	// application/octet-stream.
	ContentType string
	Labels      map[string]string
	TaskID      string
}

// ArtifactChange is what Update takes: nil fields stay as they are. A non-nil
// empty Content ([]byte{}) sets the content to empty.
type ArtifactChange struct {
	Content     []byte
	Kind        *string
	ContentType *string
	Owner       *string
	TaskID      *string
	Labels      map[string]string // replaces all labels when non-nil
}

// ArtifactFilter selects artifacts for List. Zero fields match everything.
type ArtifactFilter struct {
	Kind       string
	Owner      string
	NamePrefix string
	TaskID     string
	Labels     map[string]string // every pair must match
	After      string            // cursor: the Next of the previous page
	Limit      int               // default 100, at most 1000
}

// ArtifactPage is one page of List, ordered by name.
type ArtifactPage struct {
	Artifacts []Artifact `json:"artifacts"`
	Next      string     `json:"next"` // pass as After for the next page; empty at the end
}

// TaskStatus is a task's place in its life cycle: one of TaskPending,
// TaskInProgress, TaskBlocked, TaskDone, TaskFailed, TaskCancelled. The legal
// transitions are:
//
//	pending     -> in_progress (only by Claim), blocked, cancelled
//	in_progress -> done, failed, pending (release), blocked, cancelled
//	blocked     -> pending, cancelled
//	failed      -> pending (retry), cancelled
//	done, cancelled: final
//
// No status is a transition to itself: Complete on a task that is done,
// Fail on a failed one or Release on a pending one is ErrInvalid.
//
// While a claim's lease is live, only its assignee may move the task out of
// in_progress (others get ErrNotHolder; cancellation is open to anyone).
// A claim whose lease lapsed is free at once: the next Claim (or status
// change) returns the task to pending, recorded as task.released, and the
// late assignee gets ErrLockLost. Until then Get and List show the task as
// stored: in_progress with LeaseExpiresAt in the past (Status leaves it out
// of ActiveTasks).
type TaskStatus string

const (
	// TaskPending: waiting to be claimed (once every dependency is done).
	TaskPending TaskStatus = "pending"

	// TaskInProgress: claimed by its Assignee, under a lease kept by Heartbeat.
	TaskInProgress TaskStatus = "in_progress"

	// TaskBlocked: set aside until someone returns it to pending.
	TaskBlocked TaskStatus = "blocked"

	// TaskDone: finished by Complete, with its Result. Final.
	TaskDone TaskStatus = "done"

	// TaskFailed: given up by Fail, with its Result; may be retried (pending).
	TaskFailed TaskStatus = "failed"

	// TaskCancelled: will not be done. Final.
	TaskCancelled TaskStatus = "cancelled"
)

var taskTransitions = map[TaskStatus][]TaskStatus{
	TaskPending:    {TaskInProgress, TaskBlocked, TaskCancelled},
	TaskInProgress: {TaskDone, TaskFailed, TaskPending, TaskBlocked, TaskCancelled},
	TaskBlocked:    {TaskPending, TaskCancelled},
	TaskFailed:     {TaskPending, TaskCancelled},
}

// Valid reports whether s is one of the six statuses.
func (s TaskStatus) Valid() bool {
	switch s {
	case TaskPending, TaskInProgress, TaskBlocked, TaskDone, TaskFailed, TaskCancelled:
		return true
	}
	return false
}

// CanBecome reports whether the state machine allows s -> next.
func (s TaskStatus) CanBecome(next TaskStatus) bool {
	for _, t := range taskTransitions[s] {
		if t == next {
			return true
		}
	}
	return false
}

// TaskResult is what a finished (or failed) task produced.
type TaskResult struct {
	Summary   string   `json:"summary"`
	Artifacts []string `json:"artifacts"` // artifact names
}

// Task is a unit of work to be claimed and done by an agent.
type Task struct {
	ID             string            `json:"id"`
	Title          string            `json:"title"`
	Description    string            `json:"description"`
	Status         TaskStatus        `json:"status"`
	Assignee       string            `json:"assignee"`
	ParentID       string            `json:"parent_id"`
	DependsOn      []string          `json:"depends_on"` // ids of tasks that must be done first
	Areas          []string          `json:"areas"`      // paths the task expects to touch (see ClaimRequest.AvoidOverlap)
	Priority       int               `json:"priority"`   // higher first
	Labels         map[string]string `json:"labels"`
	Result         TaskResult        `json:"result"`
	Attempts       int               `json:"attempts"`                  // how many times the task was claimed
	LeaseExpiresAt time.Time         `json:"lease_expires_at,omitzero"` // for in_progress tasks: when the claim lapses without a heartbeat
	Version        int64             `json:"version"`
	CreatedAt      time.Time         `json:"created_at,omitzero"`
	CreatedBy      string            `json:"created_by"`
	UpdatedAt      time.Time         `json:"updated_at,omitzero"`
	UpdatedBy      string            `json:"updated_by"`
}

// NewTask is what Tasks.Create takes.
type NewTask struct {
	Title       string
	Description string
	ParentID    string
	DependsOn   []string
	// Areas are the paths (files, or directories ending in '/') the task
	// expects to touch: each a name ValidateName accepts (relative,
	// slash-separated, no '..'), optionally ending in '/'. A hint for
	// ClaimRequest.AvoidOverlap, not a lock.
	Areas    []string
	Priority int
	Labels   map[string]string
	Assignee string // a suggested assignee; Claim may still give it to anyone
}

// TaskChange is what Tasks.Update takes: nil fields stay as they are.
type TaskChange struct {
	Status      *TaskStatus
	Title       *string
	Description *string
	Assignee    *string
	Priority    *int
	Labels      map[string]string // replaces all labels when non-nil
	Result      *TaskResult
}

// TaskFilter selects tasks for List. Zero fields match everything.
type TaskFilter struct {
	Status   TaskStatus
	Assignee string
	ParentID string
	Labels   map[string]string
	After    string // cursor: the Next of the previous page
	Limit    int    // default 100, at most 1000
}

// TaskPage is one page of Tasks.List, ordered by creation (oldest first).
type TaskPage struct {
	Tasks []Task `json:"tasks"`
	Next  string `json:"next"` // pass as After for the next page; empty at the end
}

// ClaimRequest is what Tasks.Claim takes.
type ClaimRequest struct {
	Actor string
	// Lease is how long the claim lives without a heartbeat (default 5m).
	Lease time.Duration
	// Labels, when set, restrict the claim to tasks carrying every pair.
	Labels map[string]string
	// ParentID, when set, restricts the claim to subtasks of that task.
	ParentID string
	// Wait blocks until a task is ready or ctx ends, instead of ErrNoTask.
	Wait bool
	// AvoidOverlap prefers the best ready task whose Areas overlap no
	// in_progress task's; when every ready task overlaps, the best of
	// them is claimed as without it. Two areas overlap when they are
	// equal or one is a directory of the other on a segment boundary
	// ("src/api/" and "src/api/x.go", not "src/apix"); a task without
	// areas overlaps nothing.
	AvoidOverlap bool
}

// Note is a piece of shared context: a decision, a constraint, a glossary term.
type Note struct {
	Kind      string    `json:"kind"` // decision, constraint, glossary, friction, or any lower-case word
	Key       string    `json:"key"`  // unique within Kind
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	Author    string    `json:"author"` // who wrote it first
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	UpdatedBy string    `json:"updated_by"`
}

// NotePut is what Notes.Put takes.
type NotePut struct {
	Kind  string
	Key   string
	Title string
	Body  string
}

// NoteFilter selects notes for List.
type NoteFilter struct {
	Kind  string // empty: every kind
	After string // cursor
	Limit int    // default 100, at most 1000
}

// NotePage is one page of Notes.List, ordered by kind then key.
type NotePage struct {
	Notes []Note `json:"notes"`
	Next  string `json:"next"` // pass as After for the next page; empty at the end
}

// Lease is a lock on a resource with a fencing token.
type Lease struct {
	Resource   string    `json:"resource"`
	Owner      string    `json:"owner"`
	Token      int64     `json:"token"` // strictly increases each time the resource changes hands
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	// TTL is the span its holder last asked for: the TTL of the Acquire
	// that took or extended it, or of its last Renew. A renewal made on
	// the holder's behalf (tool use as a heartbeat, package touch) extends
	// it by TTL, never by more. Zero on rows stored before it was recorded.
	TTL time.Duration `json:"ttl_ns,omitzero"`
}

// ArtifactResource is the lock resource that guards the artifact named
// name: a live lease on it held by another owner refuses writes to the
// artifact, and Write.Fence is checked against its tokens. Stores that
// read the lease with the record use it too.
func ArtifactResource(name string) string { return "artifact:" + name }

// AcquireRequest is what Locks.Acquire takes.
type AcquireRequest struct {
	Resource string
	Owner    string
	TTL      time.Duration
	// Wait blocks until the lease is free (woken by its release or expiry) or ctx ends.
	Wait    bool
	Message string
}

// Event is one entry of the workspace's log.
type Event struct {
	Seq     int64     `json:"seq"` // per workspace, from 1, +1 in commit order: no gaps
	Time    time.Time `json:"time,omitzero"`
	Actor   string    `json:"actor"`
	Type    string    `json:"type"` // one of the Event* constants
	Subject Subject   `json:"subject"`
	Version int64     `json:"version"` // the record's version after the change (the current one for conflicts; the token for locks)
	Message string    `json:"message"`
}

// What an event says: its type (an Event's Type) and its subject's kind (a
// Subject's Kind); and the severities of a Msg.
const (
	// Subject kinds.
	SubjectArtifact = "artifact"
	SubjectTask     = "task"
	SubjectNote     = "note"
	SubjectLock     = "lock"
	// SubjectPolicy is the subject kind of denied events.
	SubjectPolicy  = "policy"
	SubjectMessage = "message"
	SubjectActor   = "actor" // of a pause
	// Event types.
	EventArtifactCreated    = "artifact.created"
	EventArtifactUpdated    = "artifact.updated"
	EventArtifactDeleted    = "artifact.deleted"
	EventArtifactRolledBack = "artifact.rolled_back"
	EventTaskCreated        = "task.created"
	EventTaskUpdated        = "task.updated"
	EventTaskClaimed        = "task.claimed"
	EventTaskReleased       = "task.released"
	EventNotePut            = "note.put"
	EventNoteDeleted        = "note.deleted"
	EventLockAcquired       = "lock.acquired"
	EventLockRenewed        = "lock.renewed"
	EventLockReleased       = "lock.released"
	EventLockExpired        = "lock.expired"
	EventLockForced         = "lock.forced"
	// EventLockWaited records that an acquire had to wait for the lease:
	// Message is how long, as a Go duration ("1.25s", to the millisecond),
	// from the first try that found it held to the one that took it. It
	// comes just before that acquire's lock.acquired, in the same commit,
	// with the same token as Version. A served client's wait is measured
	// within its last long poll.
	EventLockWaited = "lock.waited"
	EventConflict   = "conflict"
	// EventDenied records an operation the policy refused. Its Subject
	// has Kind SubjectPolicy, the action as ID and the record's name
	// (artifact name, "kind/key" of a note, lock resource, task title) as
	// Name; its Message gives the action and reason.
	EventDenied = "denied"
	// EventGC records a garbage collection: its message says what it
	// removed. Its subject is the workspace ("workspace").
	EventGC = "workspace.gc"
	// The events of messages (Subject: SubjectMessage, the message's ID)
	// and of pauses (Subject: SubjectActor, the actor).
	EventMessageSent      = "message.sent"
	EventMessageAcked     = "message.acked"
	EventMessageEscalated = "message.escalated"
	EventMessageRead      = "message.read" // a reader's cursor moved
	EventActorPaused      = "actor.paused"
	EventActorResumed     = "actor.resumed"
	// Message severities, a Msg's Severity.
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityError    = "error"
	SeverityCritical = "critical"
)

// EventQuery filters the log for Read and Subscribe. Zero fields match everything.
type EventQuery struct {
	AfterSeq    int64    // only events with Seq > AfterSeq
	Types       []string // any of these types
	Actor       string
	SubjectKind string
	SubjectID   string
	SubjectName string
	Since       time.Time // Time >= Since
	Until       time.Time // Time < Until
	Limit       int       // Read only: default 100, at most 10000
}

// Matches reports whether e passes q's filters (every one but AfterSeq
// and Limit): the test every store applies, in SQL or in memory. Reads and
// subscriptions truncate Since and Until to microseconds first, as event
// times are kept.
func (q EventQuery) Matches(e Event) bool {
	switch {
	case len(q.Types) > 0 && !slices.Contains(q.Types, e.Type),
		q.Actor != "" && e.Actor != q.Actor,
		q.SubjectKind != "" && e.Subject.Kind != q.SubjectKind,
		q.SubjectID != "" && e.Subject.ID != q.SubjectID,
		q.SubjectName != "" && e.Subject.Name != q.SubjectName,
		!q.Since.IsZero() && e.Time.Before(q.Since),
		!q.Until.IsZero() && !e.Time.Before(q.Until):
		return false
	}
	return true
}

// EventPage is one page of Read.
type EventPage struct {
	Events []Event `json:"events"`
	// Next is the AfterSeq for the next page: the seq of the last event
	// examined (matching or not). Head is the log's head when read.
	Next int64 `json:"next"`
	Head int64 `json:"head"`
}

// Status is the dashboard: what is in the workspace and what is going on.
type Status struct {
	Head         int64              `json:"head"`  // the newest event seq
	Floor        int64              `json:"floor"` // the oldest seq still in the log (1 if never compacted)
	Artifacts    int                `json:"artifacts"`
	Notes        int                `json:"notes"`
	Tasks        map[TaskStatus]int `json:"tasks"`         // tasks by status
	ActiveTasks  []Task             `json:"active_tasks"`  // in_progress under a live claim
	Locks        []Lease            `json:"locks"`         // live leases
	RecentEvents []Event            `json:"recent_events"` // newest last
}
