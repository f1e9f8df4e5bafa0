package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/workspace"
)

// The request shapes of the API. Records go out in the workspace types'
// own JSON (their snake_case tags); what the workspace takes as input has
// no JSON of its own, so its wire shape is defined here, with the same
// field names. Optional fields carry omitempty: huma treats the others as
// required.

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

func (q WriteQuery) fields() WriteFields { return WriteFields(q) }

// Content is an artifact's content on the wire: text (utf-8, the default)
// or base64.
type Content struct {
	Content         *string `json:"content,omitempty" doc:"The content: text, or base64 when content_encoding is base64."`
	ContentEncoding string  `json:"content_encoding,omitempty" enum:"utf-8,base64" doc:"utf-8 (default) or base64."`
}

// bytes decodes the content with the workspace's own decoder of the shape,
// so a bad encoding is the same *InvalidError as in any other face.
func (c Content) bytes() ([]byte, error) {
	return workspace.DecodeContent(c.Content, c.ContentEncoding)
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

func (b NewArtifactBody) artifact() (workspace.NewArtifact, error) {
	c, err := b.bytes()
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

func (b ArtifactChangeBody) change() (workspace.ArtifactChange, error) {
	c, err := b.bytes()
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

func (b NewTaskBody) task() workspace.NewTask {
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

func (b TaskChangeBody) change() workspace.TaskChange {
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

// Duration is a Go duration string on the wire ("30s", "5m", "1h30m").
type Duration string

// Schema documents Duration as a string with a pattern.
func (Duration) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: "string", Description: "A duration such as 500ms, 30s, 5m or 1h30m.", Examples: []any{"30s"}}
}

// value parses the duration; empty is zero.
func (d Duration) value(field string) (time.Duration, error) {
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

// labelsQuery parses repeated label=KEY=VALUE query parameters (the
// key ends at the first "="), and the labels parameter, a JSON object of
// pairs, for keys that hold an "=" themselves.
func labelsQuery(vals []string, object string) (map[string]string, error) {
	if len(vals) == 0 && object == "" {
		return nil, nil
	}
	m := make(map[string]string, len(vals))
	if object != "" {
		if err := json.Unmarshal([]byte(object), &m); err != nil {
			return nil, &workspace.InvalidError{Field: "labels", Reason: "must be a JSON object of strings"}
		}
	}
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, &workspace.InvalidError{Field: "label", Reason: "must be KEY=VALUE"}
		}
		m[k] = val
	}
	return m, nil
}

// artifactWire is the documented shape of workspace.Artifact, whose
// content fields come from its MarshalJSON rather than its struct tags.
type artifactWire struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Kind        string            `json:"kind"`
	Owner       string            `json:"owner"`
	Version     int64             `json:"version"`
	ContentType string            `json:"content_type"`
	SHA256      string            `json:"sha256"`
	Size        int64             `json:"size"`
	Labels      map[string]string `json:"labels"`
	TaskID      string            `json:"task_id"`
	CreatedAt   time.Time         `json:"created_at,omitzero"`
	CreatedBy   string            `json:"created_by"`
	UpdatedAt   time.Time         `json:"updated_at,omitzero"`
	UpdatedBy   string            `json:"updated_by"`
	Content
}

func registerWireTypes(api huma.API) {
	api.OpenAPI().Components.Schemas.RegisterTypeAlias(reflect.TypeFor[workspace.Artifact](), reflect.TypeFor[artifactWire]())
}

var (
	reflectEvent   = reflect.TypeFor[workspace.Event]()
	reflectProblem = reflect.TypeFor[Problem]()
)
