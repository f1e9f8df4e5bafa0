package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Import loads an archive into h's empty store, as Workspace.Import
// documents: every record validated first, in one transaction or, for a
// large archive, in several (importChunkRecords, importChunkBytes).
func (h *handle) Import(ctx context.Context, r io.Reader, opts workspace.ArchiveOptions) (workspace.ImportReport, error) {
	if err := h.alive(); err != nil {
		return workspace.ImportReport{}, err
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
		return im.report(), wrapErr("import", err)
	}
	im.p.done()
	return im.report(), nil
}

func (im *importer) report() workspace.ImportReport {
	return workspace.ImportReport{ArchiveStats: im.p.stats, Unchained: im.unchained, SkippedSealed: im.skippedSealed}
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
	version int // the archive's format version, from its header

	// What a chunk will write, in order: record writes, then events.
	ops       []func(ctx context.Context, tx driver.Tx) error
	events    []workspace.Event
	bytes     int64
	flushes   int
	committed int64 // records in committed chunks

	lastTask string
	tasks    map[string]bool
	lastNote [2]string
	lastRes  string

	// The artifact being read, and the live names of the finished ones.
	art     *workspace.Artifact
	artDone bool // its artifact_deleted was read
	blobs   map[string]int64
	lastArt string
	live    map[string]string // name -> id
	floor   int64
	head    int64
	nextSeq int64
	sawEnd  bool
	chain   importChain

	// What the report adds to the counts: events without their hash,
	// sealed notes left out.
	unchained, skippedSealed int64
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
		if r.Format != workspace.ArchiveFormat {
			return im.errf("format %q is not %q", r.Format, workspace.ArchiveFormat)
		}
		if r.Version < 1 || r.Version > workspace.ArchiveVersion {
			return im.errf("archive version %d: this code reads versions 1 to %d", r.Version, workspace.ArchiveVersion)
		}
		im.version = r.Version
		im.stage = stageTasks
		return nil
	case recTask, recNote, recArtifact:
		if err := im.enter(recordStage[typ], typ); err != nil {
			return err
		}
		return im.payload(ctx, typ, line)
	case recDeleted:
		var r archiveDeleted
		if err := im.enterAndDecode(stageArtifacts, typ, line, &r); err != nil {
			return err
		}
		return im.deleted(ctx, r)
	case recLease:
		if err := im.enter(stageLeases, typ); err != nil {
			return err
		}
		return im.payload(ctx, typ, line)
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
		return im.chain.start(im, r.FloorHash)
	case recEvent:
		if err := im.enter(stageEvents, typ); err != nil {
			return err
		}
		return im.payload(ctx, typ, line)
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
		got.Notes += im.skippedSealed // the archive holds them
		if got != r.Counts {
			return im.errf("the archive holds %+v but its end record counts %+v", got, r.Counts)
		}
		im.sawEnd = true
		return nil
	}
	return im.errf("unknown record type %q", typ)
}

var recordStage = map[string]int{recTask: stageTasks, recNote: stageNotes, recArtifact: stageArtifacts}

// payload reads a task, note, artifact, lease or event line and passes
// its record on.
func (im *importer) payload(ctx context.Context, typ string, line []byte) error {
	if im.version == 1 {
		return im.payloadV1(ctx, typ, line)
	}
	var r archiveIn
	if err := im.decode(line, &r); err != nil {
		return err
	}
	carried, want := 0, false
	for _, c := range []struct {
		typ string
		set bool
	}{{recTask, r.Task != nil}, {recNote, r.Note != nil}, {recArtifact, r.Artifact != nil}, {recLease, r.Lease != nil}, {recEvent, r.Event != nil}} {
		if c.set {
			carried++
			want = want || c.typ == typ
		}
	}
	if !want || carried != 1 {
		return im.errf("a %s record carries one %q object and no other", typ, typ)
	}
	switch typ {
	case recTask:
		t := workspace.Task(*r.Task)
		if len(t.DependsOn) == 0 {
			t.DependsOn = nil
		}
		if len(t.Areas) == 0 {
			t.Areas = nil
		}
		if len(t.Labels) == 0 {
			t.Labels = nil
		}
		return im.task(ctx, t)
	case recNote:
		return im.note(ctx, *r.Note)
	case recArtifact:
		a, err := r.Artifact.artifact()
		if err != nil {
			return im.errf("artifact %s version %d: %v", truncate(a.ID, 64), a.Version, err)
		}
		return im.artifact(ctx, a)
	case recLease:
		return im.lease(ctx, *r.Lease)
	default:
		return im.event(ctx, *r.Event, r.Hash)
	}
}

// payloadV1 reads a version 1 record line.
func (im *importer) payloadV1(ctx context.Context, typ string, line []byte) error {
	switch typ {
	case recTask:
		t, err := decodeV1(im, line, v1Task.task)
		if err != nil {
			return err
		}
		return im.task(ctx, t)
	case recNote:
		n, err := decodeV1(im, line, v1Note.note)
		if err != nil {
			return err
		}
		return im.note(ctx, n)
	case recArtifact:
		a, err := decodeV1(im, line, v1Artifact.artifact)
		if err != nil {
			return err
		}
		return im.artifact(ctx, a)
	case recLease:
		l, err := decodeV1(im, line, v1Lease.lease)
		if err != nil {
			return err
		}
		return im.lease(ctx, l)
	default:
		ev, err := decodeV1(im, line, v1Event.event)
		if err != nil {
			return err
		}
		return im.event(ctx, ev, "")
	}
}

// decodeV1 decodes a version 1 line into its record type R and converts it.
func decodeV1[R, T any](im *importer, line []byte, conv func(R) (T, error)) (T, error) {
	var r R
	if err := im.decode(line, &r); err != nil {
		var zero T
		return zero, err
	}
	t, err := conv(r)
	if err != nil {
		return t, im.errf("%v", err)
	}
	return t, nil
}

func (im *importer) enterAndDecode(stage int, typ string, line []byte, v any) error {
	if err := im.enter(stage, typ); err != nil {
		return err
	}
	return im.decode(line, v)
}

// add queues a record write, committing a chunk when it is big enough.
func (im *importer) add(ctx context.Context, size int64, op func(ctx context.Context, tx driver.Tx) error) error {
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
	err := im.h.st.Update(ctx, func(tx driver.Tx) error {
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
			if err := im.chain.setBase(ctx, tx, im.events[0].Seq == im.floor); err != nil {
				return err
			}
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

func checkEmpty(ctx context.Context, tx driver.Tx) error {
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
	return im.h.st.Update(ctx, func(tx driver.Tx) error {
		if err := im.chain.setBase(ctx, tx, im.head < im.floor); err != nil {
			return err
		}
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
