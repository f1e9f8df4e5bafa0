package wire

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agentspace/agentspace/internal/contentenc"
	"github.com/agentspace/agentspace/internal/jsonx"

	"github.com/agentspace/agentspace/workspace"
)

// The request shapes of the API, with the field names of the workspace
// types they stand for. Optional fields carry omitempty: the server's
// OpenAPI generator treats the others as required.

// ActorHeader names the acting agent on a request without a token (only
// where the server does not require tokens).
const ActorHeader = "X-Agentspace-Actor"

// WriteFields are a single-record write's conditions (workspace.Write).
type WriteFields struct {
	Actor          string `json:"actor,omitempty" doc:"Who writes. Behind a token: the token's actor or empty."`
	IfVersion      int64  `json:"if_version,omitempty" doc:"Fail with 409 conflict unless the stored version is this."`
	Fence          int64  `json:"fence,omitempty" doc:"Fail with 409 stale_fence if the record's lock issued a newer token."`
	Message        string `json:"message,omitempty" doc:"Why, kept in the event log."`
	IdempotencyKey string `json:"idempotency_key,omitempty" doc:"A retry with the same key returns the first result."`
}

// WriteQuery is WriteFields as query parameters, for DELETE.
type WriteQuery struct {
	Actor          string `query:"actor" doc:"Who writes. Behind a token: the token's actor or empty."`
	IfVersion      int64  `query:"if_version"`
	Fence          int64  `query:"fence"`
	Message        string `query:"message"`
	IdempotencyKey string `query:"idempotency_key"`
}

// Fields returns the query's conditions as WriteFields.
func (q WriteQuery) Fields() WriteFields { return WriteFields(q) }

// Content is an artifact's content on the wire: text (utf-8, the default)
// or base64.
type Content struct {
	Content         *string `json:"content,omitempty" doc:"The content: text, or base64 when content_encoding is base64."`
	ContentEncoding string  `json:"content_encoding,omitempty" enum:"utf-8,base64" doc:"utf-8 (default) or base64."`
}

// Bytes decodes the content with the workspace's own decoder of the shape,
// so a bad encoding is the same *InvalidError as in any other face.
func (c Content) Bytes() ([]byte, error) {
	b, field, reason := contentenc.Decode(c.Content, c.ContentEncoding)
	if field != "" {
		return nil, &workspace.InvalidError{Field: field, Reason: reason}
	}
	return b, nil
}

// NewArtifactBody creates an artifact.
type NewArtifactBody struct {
	WriteFields
	Name        string            `json:"name"`
	Kind        string            `json:"kind,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	TaskID      string            `json:"task_id,omitempty"`
	Content
}

// Artifact returns the body as a workspace.NewArtifact; a bad content
// encoding is an *InvalidError.
func (b NewArtifactBody) Artifact() (workspace.NewArtifact, error) {
	c, err := b.Bytes()
	return workspace.NewArtifact{Name: b.Name, Kind: b.Kind, Content: c, ContentType: b.ContentType, Labels: b.Labels, TaskID: b.TaskID}, err
}

// ArtifactChangeBody changes an artifact: absent fields stay as they are.
type ArtifactChangeBody struct {
	WriteFields
	Kind        *string           `json:"kind,omitempty"`
	ContentType *string           `json:"content_type,omitempty"`
	Owner       *string           `json:"owner,omitempty"`
	TaskID      *string           `json:"task_id,omitempty"`
	Labels      map[string]string `json:"labels,omitzero" doc:"Replaces every label when present."`
	Content
}

// AppendJSON appends the body as json.Marshal writes it, without its
// reflection: an artifact update is the request agents send most, and its
// content the longest string in it (FuzzArtifactChangeBodyJSON holds the
// bytes to json.Marshal's).
func (b ArtifactChangeBody) AppendJSON(dst []byte) []byte {
	room := 256
	if c := b.Content.Content; c != nil {
		room += len(*c) + len(*c)/16 // a few escapes
	}
	dst = slices.Grow(dst, room)
	dst = append(dst, '{')
	first := true
	field := func(name string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, name...)
		dst = append(dst, '"', ':')
	}
	str := func(name, v string) {
		if v != "" {
			field(name)
			dst = jsonx.AppendString(dst, v)
		}
	}
	num := func(name string, v int64) {
		if v != 0 {
			field(name)
			dst = strconv.AppendInt(dst, v, 10)
		}
	}
	ptr := func(name string, v *string) {
		if v != nil {
			field(name)
			dst = jsonx.AppendString(dst, *v)
		}
	}
	str("actor", b.Actor)
	num("if_version", b.IfVersion)
	num("fence", b.Fence)
	str("message", b.Message)
	str("idempotency_key", b.IdempotencyKey)
	ptr("kind", b.Kind)
	ptr("content_type", b.ContentType)
	ptr("owner", b.Owner)
	ptr("task_id", b.TaskID)
	if b.Labels != nil {
		field("labels")
		dst = jsonx.AppendStringMap(dst, b.Labels)
	}
	ptr("content", b.Content.Content)
	str("content_encoding", b.ContentEncoding)
	return append(dst, '}')
}

// Change returns the body as a workspace.ArtifactChange; a bad content
// encoding is an *InvalidError.
func (b ArtifactChangeBody) Change() (workspace.ArtifactChange, error) {
	c, err := b.Bytes()
	return workspace.ArtifactChange{Content: c, Kind: b.Kind, ContentType: b.ContentType, Owner: b.Owner, TaskID: b.TaskID, Labels: b.Labels}, err
}

// RollbackBody rolls an artifact back to version To.
type RollbackBody struct {
	WriteFields
	To int64 `json:"to" minimum:"1"`
}

// NewTaskBody creates a task.
type NewTaskBody struct {
	WriteFields
	Title       string            `json:"title"`
	Description string            `json:"description,omitempty"`
	ParentID    string            `json:"parent_id,omitempty"`
	DependsOn   []string          `json:"depends_on,omitempty"`
	Areas       []string          `json:"areas,omitempty" doc:"Paths the task expects to touch."`
	Priority    int               `json:"priority,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Assignee    string            `json:"assignee,omitempty"`
}

// Task returns the body as a workspace.NewTask.
func (b NewTaskBody) Task() workspace.NewTask {
	return workspace.NewTask{Title: b.Title, Description: b.Description, ParentID: b.ParentID, DependsOn: b.DependsOn, Areas: b.Areas, Priority: b.Priority, Labels: b.Labels, Assignee: b.Assignee}
}

// TaskChangeBody changes a task: absent fields stay as they are.
type TaskChangeBody struct {
	WriteFields
	Status      *workspace.TaskStatus `json:"status,omitempty" enum:"pending,in_progress,blocked,done,failed,cancelled"`
	Title       *string               `json:"title,omitempty"`
	Description *string               `json:"description,omitempty"`
	Assignee    *string               `json:"assignee,omitempty"`
	Priority    *int                  `json:"priority,omitempty"`
	Labels      map[string]string     `json:"labels,omitzero" doc:"Replaces every label when present."`
	Result      *workspace.TaskResult `json:"result,omitempty"`
}

// Change returns the body as a workspace.TaskChange.
func (b TaskChangeBody) Change() workspace.TaskChange {
	return workspace.TaskChange{Status: b.Status, Title: b.Title, Description: b.Description, Assignee: b.Assignee, Priority: b.Priority, Labels: b.Labels, Result: b.Result}
}

// ClaimBody claims the best ready task.
type ClaimBody struct {
	Actor    string            `json:"actor,omitempty"`
	Lease    Duration          `json:"lease,omitempty" doc:"How long the claim lives without a heartbeat (default 5m)."`
	Labels   map[string]string `json:"labels,omitempty"`
	ParentID string            `json:"parent_id,omitempty"`
	Wait     Duration          `json:"wait,omitempty" doc:"Long poll: wait up to this long for a task (capped by the server)."`
	// AvoidOverlap is workspace.ClaimRequest.AvoidOverlap.
	AvoidOverlap bool `json:"avoid_overlap,omitempty" doc:"Prefer a ready task whose areas overlap no task in progress."`
}

// HeartbeatBody extends a claim.
type HeartbeatBody struct {
	WriteFields
	Lease Duration `json:"lease,omitempty"`
}

// ResultBody finishes (or fails) a task.
type ResultBody struct {
	WriteFields
	Summary   string   `json:"summary,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
}

// NoteBody puts a note.
type NoteBody struct {
	WriteFields
	Title string `json:"title,omitempty"`
	Body  string `json:"body,omitempty"`
}

// AcquireBody takes (or extends) a lease.
type AcquireBody struct {
	Actor   string   `json:"actor,omitempty" doc:"The owner. Behind a token: the token's actor or empty."`
	TTL     Duration `json:"ttl"`
	Wait    Duration `json:"wait,omitempty" doc:"Long poll: wait up to this long for the lease to be free (capped by the server)."`
	Message string   `json:"message,omitempty"`
}

// LeaseBody names a held lease: renew takes TTL, release ignores it.
type LeaseBody struct {
	Actor string   `json:"actor,omitempty"`
	Token int64    `json:"token" minimum:"1"`
	TTL   Duration `json:"ttl,omitempty"`
}

// CompactBody compacts the log below Floor.
type CompactBody struct {
	Floor int64 `json:"floor" minimum:"1"`
}

// GCBody is a garbage collection's policy (workspace.GCPolicy) on the
// wire. Zero fields keep everything of their kind.
type GCBody struct {
	Actor         string   `json:"actor,omitempty" doc:"Who runs it, recorded on its event. Behind a token: the token's actor or empty."`
	KeepEvents    int64    `json:"keep_events,omitempty" doc:"Keep the newest N events."`
	KeepEventsFor Duration `json:"keep_events_for,omitempty" doc:"Keep the events younger than this."`
	KeepVersions  int64    `json:"keep_versions,omitempty" doc:"Keep the newest N versions of each live artifact, plus pinned ones and those a task's result names."`
	KeepTasksFor  Duration `json:"keep_tasks_for,omitempty" doc:"Keep finished tasks updated within this long."`
	// KeepMessagesFor keeps messages sent within this long.
	KeepMessagesFor Duration `json:"keep_messages_for,omitempty" doc:"Keep messages sent within this long; one that still owes an ack is always kept."`
	MinEvents       int64    `json:"min_events,omitempty" doc:"Remove no events unless at least this many would go."`
	Reclaim         bool     `json:"reclaim,omitempty" doc:"Give the freed space back to the file system (SQLite's incremental vacuum)."`
	DryRun          bool     `json:"dry_run,omitempty" doc:"Report what would go; remove nothing."`
	Batch           int64    `json:"batch,omitempty" doc:"The most records one transaction removes."`
	BatchTime       Duration `json:"batch_time,omitempty" doc:"How long one transaction should hold the store's write lock (default 10ms)."`
}

// Policy returns the body as a workspace.GCPolicy run by actor. A
// duration that does not parse is an *InvalidError naming its field; a
// negative one is left for the engine to refuse, as it would in process.
func (b GCBody) Policy(actor string) (workspace.GCPolicy, error) {
	p := workspace.GCPolicy{Actor: actor, KeepEvents: b.KeepEvents, KeepVersions: b.KeepVersions, MinEvents: b.MinEvents,
		Reclaim: b.Reclaim, DryRun: b.DryRun, Batch: b.Batch}
	for _, d := range []struct {
		field string
		in    Duration
		out   *time.Duration
	}{{"keep_events_for", b.KeepEventsFor, &p.KeepEventsFor}, {"keep_tasks_for", b.KeepTasksFor, &p.KeepTasksFor}, {"keep_messages_for", b.KeepMessagesFor, &p.KeepMessagesFor}, {"batch_time", b.BatchTime, &p.BatchTime}} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(string(d.in))
		if err != nil {
			return p, &workspace.InvalidError{Field: d.field, Reason: "not a duration such as 30s or 5m"}
		}
		*d.out = v
	}
	return p, nil
}

// Duration is a Go duration string on the wire ("30s", "5m", "1h30m").
type Duration string

// DurationOf puts d on the wire: zero stays absent (the server's default),
// a negative one is sent so that the server refuses it as the library
// would.
func DurationOf(d time.Duration) Duration {
	if d == 0 {
		return ""
	}
	return Duration(d.String())
}

// Value parses the duration; empty is zero. One that does not parse, or is
// negative, is an *InvalidError naming field.
func (d Duration) Value(field string) (time.Duration, error) {
	if d == "" {
		return 0, nil
	}
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, &workspace.InvalidError{Field: field, Reason: "not a duration such as 30s or 5m"}
	}
	if v < 0 {
		return 0, &workspace.InvalidError{Field: field, Reason: "is negative"}
	}
	return v, nil
}

// WriteFieldsOf puts a write's conditions on the wire.
func WriteFieldsOf(w workspace.Write) WriteFields {
	return WriteFields{Actor: w.Actor, IfVersion: w.IfVersion, Fence: w.Fence, Message: w.Message, IdempotencyKey: w.IdempotencyKey}
}

// ContentOf puts bytes on the wire as the workspace's JSON does: text when
// they are UTF-8 without NUL bytes, else base64; nil stays absent.
func ContentOf(b []byte) Content {
	if b == nil {
		return Content{}
	}
	if utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 {
		s := string(b)
		return Content{Content: &s}
	}
	s := base64.StdEncoding.EncodeToString(b)
	return Content{Content: &s, ContentEncoding: "base64"}
}
