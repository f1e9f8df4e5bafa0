package workspace

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/agentspace/agentspace/internal/contentenc"
)

// The JSON shape of the records, shared by wsctl --json, the archive and
// every other face (docs/schema/workspace.schema.json describes it):
// snake_case names, every field present, empty lists and maps as [] and {}
// (never null), times RFC 3339 in UTC with zero times left out. Decoding
// takes [] and {} back to nil, so Unmarshal(Marshal(x)) == x for the nil
// slices and maps the stores return.

// Artifact content encodings in JSON.
const (
	contentUTF8   = contentenc.UTF8
	contentBase64 = contentenc.Base64
)

// decodeContent sets a's content from the shape's content and encoding; a
// bad encoding is an *InvalidError naming the field.
func decodeContent(a *Artifact, content *string, encoding string) error {
	c, field, reason := contentenc.Decode(content, encoding)
	if field != "" {
		return &InvalidError{Field: field, Reason: reason}
	}
	a.Content = c
	return nil
}

// MarshalJSON writes the artifact in the shared shape, with its content as
// text when it is UTF-8 without NUL bytes and as base64 otherwise.
func (a Artifact) MarshalJSON() ([]byte, error) {
	w := artifactJSON{artifactFields: artifactFields(a)}
	w.Labels = emptyMap(w.Labels)
	utc(&w.CreatedAt, &w.UpdatedAt)
	if a.Content != nil {
		s, enc := string(a.Content), contentUTF8
		// Go's encoder would turn invalid UTF-8 into U+FFFD; NUL marks
		// binary content, as git takes it.
		if !utf8.Valid(a.Content) || bytes.IndexByte(a.Content, 0) >= 0 {
			s, enc = base64.StdEncoding.EncodeToString(a.Content), contentBase64
		}
		w.Content, w.ContentEncoding = &s, enc
	}
	if b, ok := w.appendJSON(make([]byte, 0, w.sizeJSON())); ok {
		return b, nil
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the shared shape; content may be in either encoding
// (utf-8 when content_encoding is absent).
func (a *Artifact) UnmarshalJSON(b []byte) error {
	var w artifactJSON
	if !w.readJSON(b) {
		w = artifactJSON{}
		if err := json.Unmarshal(b, &w); err != nil {
			return err
		}
	}
	art, err := w.artifact()
	if err != nil {
		return err
	}
	*a = art
	return nil
}

// artifact decodes the content; a bad encoding is an *InvalidError.
func (w *artifactJSON) artifact() (Artifact, error) {
	a := Artifact(w.artifactFields)
	a.Labels = nilMap(a.Labels)
	err := decodeContent(&a, w.Content, w.ContentEncoding)
	return a, err
}

// artifactFields is Artifact without its methods, so that artifactJSON can
// embed it and add the content fields after the metadata.
type artifactFields Artifact

type artifactJSON struct {
	artifactFields
	Content         *string `json:"content,omitempty"`
	ContentEncoding string  `json:"content_encoding,omitempty"`
}

// MarshalJSON writes the result with [] for no artifacts.
func (r TaskResult) MarshalJSON() ([]byte, error) {
	type plain TaskResult
	p := plain(r)
	p.Artifacts = emptySlice(p.Artifacts)
	return json.Marshal(p)
}

// UnmarshalJSON reads the shared shape.
func (r *TaskResult) UnmarshalJSON(b []byte) error {
	type plain TaskResult
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = TaskResult(p)
	r.Artifacts = nilSlice(r.Artifacts)
	return nil
}

// MarshalJSON writes the task in the shared shape.
func (t Task) MarshalJSON() ([]byte, error) {
	type plain Task
	p := plain(t)
	p.DependsOn, p.Labels = emptySlice(p.DependsOn), emptyMap(p.Labels)
	p.Areas = emptySlice(p.Areas)
	utc(&p.LeaseExpiresAt, &p.CreatedAt, &p.UpdatedAt)
	return json.Marshal(p)
}

// UnmarshalJSON reads the shared shape.
func (t *Task) UnmarshalJSON(b []byte) error {
	var p taskFields
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*t = Task(p)
	t.DependsOn, t.Labels = nilSlice(t.DependsOn), nilMap(t.Labels)
	t.Areas = nilSlice(t.Areas)
	return nil
}

// taskFields is Task without its methods: the archive decodes it strictly.
type taskFields Task

// MarshalJSON writes the note in the shared shape.
func (n Note) MarshalJSON() ([]byte, error) {
	type plain Note
	p := plain(n)
	utc(&p.CreatedAt, &p.UpdatedAt)
	return json.Marshal(p)
}

// MarshalJSON writes the lease in the shared shape.
func (l Lease) MarshalJSON() ([]byte, error) {
	type plain Lease
	p := plain(l)
	utc(&p.AcquiredAt, &p.ExpiresAt)
	return json.Marshal(p)
}

// MarshalJSON writes the event in the shared shape.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	p := plain(e)
	utc(&p.Time)
	return json.Marshal(p)
}

// MarshalJSON writes the page with [] for no artifacts.
func (p ArtifactPage) MarshalJSON() ([]byte, error) {
	type plain ArtifactPage
	return json.Marshal(plain{Artifacts: emptySlice(p.Artifacts), Next: p.Next})
}

// UnmarshalJSON reads the shared shape.
func (p *ArtifactPage) UnmarshalJSON(b []byte) error {
	type plain ArtifactPage
	err := json.Unmarshal(b, (*plain)(p))
	p.Artifacts = nilSlice(p.Artifacts)
	return err
}

// MarshalJSON writes the page with [] for no tasks.
func (p TaskPage) MarshalJSON() ([]byte, error) {
	type plain TaskPage
	return json.Marshal(plain{Tasks: emptySlice(p.Tasks), Next: p.Next})
}

// UnmarshalJSON reads the shared shape.
func (p *TaskPage) UnmarshalJSON(b []byte) error {
	type plain TaskPage
	err := json.Unmarshal(b, (*plain)(p))
	p.Tasks = nilSlice(p.Tasks)
	return err
}

// MarshalJSON writes the page with [] for no notes.
func (p NotePage) MarshalJSON() ([]byte, error) {
	type plain NotePage
	return json.Marshal(plain{Notes: emptySlice(p.Notes), Next: p.Next})
}

// UnmarshalJSON reads the shared shape.
func (p *NotePage) UnmarshalJSON(b []byte) error {
	type plain NotePage
	err := json.Unmarshal(b, (*plain)(p))
	p.Notes = nilSlice(p.Notes)
	return err
}

// MarshalJSON writes the page with [] for no events.
func (p EventPage) MarshalJSON() ([]byte, error) {
	type plain EventPage
	return json.Marshal(plain{Events: emptySlice(p.Events), Next: p.Next, Head: p.Head})
}

// UnmarshalJSON reads the shared shape.
func (p *EventPage) UnmarshalJSON(b []byte) error {
	type plain EventPage
	err := json.Unmarshal(b, (*plain)(p))
	p.Events = nilSlice(p.Events)
	return err
}

// MarshalJSON writes the dashboard in the shared shape.
func (s Status) MarshalJSON() ([]byte, error) {
	type plain Status
	p := plain(s)
	p.Tasks, p.ActiveTasks = emptyMap(p.Tasks), emptySlice(p.ActiveTasks)
	p.Locks, p.RecentEvents = emptySlice(p.Locks), emptySlice(p.RecentEvents)
	return json.Marshal(p)
}

// UnmarshalJSON reads the shared shape.
func (s *Status) UnmarshalJSON(b []byte) error {
	type plain Status
	err := json.Unmarshal(b, (*plain)(s))
	s.Tasks, s.ActiveTasks = nilMap(s.Tasks), nilSlice(s.ActiveTasks)
	s.Locks, s.RecentEvents = nilSlice(s.Locks), nilSlice(s.RecentEvents)
	return err
}

// MarshalJSON writes the batch's result in the shared shape.
func (r BatchResult) MarshalJSON() ([]byte, error) {
	type plain BatchResult
	p := plain(r)
	p.Results, p.Events = emptySlice(p.Results), emptySlice(p.Events)
	return json.Marshal(p)
}

// UnmarshalJSON reads the shared shape.
func (r *BatchResult) UnmarshalJSON(b []byte) error {
	type plain BatchResult
	err := json.Unmarshal(b, (*plain)(r))
	r.Results, r.Events = nilSlice(r.Results), nilSlice(r.Events)
	return err
}

// MarshalJSON writes a stream item: {"event":…,"head":n,"progress":false}
// for an event, {"head":n,"progress":true} for a heartbeat.
func (m Message) MarshalJSON() ([]byte, error) {
	w := messageJSON{Progress: m.Progress, Head: m.Head}
	if !m.Progress {
		w.Event = &m.Event
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads the shape MarshalJSON writes.
func (m *Message) UnmarshalJSON(b []byte) error {
	var w messageJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = Message{Progress: w.Progress, Head: w.Head}
	if w.Event != nil {
		m.Event = *w.Event
	}
	return nil
}

type messageJSON struct {
	Event    *Event `json:"event,omitempty"`
	Head     int64  `json:"head"`
	Progress bool   `json:"progress"`
}

// utc converts times to UTC in place, so that every face writes the same
// bytes for the same instant.
func utc(ts ...*time.Time) {
	for _, t := range ts {
		*t = t.UTC()
	}
}

func emptySlice[S ~[]E, E any](s S) S {
	if s == nil {
		return S{}
	}
	return s
}

func nilSlice[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

func emptyMap[M ~map[K]V, K comparable, V any](m M) M {
	if m == nil {
		return M{}
	}
	return m
}

func nilMap[M ~map[K]V, K comparable, V any](m M) M {
	if len(m) == 0 {
		return nil
	}
	return m
}

// MarshalJSON writes the error's details in the shared shape.
func (e LockedError) MarshalJSON() ([]byte, error) {
	type plain LockedError
	p := plain(e)
	utc(&p.ExpiresAt)
	return json.Marshal(p)
}
