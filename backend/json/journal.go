package jsonstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// The journal (DIR/.journal) makes a transaction atomic and durable. Commit
// writes the whole transaction there as one checksummed record and fsyncs
// it: that is the commit point. Only then are the tree's files replaced and
// the events appended to events.ndjson; then the journal is emptied. A
// writer killed half-way leaves a complete record behind, and whoever takes
// the lock next replays it (every step is idempotent) before doing anything
// else. A record cut short by the crash fails its checksum: it was never
// acknowledged, nothing of it was applied, and it is dropped.

const journalFile = ".journal"

var journalMagic = []byte("agentspace-journal 1 ")

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// record is one committed transaction, as the files it changes.
type record struct {
	// Writes replace whole files (record JSON, blobs), paths relative to DIR.
	Writes []fileWrite `json:"writes,omitempty"`
	// Appends add lines to append-only files (artifacts' versions), after Writes.
	Appends []fileAppend `json:"appends,omitempty"`
	// Removes delete files (deleted notes, expired idempotency keys).
	Removes []string `json:"removes,omitempty"`
	// Mirror updates the readable copies under artifacts/, after Writes.
	Mirror []mirrorOp `json:"mirror,omitempty"`
	// Events are appended to events.ndjson; a replay skips those already there.
	Events []eventJSON `json:"events,omitempty"`
	// Floor, when set, compacts the log below it (after Events).
	Floor int64 `json:"floor,omitempty"`
}

type fileWrite struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

// fileAppend writes Data at offset At of Path and cuts the file there: At
// is the file's size when the transaction committed, so applying it again
// (a replay) gives the same file.
type fileAppend struct {
	Path string `json:"path"`
	At   int64  `json:"at"`
	Data []byte `json:"data"`
}

// mirrorOp writes artifacts/NAME from a blob, or removes it (Blob empty).
type mirrorOp struct {
	Name string `json:"name"`
	Blob string `json:"blob,omitempty"`
}

// encodeJournal frames rec: a header line with the payload's length and
// CRC-32C, then the payload.
func encodeJournal(rec *record) ([]byte, error) {
	payload, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(journalMagic)
	fmt.Fprintf(&b, "%d %08x\n", len(payload), crc32.Checksum(payload, crcTable))
	b.Write(payload)
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// errTorn reports a journal record that was not written completely.
var errTorn = errors.New("incomplete record")

// decodeJournal parses a journal. An empty one gives (nil, nil); one whose
// record is incomplete or fails its checksum gives errTorn (wrapped).
func decodeJournal(data []byte) (*record, error) {
	if len(data) == 0 {
		return nil, nil
	}
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 || !bytes.HasPrefix(data, journalMagic) {
		return nil, fmt.Errorf("%s: %w: bad header", journalFile, errTorn)
	}
	fields := strings.Fields(string(data[len(journalMagic):nl]))
	if len(fields) != 2 {
		return nil, fmt.Errorf("%s: %w: bad header", journalFile, errTorn)
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%s: %w: bad length", journalFile, errTorn)
	}
	sum, err := strconv.ParseUint(fields[1], 16, 32)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: bad checksum", journalFile, errTorn)
	}
	payload := data[nl+1:]
	if len(payload) < n+1 || payload[n] != '\n' {
		return nil, fmt.Errorf("%s: %w: %d of %d bytes", journalFile, errTorn, len(payload), n+1)
	}
	payload = payload[:n]
	if crc32.Checksum(payload, crcTable) != uint32(sum) {
		return nil, fmt.Errorf("%s: %w: checksum mismatch", journalFile, errTorn)
	}
	rec := &record{}
	if err := decodeJSON(journalFile, 2, payload, rec); err != nil {
		return nil, err
	}
	for _, w := range rec.Writes {
		if !safeRelPath(w.Path) {
			return nil, corrupt(journalFile, "write to unsafe path %q", w.Path)
		}
	}
	for _, a := range rec.Appends {
		if !safeRelPath(a.Path) || a.At < 0 {
			return nil, corrupt(journalFile, "append to unsafe path %q at %d", a.Path, a.At)
		}
	}
	for _, p := range rec.Removes {
		if !safeRelPath(p) {
			return nil, corrupt(journalFile, "remove of unsafe path %q", p)
		}
	}
	for _, m := range rec.Mirror {
		if !safeRelPath(m.Name) || (m.Blob != "" && !safeRelPath(m.Blob)) {
			return nil, corrupt(journalFile, "mirror of unsafe path %q", m.Name)
		}
	}
	return rec, nil
}

// safeRelPath reports whether p is a clean relative path with no ".."
// segments: one that cannot leave the directory it is joined to.
func safeRelPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, '\\') || strings.ContainsRune(p, 0) {
		return false
	}
	if path.Clean(p) != p {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." || seg == "." {
			return false
		}
	}
	return true
}

// writeJournal writes rec as the journal's only content and fsyncs it: the
// transaction's commit point.
func (s *store) writeJournal(rec *record) error {
	b, err := encodeJournal(rec)
	if err != nil {
		return err
	}
	if err := injectedFault(journalFile); err != nil {
		_, _ = s.journal.WriteAt(b[:len(b)/2], 0)
		return fmt.Errorf("write %s: %w", journalFile, err)
	}
	if _, err := s.journal.WriteAt(b, 0); err != nil {
		return fmt.Errorf("write %s: %w", journalFile, err)
	}
	if err := s.journal.Truncate(int64(len(b))); err != nil {
		return fmt.Errorf("truncate %s: %w", journalFile, err)
	}
	if err := s.journal.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", journalFile, err)
	}
	return nil
}

// clearJournal marks the applied transaction done. It needs no fsync: a
// record that reappears after a power cut is replayed again, harmlessly.
func (s *store) clearJournal() error { return s.journal.Truncate(0) }

func (s *store) journalPending() (bool, error) {
	fi, err := s.journal.Stat()
	if err != nil {
		return false, err
	}
	return fi.Size() > 0, nil
}

// apply makes rec's changes to the tree. diskLast is the last seq already
// in events.ndjson: older events of rec are not appended again.
func (s *store) apply(rec *record, diskLast int64) error {
	dirs := dirSet{}
	for _, w := range rec.Writes {
		if err := writeAtomic(s.root, w.Path, w.Data, dirs); err != nil {
			return err
		}
	}
	for _, a := range rec.Appends {
		if err := appendAt(s.root, a.Path, a.At, a.Data, dirs); err != nil {
			return err
		}
	}
	for _, p := range rec.Removes {
		if err := removeFile(s.root, p, dirs); err != nil {
			return err
		}
	}
	if err := syncDirs(s.root, dirs); err != nil {
		return err
	}
	s.applyMirror(rec.Mirror)
	if err := s.appendEventLines(rec.Events, diskLast); err != nil {
		return err
	}
	if rec.Floor > 0 {
		if err := s.compactFile(rec.Floor); err != nil {
			return err
		}
	}
	return nil
}

// applyMirror updates the readable copies of artifacts' heads. The copies
// are a view (content is read from blobs/), so a copy that cannot be placed
// (a name that is also a directory of another artifact's name, a planted
// symbolic link) is skipped with a warning rather than failing the write.
func (s *store) applyMirror(ops []mirrorOp) {
	dirs := dirSet{}
	for _, m := range ops {
		if m.Blob != "" {
			continue
		}
		if err := removeFile(s.mirror, m.Name, dirs); err != nil {
			s.log.Warn("json store: removing an artifact's readable copy failed", "name", m.Name, "err", err)
			continue
		}
		// Drop directories the removal emptied (Remove fails on a non-empty one).
		for d := path.Dir(m.Name); d != "."; d = path.Dir(d) {
			if s.mirror.Remove(d) != nil {
				break
			}
			dirs[path.Dir(d)] = struct{}{}
		}
	}
	for _, m := range ops {
		if m.Blob == "" {
			continue
		}
		data, err := s.root.ReadFile(m.Blob)
		if err == nil {
			err = writeAtomic(s.mirror, m.Name, data, dirs)
		}
		if err != nil {
			s.log.Warn("json store: the readable copy of an artifact was not written", "name", m.Name, "err", err)
		}
	}
	if err := syncDirs(s.mirror, dirs); err != nil {
		s.log.Warn("json store: fsync of artifacts/ failed", "err", err)
	}
}

// appendEventLines appends the events with seq > diskLast and fsyncs the log.
func (s *store) appendEventLines(evs []eventJSON, diskLast int64) error {
	var b bytes.Buffer
	last := diskLast
	for _, e := range evs {
		if e.Seq <= diskLast {
			continue
		}
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
		last = e.Seq
	}
	if b.Len() == 0 {
		return nil
	}
	f, err := s.root.OpenFile(eventsFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, fileMode)
	if err != nil {
		return err
	}
	if err = injectedFault(eventsFile); err != nil {
		_, _ = f.Write(b.Bytes()[:b.Len()/2])
	} else {
		_, err = f.Write(b.Bytes())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append to %s: %w", eventsFile, err)
	}
	s.diskLast = last
	return nil
}

// compactFile rewrites events.ndjson without the events below floor, and
// records the floor first, so that a crash in between loses nothing.
func (s *store) compactFile(floor int64) error {
	dirs := dirSet{}
	fb, err := marshalFile(floorJSON{Floor: floor})
	if err != nil {
		return err
	}
	if err := writeAtomic(s.root, floorFile, fb, dirs); err != nil {
		return err
	}
	data, err := s.root.ReadFile(eventsFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var kept bytes.Buffer
	n := 0
	for line := range bytes.Lines(data) {
		n++
		ev, err := decodeEventLine(eventsFile, n, line)
		if err != nil {
			return err
		}
		if ev.Seq >= floor {
			kept.Write(line)
		}
	}
	if err := writeAtomic(s.root, eventsFile, kept.Bytes(), dirs); err != nil {
		return err
	}
	return syncDirs(s.root, dirs)
}

// recoverJournal finishes (or drops) a transaction whose writer died. It
// runs under the exclusive lock.
func (s *store) recoverJournal() error {
	if _, err := s.journal.Seek(0, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(s.journal)
	if err != nil {
		return fmt.Errorf("read %s: %w", journalFile, err)
	}
	rec, err := decodeJournal(data)
	if errors.Is(err, errTorn) {
		s.log.Info("json store: dropping an unacknowledged, incomplete transaction", "detail", err)
		return s.clearJournal()
	}
	if err != nil || rec == nil {
		return err
	}
	s.log.Info("json store: replaying a committed transaction whose writer stopped")
	last, err := s.repairLogTail()
	if err != nil {
		return err
	}
	if err := s.apply(rec, last); err != nil {
		return fmt.Errorf("replay %s: %w", journalFile, err)
	}
	swept := map[string]bool{}
	sweep := func(root, dir string) {
		if !swept[root+":"+dir] {
			swept[root+":"+dir] = true
			if root == "m" {
				sweepTemps(s.mirror, dir)
			} else {
				sweepTemps(s.root, dir)
			}
		}
	}
	sweep("r", ".")
	for _, w := range rec.Writes {
		sweep("r", path.Dir(w.Path))
	}
	for _, a := range rec.Appends {
		sweep("r", path.Dir(a.Path))
	}
	for _, m := range rec.Mirror {
		sweep("m", path.Dir(m.Name))
	}
	if err := s.clearJournal(); err != nil {
		return err
	}
	s.st = nil // reload everything
	return nil
}

// repairLogTail cuts a partial last line (a crashed append) off
// events.ndjson and returns the last seq it holds. It is only called while
// a committed record is pending, which covers that line.
func (s *store) repairLogTail() (int64, error) {
	data, err := s.root.ReadFile(eventsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	if end < len(data) {
		f, err := s.root.OpenFile(eventsFile, os.O_WRONLY, fileMode)
		if err != nil {
			return 0, err
		}
		err = f.Truncate(int64(end))
		if err == nil {
			err = f.Sync()
		}
		_ = f.Close()
		if err != nil {
			return 0, err
		}
	}
	data = data[:end]
	if end == 0 {
		return 0, nil
	}
	start := bytes.LastIndexByte(data[:end-1], '\n') + 1
	ev, err := decodeEventLine(eventsFile, lineOf(data, int64(start)), data[start:end])
	if err != nil {
		return 0, err
	}
	return ev.Seq, nil
}
