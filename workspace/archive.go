package workspace

import (
	"time"
)

// ArchiveFormat and ArchiveVersion name the archive format in its header.
//
// The archive (Export, Import) is a whole workspace as NDJSON, one record
// per line, for moving a team between backends (json -> sqlite -> postgres)
// and for backups. Format "agentspace-archive", version 1. Every line is a JSON object whose
// "type" says what it is; lines come in this order:
//
//	{"type":"header","format":"agentspace-archive","version":1}
//	{"type":"task",...}              every task, by id (so dependencies and parents come first)
//	{"type":"note",...}              every note, by kind then key
//	{"type":"artifact",...}          every version of every artifact: artifacts by id
//	                                 (creation order), versions ascending; "content"
//	                                 (base64) on the first version with each distinct sha256
//	{"type":"artifact_deleted","id":...}  right after the last version of a deleted artifact
//	{"type":"lease",...}             every lease row, live, expired or released, by resource
//	                                 (released rows keep the newest token, so tokens keep growing)
//	{"type":"log","floor":F,"head":H}
//	{"type":"event","seq":...}       every event from the floor to the head, by seq
//	{"type":"end","counts":{...}}    record counts: a truncated archive is refused
//
// Times are RFC 3339 in UTC with up to microsecond precision; empty fields
// are left out. Export is deterministic: importing an archive into an empty
// store of any backend and exporting it again gives the same bytes.
//
// Idempotency keys are not archived (they are short-lived retry guards).
// Deleted artifacts and released lease rows are found through the event
// log; those whose every event was compacted away are not exported.
const (
	ArchiveFormat  = "agentspace-archive"
	ArchiveVersion = 1
)

// ArchiveOptions tune Export and Import.
type ArchiveOptions struct {
	// Progress, if set, is called every ProgressEvery records and once at
	// the end, with the counts so far.
	Progress func(ArchiveStats)
	// ProgressEvery is how many records pass between Progress calls (default 1000).
	ProgressEvery int
}

// ArchiveStats counts the records of an archive.
type ArchiveStats struct {
	Tasks            int64 `json:"tasks"`
	Notes            int64 `json:"notes"`
	Artifacts        int64 `json:"artifacts"`         // artifacts, live or deleted
	Versions         int64 `json:"versions"`          // artifact versions
	DeletedArtifacts int64 `json:"deleted_artifacts"` // artifacts that are deleted
	Leases           int64 `json:"leases"`
	Events           int64 `json:"events"`
	ContentBytes     int64 `json:"content_bytes"` // bytes of content stored (each distinct blob once)
}

// Records is the number of record lines counted.
func (s ArchiveStats) Records() int64 {
	return s.Tasks + s.Notes + s.Versions + s.DeletedArtifacts + s.Leases + s.Events
}

type archiveHeader struct {
	Type    string `json:"type"`
	Format  string `json:"format"`
	Version int    `json:"version"`
}

type archiveResult struct {
	Summary   string   `json:"summary,omitempty"`
	Artifacts []string `json:"artifacts,omitempty"`
}

type archiveTask struct {
	Type           string            `json:"type"`
	ID             string            `json:"id"`
	Title          string            `json:"title"`
	Description    string            `json:"description,omitempty"`
	Status         TaskStatus        `json:"status"`
	Assignee       string            `json:"assignee,omitempty"`
	ParentID       string            `json:"parent_id,omitempty"`
	DependsOn      []string          `json:"depends_on,omitempty"`
	Priority       int               `json:"priority,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Result         *archiveResult    `json:"result,omitempty"`
	Attempts       int               `json:"attempts,omitempty"`
	LeaseExpiresAt string            `json:"lease_expires_at,omitempty"`
	Version        int64             `json:"version"`
	CreatedAt      string            `json:"created_at"`
	CreatedBy      string            `json:"created_by"`
	UpdatedAt      string            `json:"updated_at"`
	UpdatedBy      string            `json:"updated_by"`
}

type archiveNote struct {
	Type      string `json:"type"`
	Kind      string `json:"kind"`
	Key       string `json:"key"`
	Title     string `json:"title,omitempty"`
	Body      string `json:"body,omitempty"`
	Author    string `json:"author"`
	Version   int64  `json:"version"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	UpdatedBy string `json:"updated_by"`
}

type archiveArtifact struct {
	Type        string            `json:"type"`
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Version     int64             `json:"version"`
	Kind        string            `json:"kind"`
	Owner       string            `json:"owner"`
	ContentType string            `json:"content_type"`
	SHA256      string            `json:"sha256"`
	Size        int64             `json:"size"`
	Labels      map[string]string `json:"labels,omitempty"`
	TaskID      string            `json:"task_id,omitempty"`
	CreatedAt   string            `json:"created_at"`
	CreatedBy   string            `json:"created_by"`
	UpdatedAt   string            `json:"updated_at"`
	UpdatedBy   string            `json:"updated_by"`
	// Content is base64, present on the first version with this SHA256.
	Content *string `json:"content,omitempty"`
}

type archiveDeleted struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type archiveLease struct {
	Type       string `json:"type"`
	Resource   string `json:"resource"`
	Owner      string `json:"owner,omitempty"`
	Token      int64  `json:"token"`
	AcquiredAt string `json:"acquired_at,omitempty"`
	ExpiresAt  string `json:"expires_at,omitempty"`
}

type archiveLog struct {
	Type  string `json:"type"`
	Floor int64  `json:"floor"`
	Head  int64  `json:"head"`
}

type archiveSubject struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

type archiveEvent struct {
	Type    string         `json:"type"`
	Seq     int64          `json:"seq"`
	Time    string         `json:"time"`
	Actor   string         `json:"actor"`
	Event   string         `json:"event"`
	Subject archiveSubject `json:"subject"`
	Version int64          `json:"version,omitempty"`
	Message string         `json:"message,omitempty"`
}

type archiveEnd struct {
	Type   string       `json:"type"`
	Counts ArchiveStats `json:"counts"`
}

// archive record types.
const (
	recHeader   = "header"
	recTask     = "task"
	recNote     = "note"
	recArtifact = "artifact"
	recDeleted  = "artifact_deleted"
	recLease    = "lease"
	recLog      = "log"
	recEvent    = "event"
	recEnd      = "end"
)

func archiveTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func parseArchiveTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalid(field, "%q is not an RFC 3339 time", truncate(s, 64))
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

func handleOf(op string, ws Workspace) (*handle, error) {
	h, ok := ws.(*handle)
	if !ok || h == nil {
		return nil, invalid("workspace", "%s needs a Workspace made by Open or New, not %T", op, ws)
	}
	return h, h.alive()
}

// progress calls the callback every opts.ProgressEvery records.
type progress struct {
	opts  ArchiveOptions
	stats ArchiveStats
	last  int64
}

func (p *progress) tick() {
	if p.opts.Progress == nil {
		return
	}
	every := int64(p.opts.ProgressEvery)
	if every <= 0 {
		every = 1000
	}
	if n := p.stats.Records(); n-p.last >= every {
		p.last = n
		p.opts.Progress(p.stats)
	}
}

func (p *progress) done() {
	if p.opts.Progress != nil {
		p.opts.Progress(p.stats)
	}
}
