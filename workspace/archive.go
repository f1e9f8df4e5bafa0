package workspace

import (
	"time"
)

// ArchiveFormat and ArchiveVersion name the archive format in its header.
//
// The archive (Export, Import) is a whole workspace as NDJSON, one record
// per line, for moving a team between backends (json -> sqlite -> postgres)
// and for backups. Every line is a JSON object whose "type" says what it
// is; a record line carries one record under its own key, in the JSON
// shape every face shares (docs/schema/workspace.schema.json). Lines come
// in this order:
//
//	{"type":"header","format":"agentspace-archive","version":2}
//	{"type":"task","task":{...}}          every task, by id (so dependencies and parents come first)
//	{"type":"note","note":{...}}          every note, by kind then key
//	{"type":"artifact","artifact":{...}}  every version of every artifact: artifacts by id
//	                                      (creation order), versions ascending; "content" only
//	                                      on the first version with each distinct sha256
//	{"type":"artifact_deleted","id":...}  right after the last version of a deleted artifact
//	{"type":"lease","lease":{...}}        every lease row, live, expired or released, by resource
//	                                      (released rows keep the newest token, so tokens keep growing)
//	{"type":"log","floor":F,"head":H}
//	{"type":"event","event":{...}}        every event from the floor to the head, by seq
//	{"type":"end","counts":{...}}         record counts: a truncated archive is refused
//
// Times are RFC 3339 in UTC with up to microsecond precision. Export is
// deterministic: importing an archive into an empty store of any backend
// and exporting it again gives the same bytes. Import also reads version 1,
// whose records kept their fields next to "type" (an event's type in
// "event") and their content in base64.
//
// Idempotency keys are not archived (they are short-lived retry guards).
// Deleted artifacts and released lease rows are found through the event
// log; those whose every event was compacted away are not exported.
const (
	ArchiveFormat  = "agentspace-archive"
	ArchiveVersion = 2
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

type archiveLog struct {
	Type  string `json:"type"`
	Floor int64  `json:"floor"`
	Head  int64  `json:"head"`
}

type archiveDeleted struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// archiveOut is a record line as Export writes it: its type and the one
// record it carries, in the shared JSON shape.
type archiveOut struct {
	Type     string    `json:"type"`
	Task     *Task     `json:"task,omitempty"`
	Note     *Note     `json:"note,omitempty"`
	Artifact *Artifact `json:"artifact,omitempty"`
	Lease    *Lease    `json:"lease,omitempty"`
	Event    *Event    `json:"event,omitempty"`
}

// archiveIn is a record line as Import reads it. Its types have no
// UnmarshalJSON of their own, so unknown fields are refused at every level
// but the task result's.
type archiveIn struct {
	Type     string        `json:"type"`
	Task     *taskFields   `json:"task"`
	Note     *Note         `json:"note"`
	Artifact *artifactJSON `json:"artifact"`
	Lease    *Lease        `json:"lease"`
	Event    *Event        `json:"event"`
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
