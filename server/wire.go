package server

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// The request and answer shapes are the wire package's; what is here
// describes them to huma and parses the query parameters.

// durationSchema documents wire.Duration as a string.
type durationSchema string

// Schema documents a duration as a string with an example.
func (durationSchema) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: "string", Description: "A duration such as 500ms, 30s, 5m or 1h30m.", Examples: []any{"30s"}}
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
	wire.Content
}

func registerWireTypes(api huma.API) {
	api.OpenAPI().Components.Schemas.RegisterTypeAlias(reflect.TypeFor[workspace.Artifact](), reflect.TypeFor[artifactWire]())
	api.OpenAPI().Components.Schemas.RegisterTypeAlias(reflect.TypeFor[wire.Duration](), reflect.TypeFor[durationSchema]())
	api.OpenAPI().Components.Schemas.RegisterTypeAlias(reflect.TypeFor[changeBody](), reflect.TypeFor[wire.ArtifactChangeBody]())
	api.OpenAPI().Components.Schemas.RegisterTypeAlias(reflect.TypeFor[noteBody](), reflect.TypeFor[wire.NoteBody]())
}

var (
	reflectEvent      = reflect.TypeFor[workspace.Event]()
	reflectProblem    = reflect.TypeFor[wire.Problem]()
	reflectInboxEvent = reflect.TypeFor[wire.InboxEvent]()
)
