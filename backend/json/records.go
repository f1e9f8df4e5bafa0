package jsonstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// The on-disk forms of records: snake_case JSON, meant to be read by people
// and diffed by git. They are converted to and from the workspace types at
// the edge, so the API can change without changing the files.

// CorruptError reports a file of the tree that cannot be decoded: which
// file, which line (1-based; 0 when unknown) and why.
type CorruptError struct {
	File string
	Line int
	Err  error
}

// Error says which file and line are damaged, and how.
func (e *CorruptError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("json store: %s:%d: corrupt: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("json store: %s: corrupt: %v", e.File, e.Err)
}

// Unwrap returns the decoding error.
func (e *CorruptError) Unwrap() error { return e.Err }

// lineOf returns the 1-based line of byte offset off in data.
func lineOf(data []byte, off int64) int {
	if off < 0 {
		return 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return 1 + bytes.Count(data[:off], []byte{'\n'})
}

// decodeJSON decodes data (the content of file, starting at line first)
// into v, rejecting unknown fields and trailing data, and reports errors
// with the file and line.
func decodeJSON(file string, first int, data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("trailing data after the JSON value")
	}
	if err == nil {
		return nil
	}
	line := 0
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line = lineOf(data, se.Offset)
	case errors.As(err, &te):
		line = lineOf(data, te.Offset)
	default:
		line = lineOf(data, dec.InputOffset())
	}
	if line > 0 {
		line += first - 1
	}
	return &CorruptError{File: file, Line: line, Err: err}
}

func corrupt(file string, format string, args ...any) error {
	return &CorruptError{File: file, Err: fmt.Errorf(format, args...)}
}

type versionJSON struct {
	Version int64 `json:"version"`
	// Removed marks a version retention removed: its line stays, so that
	// line n is version n, with nothing else on it.
	Removed     bool              `json:"removed,omitempty"`
	Name        string            `json:"name"`
	Kind        string            `json:"kind"`
	Owner       string            `json:"owner"`
	ContentType string            `json:"content_type"`
	SHA256      string            `json:"sha256"`
	Size        int64             `json:"size"`
	Labels      map[string]string `json:"labels,omitempty"`
	TaskID      string            `json:"task_id,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	CreatedBy   string            `json:"created_by"`
	UpdatedAt   time.Time         `json:"updated_at"`
	UpdatedBy   string            `json:"updated_by"`
}

// artifactFile is meta/artifacts/ID.json: the artifact's name, deleted
// flag and its head version's metadata. It stays small whatever the number
// of versions; the versions are in meta/versions/ID.ndjson.
type artifactFile struct {
	ID      string      `json:"id"`
	Name    string      `json:"name"`
	Deleted bool        `json:"deleted,omitempty"`
	Head    versionJSON `json:"head"`
}

// artRec is an artifact in memory: every version, oldest first.
type artRec struct {
	id       string
	name     string
	deleted  bool
	versions []workspace.Artifact
}

func (r *artRec) head() workspace.Artifact { return r.versions[len(r.versions)-1] }

func (r *artRec) clone() *artRec {
	c := *r
	c.versions = append([]workspace.Artifact(nil), r.versions...)
	return &c
}

// removed reports whether a is the place of a version retention removed
// (every stored version has a content hash).
func removed(a workspace.Artifact) bool { return a.SHA256 == "" }

func toVersionJSON(a workspace.Artifact) versionJSON {
	if removed(a) {
		return versionJSON{Version: a.Version, Removed: true}
	}
	return versionJSON{
		Version: a.Version, Name: a.Name, Kind: a.Kind, Owner: a.Owner, ContentType: a.ContentType,
		SHA256: a.SHA256, Size: a.Size, Labels: a.Labels, TaskID: a.TaskID,
		CreatedAt: a.CreatedAt, CreatedBy: a.CreatedBy, UpdatedAt: a.UpdatedAt, UpdatedBy: a.UpdatedBy,
	}
}

func fromVersionJSON(id string, v versionJSON) workspace.Artifact {
	return workspace.Artifact{
		ID: id, Name: v.Name, Kind: v.Kind, Owner: v.Owner, Version: v.Version,
		ContentType: v.ContentType, SHA256: v.SHA256, Size: v.Size, Labels: v.Labels, TaskID: v.TaskID,
		CreatedAt: v.CreatedAt.UTC(), CreatedBy: v.CreatedBy, UpdatedAt: v.UpdatedAt.UTC(), UpdatedBy: v.UpdatedBy,
	}
}

// encodeArtifact returns r's head file (meta/artifacts/ID.json).
func encodeArtifact(r *artRec) ([]byte, error) {
	return marshalFile(artifactFile{ID: r.id, Name: r.name, Deleted: r.deleted, Head: toVersionJSON(r.head())})
}

// decodeArtifact decodes a head file into a record holding only the head
// version; the caller completes it from the versions file.
func decodeArtifact(file string, data []byte) (*artRec, error) {
	var f artifactFile
	if err := decodeJSON(file, 1, data, &f); err != nil {
		return nil, err
	}
	if f.ID == "" || f.Name == "" || f.Head.Version < 1 {
		return nil, corrupt(file, "an artifact needs an id, a name and a head version")
	}
	return &artRec{id: f.ID, name: f.Name, deleted: f.Deleted, versions: []workspace.Artifact{fromVersionJSON(f.ID, f.Head)}}, nil
}

// encodeVersions returns the lines of meta/versions/ID.ndjson for vs.
func encodeVersions(vs []workspace.Artifact) ([]byte, error) {
	var b bytes.Buffer
	for _, a := range vs {
		line, err := json.Marshal(toVersionJSON(a))
		if err != nil {
			return nil, err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// parseVersions decodes lines of a versions file (data starts at line
// first, which must hold version first): complete lines, versions in order.
func parseVersions(file, id string, data []byte, first int) ([]workspace.Artifact, error) {
	var out []workspace.Artifact
	n := first - 1
	for line := range bytes.Lines(data) {
		n++
		if line[len(line)-1] != '\n' {
			return nil, &CorruptError{File: file, Line: n, Err: errors.New("incomplete last line")}
		}
		var v versionJSON
		if err := decodeJSON(file, n, line, &v); err != nil {
			return nil, err
		}
		if v.Version != int64(n) {
			return nil, &CorruptError{File: file, Line: n, Err: fmt.Errorf("version %d on line %d", v.Version, n)}
		}
		out = append(out, fromVersionJSON(id, v))
	}
	return out, nil
}

// withVersions completes r (decoded from its head file) with the versions
// read from its versions file, which must end at the head's version.
func withVersions(file string, r *artRec, vs []workspace.Artifact) (*artRec, error) {
	want := r.head().Version
	if int64(len(vs)) != want {
		return nil, corrupt(file, "holds %d versions, but the head of artifact %s is version %d", len(vs), r.id, want)
	}
	r.versions = vs
	return r, nil
}

// taskJSON is tasks/ID.json.
type taskJSON struct {
	ID             string               `json:"id"`
	Title          string               `json:"title"`
	Description    string               `json:"description,omitempty"`
	Status         workspace.TaskStatus `json:"status"`
	Assignee       string               `json:"assignee,omitempty"`
	ParentID       string               `json:"parent_id,omitempty"`
	DependsOn      []string             `json:"depends_on,omitempty"`
	Areas          []string             `json:"areas,omitempty"`
	Priority       int                  `json:"priority"`
	Labels         map[string]string    `json:"labels,omitempty"`
	Result         workspace.TaskResult `json:"result,omitzero"`
	Attempts       int                  `json:"attempts"`
	LeaseExpiresAt time.Time            `json:"lease_expires_at,omitzero"`
	Version        int64                `json:"version"`
	CreatedAt      time.Time            `json:"created_at"`
	CreatedBy      string               `json:"created_by"`
	UpdatedAt      time.Time            `json:"updated_at"`
	UpdatedBy      string               `json:"updated_by"`
}

func encodeTask(t workspace.Task) ([]byte, error) {
	return marshalFile(taskJSON{
		ID: t.ID, Title: t.Title, Description: t.Description, Status: t.Status, Assignee: t.Assignee,
		ParentID: t.ParentID, DependsOn: t.DependsOn, Areas: t.Areas, Priority: t.Priority, Labels: t.Labels, Result: t.Result,
		Attempts: t.Attempts, LeaseExpiresAt: t.LeaseExpiresAt, Version: t.Version,
		CreatedAt: t.CreatedAt, CreatedBy: t.CreatedBy, UpdatedAt: t.UpdatedAt, UpdatedBy: t.UpdatedBy,
	})
}

func decodeTask(file string, data []byte) (workspace.Task, error) {
	var j taskJSON
	if err := decodeJSON(file, 1, data, &j); err != nil {
		return workspace.Task{}, err
	}
	if j.ID == "" || !j.Status.Valid() {
		return workspace.Task{}, corrupt(file, "a task needs an id and a valid status")
	}
	return workspace.Task{
		ID: j.ID, Title: j.Title, Description: j.Description, Status: j.Status, Assignee: j.Assignee,
		ParentID: j.ParentID, DependsOn: j.DependsOn, Areas: j.Areas, Priority: j.Priority, Labels: j.Labels, Result: j.Result,
		Attempts: j.Attempts, LeaseExpiresAt: utc(j.LeaseExpiresAt), Version: j.Version,
		CreatedAt: j.CreatedAt.UTC(), CreatedBy: j.CreatedBy, UpdatedAt: j.UpdatedAt.UTC(), UpdatedBy: j.UpdatedBy,
	}, nil
}

// noteJSON is notes/KIND/KEY.json.
type noteJSON struct {
	Kind      string    `json:"kind"`
	Key       string    `json:"key"`
	Title     string    `json:"title,omitempty"`
	Body      string    `json:"body,omitempty"`
	Author    string    `json:"author"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	UpdatedBy string    `json:"updated_by"`
}

func encodeNote(n workspace.Note) ([]byte, error) {
	return marshalFile(noteJSON{
		Kind: n.Kind, Key: n.Key, Title: n.Title, Body: n.Body, Author: n.Author, Version: n.Version,
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, UpdatedBy: n.UpdatedBy,
	})
}

func decodeNote(file string, data []byte) (workspace.Note, error) {
	var j noteJSON
	if err := decodeJSON(file, 1, data, &j); err != nil {
		return workspace.Note{}, err
	}
	if j.Kind == "" || j.Key == "" {
		return workspace.Note{}, corrupt(file, "a note needs a kind and a key")
	}
	return workspace.Note{
		Kind: j.Kind, Key: j.Key, Title: j.Title, Body: j.Body, Author: j.Author, Version: j.Version,
		CreatedAt: j.CreatedAt.UTC(), UpdatedAt: j.UpdatedAt.UTC(), UpdatedBy: j.UpdatedBy,
	}, nil
}

// leaseJSON is leases/RESOURCE.json.
type leaseJSON struct {
	Resource   string    `json:"resource"`
	Owner      string    `json:"owner,omitempty"`
	Token      int64     `json:"token"`
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	TTL        int64     `json:"ttl_ns,omitempty"` // Lease.TTL; absent in files written before it was recorded
}

func encodeLease(l workspace.Lease) ([]byte, error) {
	return marshalFile(leaseJSON{Resource: l.Resource, Owner: l.Owner, Token: l.Token, AcquiredAt: l.AcquiredAt, ExpiresAt: l.ExpiresAt, TTL: int64(l.TTL)})
}

func decodeLease(file string, data []byte) (workspace.Lease, error) {
	var j leaseJSON
	if err := decodeJSON(file, 1, data, &j); err != nil {
		return workspace.Lease{}, err
	}
	if j.Resource == "" {
		return workspace.Lease{}, corrupt(file, "a lease needs a resource")
	}
	return workspace.Lease{Resource: j.Resource, Owner: j.Owner, Token: j.Token, AcquiredAt: utc(j.AcquiredAt), ExpiresAt: utc(j.ExpiresAt), TTL: time.Duration(j.TTL)}, nil
}

// idemJSON is idempotency/HASH.json.
type idemJSON struct {
	Key     string          `json:"key"`
	Expires time.Time       `json:"expires"`
	Result  json.RawMessage `json:"result"`
}

// eventJSON is one line of events.ndjson.
type eventJSON struct {
	Seq     int64       `json:"seq"`
	Time    time.Time   `json:"time"`
	Actor   string      `json:"actor"`
	Type    string      `json:"type"`
	Subject subjectJSON `json:"subject"`
	Version int64       `json:"version,omitempty"`
	Message string      `json:"message,omitempty"`
	// Hash is the event's link in the log's hash chain, hex (see
	// driver.ChainHash); absent on events written before the chain.
	Hash string `json:"hash,omitempty"`
}

type subjectJSON struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

func toEventJSON(e workspace.Event, hash []byte) eventJSON {
	return eventJSON{Seq: e.Seq, Time: e.Time, Actor: e.Actor, Type: e.Type,
		Subject: subjectJSON{Kind: e.Subject.Kind, ID: e.Subject.ID, Name: e.Subject.Name}, Version: e.Version, Message: e.Message,
		Hash: hex.EncodeToString(hash)}
}

func fromEventJSON(j eventJSON) workspace.Event {
	return workspace.Event{Seq: j.Seq, Time: j.Time.UTC(), Actor: j.Actor, Type: j.Type,
		Subject: workspace.Subject{Kind: j.Subject.Kind, ID: j.Subject.ID, Name: j.Subject.Name}, Version: j.Version, Message: j.Message}
}

// encodeEventLine returns the event as one line of the log, newline included.
func encodeEventLine(e workspace.Event, hash []byte) ([]byte, error) {
	b, err := json.Marshal(toEventJSON(e, hash))
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeEventLine decodes line number n of file.
func decodeEventLine(file string, n int, line []byte) (workspace.Event, error) {
	e, _, err := decodeChainedLine(file, n, line)
	return e, err
}

// decodeChainedLine decodes line number n of file, and its hash (nil if
// it has none).
func decodeChainedLine(file string, n int, line []byte) (workspace.Event, []byte, error) {
	var j eventJSON
	if err := decodeJSON(file, n, line, &j); err != nil {
		return workspace.Event{}, nil, err
	}
	if j.Seq < 1 || j.Type == "" {
		return workspace.Event{}, nil, &CorruptError{File: file, Line: n, Err: errors.New("an event needs a positive seq and a type")}
	}
	hash, err := decodeHash(j.Hash)
	if err != nil {
		return workspace.Event{}, nil, &CorruptError{File: file, Line: n, Err: err}
	}
	return fromEventJSON(j), hash, nil
}

// decodeHash decodes a chain hash written as hex ("" is none).
func decodeHash(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	h, err := hex.DecodeString(s)
	if err != nil || len(h) != sha256.Size {
		return nil, fmt.Errorf("hash %.80q is not %d hex bytes", s, sha256.Size)
	}
	return h, nil
}

// marshalFile is the indented JSON of a record file, newline-terminated so
// that cat and git diff show it well.
func marshalFile(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}
