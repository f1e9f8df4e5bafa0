package engine

import (
	"encoding/base64"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

type archiveHeader struct {
	Type    string `json:"type"`
	Format  string `json:"format"`
	Version int    `json:"version"`
}

type archiveLog struct {
	Type  string `json:"type"`
	Floor int64  `json:"floor"`
	Head  int64  `json:"head"`
	// FloorHash is the hash the event at the floor chains from (hex).
	FloorHash string `json:"floor_hash,omitempty"`
}

type archiveDeleted struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// archiveOut is a record line as Export writes it: its type and the one
// record it carries, in the shared JSON shape.
type archiveOut struct {
	Type     string              `json:"type"`
	Task     *workspace.Task     `json:"task,omitempty"`
	Note     *workspace.Note     `json:"note,omitempty"`
	Artifact *workspace.Artifact `json:"artifact,omitempty"`
	Lease    *workspace.Lease    `json:"lease,omitempty"`
	Event    *workspace.Event    `json:"event,omitempty"`
	// Hash is an event's link in the log's hash chain (hex).
	Hash string `json:"hash,omitempty"`
}

// archiveIn is a record line as Import reads it. Its types have no
// UnmarshalJSON of their own, so unknown fields are refused at every level
// but the task result's.
type archiveIn struct {
	Type     string           `json:"type"`
	Task     *taskFields      `json:"task"`
	Note     *workspace.Note  `json:"note"`
	Artifact *artifactJSON    `json:"artifact"`
	Lease    *workspace.Lease `json:"lease"`
	Event    *workspace.Event `json:"event"`
	Hash     string           `json:"hash"`
}

type archiveEnd struct {
	Type   string                 `json:"type"`
	Counts workspace.ArchiveStats `json:"counts"`
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

// taskFields is workspace.Task without its methods, so that the archive
// decodes it strictly.
type taskFields workspace.Task

// artifactFields is workspace.Artifact without its methods, so that
// artifactJSON can embed it and add the content fields after the metadata.
type artifactFields workspace.Artifact

// artifactJSON is an artifact in the shared JSON shape, decoded strictly.
type artifactJSON struct {
	artifactFields
	Content         *string `json:"content,omitempty"`
	ContentEncoding string  `json:"content_encoding,omitempty"`
}

// artifact decodes the content as workspace.Artifact's UnmarshalJSON does;
// a bad encoding is an *InvalidError.
func (w *artifactJSON) artifact() (workspace.Artifact, error) {
	a := workspace.Artifact(w.artifactFields)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	switch {
	case w.Content == nil:
		if w.ContentEncoding != "" {
			return a, invalid("content_encoding", "%q without content", truncate(w.ContentEncoding, 32))
		}
	case w.ContentEncoding == "" || w.ContentEncoding == "utf-8":
		a.Content = []byte(*w.Content)
	case w.ContentEncoding == "base64":
		c, err := base64.StdEncoding.DecodeString(*w.Content)
		if err != nil {
			return a, invalid("content", "not base64: %v", err)
		}
		a.Content = c
	default:
		return a, invalid("content_encoding", "%q is neither \"utf-8\" nor \"base64\"", truncate(w.ContentEncoding, 32))
	}
	return a, nil
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

// progress calls the callback every opts.ProgressEvery records.
type progress struct {
	opts  workspace.ArchiveOptions
	stats workspace.ArchiveStats
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
