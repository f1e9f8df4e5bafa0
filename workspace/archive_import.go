package workspace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Import loads an archive written by Export into the store behind ws,
// keeping every id, version, timestamp, token and event seq. The store must
// be empty (no events, no records): anything else is an *InvalidError and
// nothing is written. Every record is validated before the store sees it.
//
// A small archive is written in one transaction. A large one is written in
// several (about 64 MiB of content or 10,000 records each); if one of them
// fails, the error says so, and the store must be emptied before importing
// again. Nobody else should write to the store while it is imported.
func Import(ctx context.Context, ws Workspace, r io.Reader, opts ArchiveOptions) (ArchiveStats, error) {
	h, err := handleOf("Import", ws)
	if err != nil {
		return ArchiveStats{}, err
	}
	im := &importer{
		h:       h,
		p:       &progress{opts: opts},
		rd:      bufio.NewReaderSize(r, 1<<16),
		maxLine: h.opts.MaxArtifactSize/3*4 + 8<<20,
		tasks:   map[string]bool{},
		live:    map[string]string{},
	}
	if err := im.run(ctx); err != nil {
		if im.committed > 0 {
			err = fmt.Errorf("import stopped after %d records were committed; the store holds a partial import: empty it before importing again: %w", im.committed, err)
		}
		return im.p.stats, wrapErr("import", err)
	}
	im.p.done()
	return im.p.stats, nil
}

// Import stages, in archive order.
const (
	stageHeader = iota
	stageTasks
	stageNotes
	stageArtifacts
	stageLeases
	stageLog
	stageEvents
	stageEnd
)

// How much one import transaction writes at most (variables for tests).
var (
	importChunkRecords = 10000
	importChunkBytes   = int64(64 << 20)
)

type importer struct {
	h       *handle
	p       *progress
	rd      *bufio.Reader
	maxLine int64
	line    int
	stage   int

	// What a chunk will write, in order: record writes, then events.
	ops       []func(ctx context.Context, tx Tx) error
	events    []Event
	bytes     int64
	flushes   int
	committed int64 // records in committed chunks

	lastTask string
	tasks    map[string]bool
	lastNote [2]string
	lastRes  string

	// The artifact being read, and the live names of the finished ones.
	art     *Artifact
	artDone bool // its artifact_deleted was read
	blobs   map[string]int64
	lastArt string
	live    map[string]string // name -> id
	floor   int64
	head    int64
	nextSeq int64
	sawEnd  bool
}

func (im *importer) errf(format string, args ...any) error {
	return invalid("archive", "line %d: %s", im.line, fmt.Sprintf(format, args...))
}

// next reads one line (without its newline); io.EOF at the end.
func (im *importer) next() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := im.rd.ReadSlice('\n')
		buf = append(buf, chunk...)
		if int64(len(buf)) > im.maxLine {
			return nil, im.errf("longer than %d bytes (is ws_max_artifact_size lower than the exporting store's?)", im.maxLine)
		}
		switch {
		case err == nil:
			im.line++
			return bytes.TrimSuffix(buf, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			im.line++
			return buf, nil
		default:
			return nil, err
		}
	}
}

func (im *importer) decode(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return im.errf("%v", err)
	}
	return nil
}

func (im *importer) run(ctx context.Context) error {
	for {
		line, err := im.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if im.sawEnd {
			return im.errf("data after the end record")
		}
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &kind); err != nil {
			return im.errf("not a JSON object: %v", err)
		}
		if im.line == 1 && kind.Type != recHeader {
			return im.errf("not an agentspace archive: the first line must be the header")
		}
		if err := im.record(ctx, kind.Type, line); err != nil {
			return err
		}
	}
	if im.line == 0 {
		return invalid("archive", "is empty")
	}
	if !im.sawEnd {
		return invalid("archive", "ends at line %d without its end record: it is truncated", im.line)
	}
	if err := im.flush(ctx); err != nil {
		return err
	}
	return im.finish(ctx)
}

// enter moves to stage s; records must come in the archive's order.
func (im *importer) enter(s int, what string) error {
	if s < im.stage {
		return im.errf("%s record out of order", what)
	}
	if im.stage == stageArtifacts && s > stageArtifacts {
		im.closeArtifact()
	}
	if s > stageLog && im.stage < stageLog {
		return im.errf("%s record before the log record", what)
	}
	im.stage = s
	return nil
}

func (im *importer) record(ctx context.Context, typ string, line []byte) error {
	switch typ {
	case recHeader:
		if im.line != 1 {
			return im.errf("a second header")
		}
		var r archiveHeader
		if err := im.decode(line, &r); err != nil {
			return err
		}
		if r.Format != ArchiveFormat {
			return im.errf("format %q is not %q", r.Format, ArchiveFormat)
		}
		if r.Version != ArchiveVersion {
			return im.errf("archive version %d: this code reads version %d", r.Version, ArchiveVersion)
		}
		im.stage = stageTasks
		return nil
	case recTask:
		var r archiveTask
		if err := im.enterAndDecode(stageTasks, typ, line, &r); err != nil {
			return err
		}
		return im.task(ctx, r)
	case recNote:
		var r archiveNote
		if err := im.enterAndDecode(stageNotes, typ, line, &r); err != nil {
			return err
		}
		return im.note(ctx, r)
	case recArtifact:
		var r archiveArtifact
		if err := im.enterAndDecode(stageArtifacts, typ, line, &r); err != nil {
			return err
		}
		return im.artifact(ctx, r)
	case recDeleted:
		var r archiveDeleted
		if err := im.enterAndDecode(stageArtifacts, typ, line, &r); err != nil {
			return err
		}
		return im.deleted(ctx, r)
	case recLease:
		var r archiveLease
		if err := im.enterAndDecode(stageLeases, typ, line, &r); err != nil {
			return err
		}
		return im.lease(ctx, r)
	case recLog:
		var r archiveLog
		if im.stage >= stageLog {
			return im.errf("a second log record")
		}
		if err := im.enterAndDecode(stageLog, typ, line, &r); err != nil {
			return err
		}
		if r.Floor < 1 || r.Head < r.Floor-1 {
			return im.errf("log floor %d and head %d are inconsistent", r.Floor, r.Head)
		}
		im.floor, im.head, im.nextSeq = r.Floor, r.Head, r.Floor
		return nil
	case recEvent:
		var r archiveEvent
		if err := im.enterAndDecode(stageEvents, typ, line, &r); err != nil {
			return err
		}
		return im.event(ctx, r)
	case recEnd:
		var r archiveEnd
		if im.stage < stageLog {
			return im.errf("end record before the log record")
		}
		if err := im.enterAndDecode(stageEnd, typ, line, &r); err != nil {
			return err
		}
		if im.nextSeq != im.head+1 {
			return im.errf("the log ends at seq %d but its head is %d", im.nextSeq-1, im.head)
		}
		got := im.p.stats
		got.ContentBytes, r.Counts.ContentBytes = 0, 0
		if got != r.Counts {
			return im.errf("the archive holds %+v but its end record counts %+v", got, r.Counts)
		}
		im.sawEnd = true
		return nil
	}
	return im.errf("unknown record type %q", typ)
}

func (im *importer) enterAndDecode(stage int, typ string, line []byte, v any) error {
	if err := im.enter(stage, typ); err != nil {
		return err
	}
	return im.decode(line, v)
}

// add queues a record write, committing a chunk when it is big enough.
func (im *importer) add(ctx context.Context, size int64, op func(ctx context.Context, tx Tx) error) error {
	im.ops = append(im.ops, op)
	im.bytes += size
	im.p.tick()
	return im.maybeFlush(ctx)
}

func (im *importer) maybeFlush(ctx context.Context) error {
	if len(im.ops)+len(im.events) >= importChunkRecords || im.bytes >= importChunkBytes {
		return im.flush(ctx)
	}
	return nil
}

// flush commits the queued writes in one transaction; the first one also
// checks that the store is empty.
func (im *importer) flush(ctx context.Context) error {
	if len(im.ops) == 0 && len(im.events) == 0 && im.flushes > 0 {
		return nil
	}
	first := im.flushes == 0
	err := im.h.st.Update(ctx, func(tx Tx) error {
		if first {
			if err := checkEmpty(ctx, tx); err != nil {
				return err
			}
		}
		for _, op := range im.ops {
			if err := op(ctx, tx); err != nil {
				return err
			}
		}
		if len(im.events) > 0 {
			if _, err := tx.AppendEvents(ctx, im.events); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	im.flushes++
	im.committed += int64(len(im.ops) + len(im.events))
	im.ops, im.events, im.bytes = nil, nil, 0
	return nil
}

func checkEmpty(ctx context.Context, tx Tx) error {
	head, err := tx.Head(ctx)
	if err != nil {
		return err
	}
	c, err := tx.Counts(ctx)
	if err != nil {
		return err
	}
	tasks := 0
	for _, n := range c.Tasks {
		tasks += n
	}
	leases, err := tx.ListLeases(ctx, tx.Now())
	if err != nil {
		return err
	}
	if head > 0 || c.Artifacts > 0 || c.Notes > 0 || tasks > 0 || len(leases) > 0 {
		return invalid("store", "is not empty (event head %d, %d artifacts, %d tasks, %d notes): import only into a new, empty store", head, c.Artifacts, tasks, c.Notes)
	}
	return nil
}

// finish records the log's floor and checks that the store's log is the archive's.
func (im *importer) finish(ctx context.Context) error {
	return im.h.st.Update(ctx, func(tx Tx) error {
		if im.floor > 1 {
			if err := tx.CompactEvents(ctx, im.floor); err != nil {
				return err
			}
		}
		head, err := tx.Head(ctx)
		if err != nil {
			return err
		}
		floor, err := tx.Floor(ctx)
		if err != nil {
			return err
		}
		if head != im.head || floor != im.floor {
			return fmt.Errorf("after import the log has floor %d and head %d, the archive's has floor %d and head %d", floor, head, im.floor, im.head)
		}
		return nil
	})
}

// time parses a record's time field.
func (im *importer) time(field, s string, required bool) (time.Time, error) {
	if required && s == "" {
		return time.Time{}, im.errf("%s is missing", field)
	}
	t, err := parseArchiveTime(field, s)
	if err != nil {
		return time.Time{}, im.errf("%v", err)
	}
	return t, nil
}

// checkRecord returns the first validation error, placed at the line.
func (im *importer) checkRecord(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return im.errf("%v", err)
		}
	}
	return nil
}

func checkVersionFrom1(v int64) error {
	if v < 1 {
		return invalid("version", "%d: versions start at 1", v)
	}
	return nil
}

func (im *importer) task(ctx context.Context, r archiveTask) error {
	if err := im.checkRecord(
		checkID("task id", r.ID),
		checkKey("title", r.Title, MaxTitleLen),
		checkText("description", r.Description, MaxTextLen),
		checkOptionalID("parent id", r.ParentID),
		checkLabels("labels", r.Labels),
		checkPriority(r.Priority),
		checkVersionFrom1(r.Version),
	); err != nil {
		return err
	}
	if !r.Status.Valid() {
		return im.errf("task %s: status %q is not a task status", r.ID, r.Status)
	}
	if r.ID <= im.lastTask {
		return im.errf("task %s is out of order or repeated (tasks come by id)", r.ID)
	}
	if r.ParentID != "" && !im.tasks[r.ParentID] {
		return im.errf("task %s: parent %s is not earlier in the archive", r.ID, r.ParentID)
	}
	for _, d := range r.DependsOn {
		if err := checkID("depends on", d); err != nil {
			return im.errf("%v", err)
		}
		if !im.tasks[d] {
			return im.errf("task %s: dependency %s is not earlier in the archive", r.ID, d)
		}
	}
	t := Task{
		ID: r.ID, Title: r.Title, Description: r.Description, Status: r.Status, Assignee: r.Assignee,
		ParentID: r.ParentID, DependsOn: r.DependsOn, Priority: r.Priority, Labels: r.Labels,
		Attempts: r.Attempts, Version: r.Version, CreatedBy: r.CreatedBy, UpdatedBy: r.UpdatedBy,
	}
	if r.Result != nil {
		t.Result = TaskResult{Summary: r.Result.Summary, Artifacts: r.Result.Artifacts}
	}
	var err error
	if t.LeaseExpiresAt, err = im.time("lease_expires_at", r.LeaseExpiresAt, false); err != nil {
		return err
	}
	if t.CreatedAt, err = im.time("created_at", r.CreatedAt, true); err != nil {
		return err
	}
	if t.UpdatedAt, err = im.time("updated_at", r.UpdatedAt, true); err != nil {
		return err
	}
	im.lastTask = r.ID
	im.tasks[r.ID] = true
	im.p.stats.Tasks++
	return im.add(ctx, 0, func(ctx context.Context, tx Tx) error { return tx.PutTask(ctx, t) })
}

func (im *importer) note(ctx context.Context, r archiveNote) error {
	if err := im.checkRecord(
		checkKind("note kind", r.Kind),
		checkKey("note key", r.Key, MaxKeyLen),
		checkText("note title", r.Title, MaxTitleLen),
		checkText("note body", r.Body, MaxTextLen),
		checkVersionFrom1(r.Version),
	); err != nil {
		return err
	}
	k := [2]string{r.Kind, r.Key}
	if im.p.stats.Notes > 0 && (k[0] < im.lastNote[0] || k[0] == im.lastNote[0] && k[1] <= im.lastNote[1]) {
		return im.errf("note %s/%s is out of order or repeated (notes come by kind, then key)", r.Kind, r.Key)
	}
	n := Note{Kind: r.Kind, Key: r.Key, Title: r.Title, Body: r.Body, Author: r.Author, Version: r.Version, UpdatedBy: r.UpdatedBy}
	var err error
	if n.CreatedAt, err = im.time("created_at", r.CreatedAt, true); err != nil {
		return err
	}
	if n.UpdatedAt, err = im.time("updated_at", r.UpdatedAt, true); err != nil {
		return err
	}
	im.lastNote = k
	im.p.stats.Notes++
	return im.add(ctx, 0, func(ctx context.Context, tx Tx) error { return tx.PutNote(ctx, n) })
}

// closeArtifact ends the artifact being read: a live one holds its name.
func (im *importer) closeArtifact() {
	if im.art != nil && !im.artDone {
		im.live[im.art.Name] = im.art.ID
	}
	im.art, im.artDone, im.blobs = nil, false, nil
}

func (im *importer) artifact(ctx context.Context, r archiveArtifact) error {
	if err := im.checkRecord(
		checkID("artifact id", r.ID),
		checkName("name", r.Name),
		checkKind("kind", r.Kind),
		checkContentType(r.ContentType),
		checkLabels("labels", r.Labels),
		checkOptionalID("task id", r.TaskID),
		checkVersionFrom1(r.Version),
	); err != nil {
		return err
	}
	if im.art == nil || im.art.ID != r.ID {
		// A new artifact: versions start at 1, ids ascend, names of live ones are unique.
		im.closeArtifact()
		if r.ID <= im.lastArt {
			return im.errf("artifact %s is out of order or repeated (artifacts come by id)", r.ID)
		}
		if r.Version != 1 {
			return im.errf("artifact %s starts at version %d, not 1", r.ID, r.Version)
		}
		if other, ok := im.live[r.Name]; ok {
			return im.errf("artifact %s: name %q is already held by live artifact %s", r.ID, r.Name, other)
		}
		im.lastArt = r.ID
		im.blobs = map[string]int64{}
		im.p.stats.Artifacts++
	} else {
		if im.artDone {
			return im.errf("artifact %s has a version after its deletion", r.ID)
		}
		if r.Version != im.art.Version+1 {
			return im.errf("artifact %s: version %d follows version %d", r.ID, r.Version, im.art.Version)
		}
		if r.Name != im.art.Name {
			return im.errf("artifact %s: version %d is named %q, version 1 %q", r.ID, r.Version, r.Name, im.art.Name)
		}
	}
	if r.TaskID != "" && !im.tasks[r.TaskID] {
		return im.errf("artifact %s: task %s is not in the archive", r.ID, r.TaskID)
	}
	if len(r.SHA256) != 64 {
		return im.errf("artifact %s version %d: sha256 %q is not a hex SHA-256", r.ID, r.Version, truncate(r.SHA256, 80))
	}
	var content []byte
	size, stored := im.blobs[r.SHA256]
	switch {
	case r.Content != nil:
		b, err := base64.StdEncoding.DecodeString(*r.Content)
		if err != nil {
			return im.errf("artifact %s version %d: content is not base64: %v", r.ID, r.Version, err)
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != r.SHA256 || int64(len(b)) != r.Size {
			return im.errf("artifact %s version %d: content does not match its sha256 and size", r.ID, r.Version)
		}
		if int64(len(b)) > im.h.opts.MaxArtifactSize {
			return tooLarge("content", "archive line %d: artifact %q version %d is %d bytes, over this store's limit of %d (raise ws_max_artifact_size)", im.line, r.Name, r.Version, len(b), im.h.opts.MaxArtifactSize)
		}
		if !stored {
			content = b
			im.blobs[r.SHA256] = r.Size
			im.p.stats.ContentBytes += r.Size
		}
	case !stored:
		return im.errf("artifact %s version %d: no content for sha256 %s", r.ID, r.Version, r.SHA256)
	case size != r.Size:
		return im.errf("artifact %s version %d: size %d differs from %d for the same sha256", r.ID, r.Version, r.Size, size)
	}
	a := Artifact{
		ID: r.ID, Name: r.Name, Kind: r.Kind, Owner: r.Owner, Version: r.Version, ContentType: r.ContentType,
		SHA256: r.SHA256, Size: r.Size, Labels: r.Labels, TaskID: r.TaskID, CreatedBy: r.CreatedBy, UpdatedBy: r.UpdatedBy,
	}
	var err error
	if a.CreatedAt, err = im.time("created_at", r.CreatedAt, true); err != nil {
		return err
	}
	if a.UpdatedAt, err = im.time("updated_at", r.UpdatedAt, true); err != nil {
		return err
	}
	im.art = &a
	im.p.stats.Versions++
	return im.add(ctx, int64(len(content)), func(ctx context.Context, tx Tx) error { return tx.PutArtifact(ctx, a, content) })
}

func (im *importer) deleted(ctx context.Context, r archiveDeleted) error {
	if im.art == nil || im.art.ID != r.ID || im.artDone {
		return im.errf("artifact_deleted %s does not follow that artifact's versions", truncate(r.ID, 64))
	}
	im.artDone = true
	im.p.stats.DeletedArtifacts++
	id := r.ID
	return im.add(ctx, 0, func(ctx context.Context, tx Tx) error { return tx.DeleteArtifact(ctx, id) })
}

func (im *importer) lease(ctx context.Context, r archiveLease) error {
	if err := im.checkRecord(checkResource(r.Resource)); err != nil {
		return err
	}
	if r.Owner != "" {
		if err := im.checkRecord(checkActor(r.Owner)); err != nil {
			return err
		}
	}
	if r.Token < 1 {
		return im.errf("lease %q: token %d is not at least 1", r.Resource, r.Token)
	}
	if im.p.stats.Leases > 0 && r.Resource <= im.lastRes {
		return im.errf("lease %q is out of order or repeated (leases come by resource)", r.Resource)
	}
	l := Lease{Resource: r.Resource, Owner: r.Owner, Token: r.Token}
	var err error
	if l.AcquiredAt, err = im.time("acquired_at", r.AcquiredAt, false); err != nil {
		return err
	}
	if l.ExpiresAt, err = im.time("expires_at", r.ExpiresAt, false); err != nil {
		return err
	}
	im.lastRes = r.Resource
	im.p.stats.Leases++
	return im.add(ctx, 0, func(ctx context.Context, tx Tx) error { return tx.PutLease(ctx, l) })
}

func (im *importer) event(ctx context.Context, r archiveEvent) error {
	if r.Seq != im.nextSeq {
		return im.errf("event seq %d where %d was due: the log must be gap-free from its floor", r.Seq, im.nextSeq)
	}
	if r.Seq > im.head {
		return im.errf("event seq %d is past the log's head %d", r.Seq, im.head)
	}
	if err := im.checkRecord(
		checkKey("event type", r.Event, MaxKindLen),
		checkText("actor", r.Actor, MaxActorLen),
		checkText("subject kind", r.Subject.Kind, MaxKindLen),
		checkText("subject id", r.Subject.ID, MaxNameLen+MaxKeyLen),
		checkText("subject name", r.Subject.Name, MaxNameLen+MaxTitleLen),
		checkText("message", r.Message, MaxTextLen),
	); err != nil {
		return err
	}
	t, err := im.time("time", r.Time, true)
	if err != nil {
		return err
	}
	im.events = append(im.events, Event{
		Seq: r.Seq, Time: t, Actor: r.Actor, Type: r.Event, Subject: Subject(r.Subject), Version: r.Version, Message: r.Message,
	})
	im.nextSeq++
	im.p.stats.Events++
	im.p.tick()
	return im.maybeFlush(ctx)
}
