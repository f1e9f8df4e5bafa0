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
	"sync"
)

// The journal (DIR/.journal) makes transactions atomic and durable. It is
// a write-ahead log: Commit appends the whole transaction there as one
// checksummed entry and fsyncs it, which is the commit point. Only then are
// the tree's files replaced and the events appended to events.ndjson,
// without fsyncs, and a marker line is appended after the entry to say it
// was applied. The files become durable at a checkpoint: once the journal
// has grown past checkpointBytes (and when a handle closes), one sync of
// the file system (or an fsync of every file the entries name) is followed
// by emptying the journal. So a commit costs one fsync, not one per file.
//
// Recovery replays the journal's complete entries in order: every step is
// idempotent, and replaying them all gives the files the state of the last
// one. A writer killed after its commit point leaves an entry without the
// marker, which the next lock holder finds at the journal's end; it then
// replays every entry and checkpoints. Opening a handle does the same
// whatever the journal's end says, since after a power cut the files of
// applied entries may not have reached the disk. An entry cut short by a
// crash fails its checksum: it was never acknowledged, nothing of it was
// applied, and it is dropped.

const journalFile = ".journal"

var journalMagic = []byte("agentspace-journal 1 ")

// appliedMarker follows an entry whose files were all applied.
var appliedMarker = []byte("agentspace-applied\n")

// checkpointBytes is the journal size past which a commit checkpoints.
const checkpointBytes = 256 << 10

// crcTable is the journal's CRC-32C table, made on first use so that a
// process that never opens a json store does not build it at start.
var crcTable = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

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
	// FloorHash is the chain's base at the floor (hex), with Floor.
	FloorHash string `json:"floor_hash,omitempty"`
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
	fmt.Fprintf(&b, "%d %08x\n", len(payload), crc32.Checksum(payload, crcTable()))
	b.Write(payload)
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// errTorn reports a journal record that was not written completely.
var errTorn = errors.New("incomplete record")

// decodeJournal parses a journal: its complete entries in order, and the
// length of the journal they fill (applied markers included). What follows
// them, if anything, is an entry that is incomplete or fails its checksum:
// the error then wraps errTorn, and the entries before it are returned too.
func decodeJournal(data []byte) ([]*record, int, error) {
	var recs []*record
	pos := 0
	for pos < len(data) {
		if bytes.HasPrefix(data[pos:], appliedMarker) {
			pos += len(appliedMarker)
			continue
		}
		rec, n, err := decodeEntry(data[pos:])
		if err != nil {
			return recs, pos, err
		}
		recs = append(recs, rec)
		pos += n
	}
	return recs, pos, nil
}

// decodeEntry parses the journal entry data starts with and returns its
// length. One that is incomplete or fails its checksum gives errTorn (wrapped).
func decodeEntry(data []byte) (*record, int, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 || !bytes.HasPrefix(data, journalMagic) {
		return nil, 0, fmt.Errorf("%s: %w: bad header", journalFile, errTorn)
	}
	fields := strings.Fields(string(data[len(journalMagic):nl]))
	if len(fields) != 2 {
		return nil, 0, fmt.Errorf("%s: %w: bad header", journalFile, errTorn)
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n < 0 {
		return nil, 0, fmt.Errorf("%s: %w: bad length", journalFile, errTorn)
	}
	sum, err := strconv.ParseUint(fields[1], 16, 32)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w: bad checksum", journalFile, errTorn)
	}
	payload := data[nl+1:]
	if n >= len(payload) || payload[n] != '\n' {
		return nil, 0, fmt.Errorf("%s: %w: %d of %d bytes", journalFile, errTorn, len(payload), n+1)
	}
	payload = payload[:n]
	if crc32.Checksum(payload, crcTable()) != uint32(sum) {
		return nil, 0, fmt.Errorf("%s: %w: checksum mismatch", journalFile, errTorn)
	}
	rec := &record{}
	if err := decodeJSON(journalFile, 2, payload, rec); err != nil {
		return nil, 0, err
	}
	for _, w := range rec.Writes {
		if !safeRelPath(w.Path) {
			return nil, 0, corrupt(journalFile, "write to unsafe path %q", w.Path)
		}
	}
	for _, a := range rec.Appends {
		if !safeRelPath(a.Path) || a.At < 0 {
			return nil, 0, corrupt(journalFile, "append to unsafe path %q at %d", a.Path, a.At)
		}
	}
	for _, p := range rec.Removes {
		if !safeRelPath(p) {
			return nil, 0, corrupt(journalFile, "remove of unsafe path %q", p)
		}
	}
	for _, m := range rec.Mirror {
		if !safeRelPath(m.Name) || (m.Blob != "" && !safeRelPath(m.Blob)) {
			return nil, 0, corrupt(journalFile, "mirror of unsafe path %q", m.Name)
		}
	}
	return rec, nl + 1 + n + 1, nil
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

// writeJournal appends rec to the journal and fsyncs it: the
// transaction's commit point.
func (s *store) writeJournal(rec *record) error {
	b, err := encodeJournal(rec)
	if err != nil {
		return err
	}
	fi, err := s.journal.Stat()
	if err != nil {
		return fmt.Errorf("write %s: %w", journalFile, err)
	}
	end := fi.Size()
	if err := injectedFault(journalFile); err != nil {
		_, _ = s.journal.WriteAt(b[:len(b)/2], end)
		return fmt.Errorf("write %s: %w", journalFile, err)
	}
	if _, err := s.journal.WriteAt(b, end); err != nil {
		return fmt.Errorf("write %s: %w", journalFile, err)
	}
	if err := s.journal.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", journalFile, err)
	}
	s.journalEnd = end + int64(len(b))
	return nil
}

// markApplied appends the marker that says the last entry's files are all
// applied, so that the next lock holder need not replay it. It needs no
// fsync: an entry replayed again is harmless.
func (s *store) markApplied() error {
	if _, err := s.journal.WriteAt(appliedMarker, s.journalEnd); err != nil {
		return err
	}
	s.journalEnd += int64(len(appliedMarker))
	return nil
}

// journalPending reports whether the journal ends with an entry that may
// not have been applied (its writer stopped), or with a torn one.
func (s *store) journalPending() (bool, error) {
	fi, err := s.journal.Stat()
	if err != nil {
		return false, err
	}
	n := int64(len(appliedMarker))
	if fi.Size() == 0 {
		return false, nil
	}
	if fi.Size() < n {
		return true, nil
	}
	tail := make([]byte, n)
	if _, err := s.journal.ReadAt(tail, fi.Size()-n); err != nil {
		return false, err
	}
	return !bytes.Equal(tail, appliedMarker), nil
}

// checkpoint makes the files of every entry in the journal durable, then
// empties it. The caller holds the exclusive lock, and no entry is pending.
func (s *store) checkpoint() error {
	if done, err := syncFS(s.journal); err != nil {
		return fmt.Errorf("json store: checkpoint: %w", err)
	} else if !done {
		data, err := s.readJournal()
		if err != nil {
			return err
		}
		recs, _, err := decodeJournal(data)
		if err != nil && !errors.Is(err, errTorn) {
			return err
		}
		if err := s.syncApplied(recs); err != nil {
			return fmt.Errorf("json store: checkpoint: %w", err)
		}
	}
	// Emptying the journal needs no fsync: entries that reappear after a
	// power cut are replayed again, harmlessly; and the next commit's fsync
	// makes the new length durable before its entry counts.
	if err := s.journal.Truncate(0); err != nil {
		return err
	}
	s.journalEnd = 0
	return nil
}

// syncApplied fsyncs every file and directory recs changed.
func (s *store) syncApplied(recs []*record) error {
	files, mfiles := map[string]bool{}, map[string]bool{}
	dirs, mdirs := dirSet{".": {}}, dirSet{".": {}}
	for _, rec := range recs {
		for _, w := range rec.Writes {
			files[w.Path] = true
			addParents(dirs, w.Path)
		}
		for _, a := range rec.Appends {
			files[a.Path] = true
			addParents(dirs, a.Path)
		}
		for _, p := range rec.Removes {
			addParents(dirs, p)
		}
		for _, m := range rec.Mirror {
			if m.Blob != "" {
				mfiles[m.Name] = true
			}
			addParents(mdirs, m.Name)
		}
		if len(rec.Events) > 0 || rec.Floor > 0 {
			files[eventsFile] = true
		}
		if rec.Floor > 0 {
			files[floorFile] = true
		}
	}
	if err := syncFiles(s.root, files); err != nil {
		return err
	}
	if err := syncDirs(s.root, dirs); err != nil {
		return err
	}
	// The readable copies are a view, rebuilt by a replay: best effort.
	if err := syncFiles(s.mirror, mfiles); err != nil {
		s.log.Warn("json store: fsync of a readable copy failed", "err", err)
	}
	if err := syncDirs(s.mirror, mdirs); err != nil {
		s.log.Warn("json store: fsync of artifacts/ failed", "err", err)
	}
	return nil
}

func (s *store) readJournal() ([]byte, error) {
	fi, err := s.journal.Stat()
	if err != nil {
		return nil, err
	}
	data := make([]byte, fi.Size())
	n, err := s.journal.ReadAt(data, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", journalFile, err)
	}
	return data[:n], nil
}

// apply makes rec's changes to the tree. diskLast is the last seq already
// in events.ndjson: older events of rec are not appended again.
func (s *store) apply(rec *record, diskLast int64) error {
	return s.applyAppending(rec, diskLast, nil)
}

// applyAppending is apply, leaving out the appends to the files in
// superseded: a replay skips appends that a later entry's rewrite of the
// whole file replaces (the file may by now be shorter than where they start).
func (s *store) applyAppending(rec *record, diskLast int64, superseded map[string]bool) error {
	dirs := dirSet{}
	for _, w := range rec.Writes {
		if err := s.writeRecordFile(w.Path, w.Data, dirs); err != nil {
			return err
		}
	}
	for _, a := range rec.Appends {
		if superseded[a.Path] {
			continue
		}
		if err := s.ensureDir(path.Dir(a.Path), dirs); err != nil {
			return err
		}
		root, rel := s.sub(a.Path)
		if err := appendAt(root, rel, a.Path, a.At, a.Data); err != nil {
			return err
		}
	}
	for _, p := range rec.Removes {
		if err := removeFile(s.root, p, dirs); err != nil {
			return err
		}
	}
	s.applyMirror(rec.Mirror)
	if err := s.appendEventLines(rec.Events, diskLast); err != nil {
		return err
	}
	if rec.Floor > 0 {
		if err := s.compactFile(rec.Floor, rec.FloorHash); err != nil {
			return err
		}
	}
	return nil
}

// writeRecordFile writes one of rec's files. Versions files are replaced
// by a rename (a handle that sees the same inode reads only what was
// appended); other files are written in place, which costs no new inode:
// readers hold the shared lock, so they never see a part, and a writer
// killed half-way leaves its entry unmarked, so the file is written again.
func (s *store) writeRecordFile(name string, data []byte, dirs dirSet) error {
	if err := s.ensureDir(path.Dir(name), dirs); err != nil {
		return err
	}
	write := func(root *os.Root, rel string) error { return overwriteFile(root, rel, name, data) }
	if strings.HasPrefix(name, versionsDir+"/") {
		write = func(root *os.Root, rel string) error { return replaceFile(root, rel, data, dirSet{}, false) }
	}
	err := write(s.sub(name))
	if errors.Is(err, fs.ErrNotExist) {
		// The directory was removed behind this handle's back: make it again.
		delete(s.knownDirs, path.Dir(name))
		if err := s.ensureDir(path.Dir(name), dirs); err != nil {
			return err
		}
		err = write(s.root, name)
	}
	return err
}

// ensureDir creates dir (under DIR, not artifacts/) unless this handle
// already saw it: those directories are never removed while the store is
// open.
func (s *store) ensureDir(dir string, dirs dirSet) error {
	if s.knownDirs[dir] {
		return nil
	}
	if err := mkdirs(s.root, dir, dirs); err != nil {
		return err
	}
	if s.knownDirs == nil {
		s.knownDirs = map[string]bool{}
	}
	s.knownDirs[dir] = true
	return nil
}

// writeCopy replaces the readable copy artifacts/NAME atomically (temp
// file and rename, as people read it without the lock), through a root on
// its directory so that the path is walked once.
func (s *store) writeCopy(name string, data []byte, dirs dirSet) error {
	dir := path.Dir(name)
	if dir == "." {
		return replaceFile(s.mirror, name, data, dirs, false)
	}
	if err := mkdirs(s.mirror, dir, dirs); err != nil {
		return err
	}
	d, err := s.mirror.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return replaceFile(d, path.Base(name), data, dirSet{}, false)
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
		broot, rel := s.sub(m.Blob)
		data, err := broot.ReadFile(rel)
		if err == nil {
			err = s.writeCopy(m.Name, data, dirs)
		}
		if err != nil {
			s.log.Warn("json store: the readable copy of an artifact was not written", "name", m.Name, "err", err)
		}
	}
}

// appendEventLines appends the events with seq > diskLast to the log.
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
// records the floor first, so that a crash in between loses nothing (a
// replay does both again).
func (s *store) compactFile(floor int64, hash string) error {
	dirs := dirSet{}
	fb, err := marshalFile(floorJSON{Floor: floor, Hash: hash})
	if err != nil {
		return err
	}
	if err := replaceFile(s.root, floorFile, fb, dirs, false); err != nil {
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
	return replaceFile(s.root, eventsFile, kept.Bytes(), dirs, false)
}

// recoverJournal replays every complete entry of the journal in order,
// drops a torn one after them, and checkpoints. It runs under the
// exclusive lock: at open, and when the journal ends with an entry that
// was not marked applied (its writer stopped).
func (s *store) recoverJournal() error {
	data, err := s.readJournal()
	if err != nil {
		return err
	}
	recs, end, err := decodeJournal(data)
	if errors.Is(err, errTorn) {
		s.log.Info("json store: dropping an unacknowledged, incomplete transaction", "detail", err)
	} else if err != nil {
		return err
	}
	if len(recs) > 0 {
		if !bytes.HasSuffix(data[:end], appliedMarker) {
			s.log.Info("json store: replaying a committed transaction whose writer stopped", "entries", len(recs))
		}
		last, err := s.repairLogTail()
		if err != nil {
			return err
		}
		s.diskLast = last
		rewritten := map[string]int{} // path -> the last entry writing it whole
		for i, rec := range recs {
			for _, w := range rec.Writes {
				rewritten[w.Path] = i
			}
		}
		for i, rec := range recs {
			superseded := map[string]bool{}
			for _, a := range rec.Appends {
				if j, ok := rewritten[a.Path]; ok && j > i {
					superseded[a.Path] = true
				}
			}
			if err := s.applyAppending(rec, s.diskLast, superseded); err != nil {
				return fmt.Errorf("replay %s: %w", journalFile, err)
			}
		}
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
	for _, rec := range recs {
		for _, w := range rec.Writes {
			sweep("r", path.Dir(w.Path))
		}
		for _, a := range rec.Appends {
			sweep("r", path.Dir(a.Path))
		}
		for _, m := range rec.Mirror {
			sweep("m", path.Dir(m.Name))
		}
	}
	if err := s.checkpoint(); err != nil {
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
