package workspace

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// The archive: a whole workspace as NDJSON, one record per line, for moving
// a team between backends (json -> sqlite -> postgres) and for backups.
//
// Format "agentspace-archive", version 1. Every line is a JSON object whose
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

// ArchiveFormat and ArchiveVersion identify the archive format in its header.
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

const archivePage = 1000

// Export writes the whole workspace to w as an archive (see the format
// above), read from one consistent snapshot. It returns what it wrote.
func Export(ctx context.Context, ws Workspace, w io.Writer, opts ArchiveOptions) (ArchiveStats, error) {
	h, err := handleOf("Export", ws)
	if err != nil {
		return ArchiveStats{}, err
	}
	p := &progress{opts: opts}
	err = h.view(ctx, "export", func(tx ReadTx) error {
		p.stats = ArchiveStats{}
		bw := bufio.NewWriterSize(w, 1<<16)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(archiveHeader{Type: recHeader, Format: ArchiveFormat, Version: ArchiveVersion}); err != nil {
			return err
		}
		if err := exportTasks(ctx, tx, enc, p); err != nil {
			return err
		}
		if err := exportNotes(ctx, tx, enc, p); err != nil {
			return err
		}
		floor, err := tx.Floor(ctx)
		if err != nil {
			return err
		}
		head, err := tx.Head(ctx)
		if err != nil {
			return err
		}
		// The log names the artifacts and lock resources that no live
		// listing shows any more: deleted artifacts, released leases.
		ids, resources := map[string]bool{}, map[string]bool{}
		if err := eachEvent(ctx, tx, floor, func(ev Event) error {
			switch ev.Subject.Kind {
			case SubjectArtifact:
				if ev.Subject.ID != "" {
					ids[ev.Subject.ID] = false
				}
			case SubjectLock:
				resources[ev.Subject.ID] = true
			}
			return nil
		}); err != nil {
			return err
		}
		if err := exportArtifacts(ctx, tx, enc, p, ids); err != nil {
			return err
		}
		if err := exportLeases(ctx, tx, enc, p, resources); err != nil {
			return err
		}
		if err := enc.Encode(archiveLog{Type: recLog, Floor: floor, Head: head}); err != nil {
			return err
		}
		if err := eachEvent(ctx, tx, floor, func(ev Event) error {
			p.stats.Events++
			p.tick()
			return enc.Encode(archiveEvent{
				Type: recEvent, Seq: ev.Seq, Time: archiveTime(ev.Time), Actor: ev.Actor, Event: ev.Type,
				Subject: archiveSubject(ev.Subject), Version: ev.Version, Message: ev.Message,
			})
		}); err != nil {
			return err
		}
		if err := enc.Encode(archiveEnd{Type: recEnd, Counts: p.stats}); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return p.stats, err
	}
	p.done()
	return p.stats, nil
}

func eachEvent(ctx context.Context, tx ReadTx, floor int64, fn func(Event) error) error {
	after := max(floor-1, 0)
	for {
		evs, err := tx.Events(ctx, EventQuery{AfterSeq: after, Limit: archivePage})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return err
			}
			after = ev.Seq
		}
		if len(evs) < archivePage {
			return nil
		}
	}
}

func exportTasks(ctx context.Context, tx ReadTx, enc *json.Encoder, p *progress) error {
	f := TaskFilter{Limit: archivePage}
	for {
		ts, err := tx.ListTasks(ctx, f)
		if err != nil {
			return err
		}
		for _, t := range ts {
			rec := archiveTask{
				Type: recTask, ID: t.ID, Title: t.Title, Description: t.Description, Status: t.Status,
				Assignee: t.Assignee, ParentID: t.ParentID, DependsOn: t.DependsOn, Priority: t.Priority,
				Labels: t.Labels, Attempts: t.Attempts, LeaseExpiresAt: archiveTime(t.LeaseExpiresAt),
				Version: t.Version, CreatedAt: archiveTime(t.CreatedAt), CreatedBy: t.CreatedBy,
				UpdatedAt: archiveTime(t.UpdatedAt), UpdatedBy: t.UpdatedBy,
			}
			if t.Result.Summary != "" || len(t.Result.Artifacts) > 0 {
				rec.Result = &archiveResult{Summary: t.Result.Summary, Artifacts: t.Result.Artifacts}
			}
			if err := enc.Encode(rec); err != nil {
				return err
			}
			p.stats.Tasks++
			p.tick()
		}
		if len(ts) < archivePage {
			return nil
		}
		f.After = ts[len(ts)-1].ID
	}
}

func exportNotes(ctx context.Context, tx ReadTx, enc *json.Encoder, p *progress) error {
	q := NoteQuery{Limit: archivePage}
	for {
		ns, err := tx.ListNotes(ctx, q)
		if err != nil {
			return err
		}
		for _, n := range ns {
			if err := enc.Encode(archiveNote{
				Type: recNote, Kind: n.Kind, Key: n.Key, Title: n.Title, Body: n.Body, Author: n.Author,
				Version: n.Version, CreatedAt: archiveTime(n.CreatedAt), UpdatedAt: archiveTime(n.UpdatedAt),
				UpdatedBy: n.UpdatedBy,
			}); err != nil {
				return err
			}
			p.stats.Notes++
			p.tick()
		}
		if len(ns) < archivePage {
			return nil
		}
		q.AfterKind, q.AfterKey = ns[len(ns)-1].Kind, ns[len(ns)-1].Key
	}
}

// exportArtifacts writes every version of the artifacts in ids (true:
// live) plus every live one, by id.
func exportArtifacts(ctx context.Context, tx ReadTx, enc *json.Encoder, p *progress, ids map[string]bool) error {
	f := ArtifactFilter{Limit: archivePage}
	for {
		as, err := tx.ListArtifacts(ctx, f)
		if err != nil {
			return err
		}
		for _, a := range as {
			ids[a.ID] = true
		}
		if len(as) < archivePage {
			break
		}
		f.After = as[len(as)-1].Name
	}
	order := make([]string, 0, len(ids))
	for id := range ids {
		order = append(order, id)
	}
	slices.Sort(order)
	for _, id := range order {
		versions, err := tx.ArtifactVersions(ctx, id)
		if errors.Is(err, ErrNotFound) || (err == nil && len(versions) == 0) {
			continue // named by a conflict event only, or removed by retention
		}
		if err != nil {
			return fmt.Errorf("artifact %s versions: %w", id, err)
		}
		p.stats.Artifacts++
		seen := map[string]bool{}
		for _, v := range versions {
			rec := archiveArtifact{
				Type: recArtifact, ID: id, Name: v.Name, Version: v.Version, Kind: v.Kind, Owner: v.Owner,
				ContentType: v.ContentType, SHA256: v.SHA256, Size: v.Size, Labels: v.Labels, TaskID: v.TaskID,
				CreatedAt: archiveTime(v.CreatedAt), CreatedBy: v.CreatedBy,
				UpdatedAt: archiveTime(v.UpdatedAt), UpdatedBy: v.UpdatedBy,
			}
			if !seen[v.SHA256] {
				seen[v.SHA256] = true
				content, err := tx.Content(ctx, id, v.SHA256)
				if err != nil {
					return fmt.Errorf("artifact %s version %d content: %w", id, v.Version, err)
				}
				s := base64.StdEncoding.EncodeToString(content)
				rec.Content = &s
				p.stats.ContentBytes += int64(len(content))
			}
			if err := enc.Encode(rec); err != nil {
				return err
			}
			p.stats.Versions++
			p.tick()
		}
		if !ids[id] {
			if err := enc.Encode(archiveDeleted{Type: recDeleted, ID: id}); err != nil {
				return err
			}
			p.stats.DeletedArtifacts++
			p.tick()
		}
	}
	return nil
}

func exportLeases(ctx context.Context, tx ReadTx, enc *json.Encoder, p *progress, resources map[string]bool) error {
	live, err := tx.ListLeases(ctx, tx.Now())
	if err != nil {
		return err
	}
	for _, l := range live {
		resources[l.Resource] = true
	}
	order := make([]string, 0, len(resources))
	for r := range resources {
		order = append(order, r)
	}
	slices.Sort(order)
	for _, r := range order {
		l, err := tx.Lease(ctx, r)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("lease %q: %w", r, err)
		}
		if err := enc.Encode(archiveLease{
			Type: recLease, Resource: l.Resource, Owner: l.Owner, Token: l.Token,
			AcquiredAt: archiveTime(l.AcquiredAt), ExpiresAt: archiveTime(l.ExpiresAt),
		}); err != nil {
			return err
		}
		p.stats.Leases++
		p.tick()
	}
	return nil
}
