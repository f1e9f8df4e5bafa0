package jsonstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Names in DIR. See doc.go for the whole tree.
const (
	formatFile  = "FORMAT"
	lockFile    = ".lock"
	eventsFile  = "events.ndjson"
	floorFile   = "floor.json"
	artsDir     = "artifacts"
	metaDir     = "meta/artifacts"
	blobsDir    = "blobs"
	tasksDir    = "tasks"
	notesDir    = "notes"
	leasesDir   = "leases"
	idemDir     = "idempotency"
	jsonSuffix  = ".json"
	probeSuffix = ".probe"
)

type floorJSON struct {
	Floor int64 `json:"floor"`
}

// logIdent identifies the event log's content as last seen: an append
// grows size; a compaction replaces the file (a new inode).
type logIdent struct {
	ino   uint64
	size  int64
	mtime time.Time
}

// store is one handle's view of a directory. Its mutex serializes the
// handle's transactions; the flock on DIR/.lock (this handle's own open
// file description) serializes them with every other handle and process.
type store struct {
	dir     string
	root    *os.Root // DIR: every path the store touches is resolved inside it
	mirror  *os.Root // DIR/artifacts: readable copies never leave it
	lockf   *os.File
	journal *os.File
	log     *slog.Logger
	// foldCase is set when the file system ignores case: names that differ
	// only in case would share a file, so they count as the same name.
	foldCase bool

	mu       sync.Mutex
	closed   bool
	st       *state // nil: load everything at the next transaction
	diskLast int64  // last seq in events.ndjson
	logID    logIdent
	logLines int
}

// openStore opens (creating if needed) the workspace in dir.
func openStore(ctx context.Context, cfg workspace.Config) (*store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := cfg.Target
	if dir == "" {
		return nil, &workspace.InvalidError{Field: "dsn", Reason: "json: needs a directory, e.g. json:./ws"}
	}
	f, err := openFormat(dir)
	if err != nil {
		return nil, err
	}
	s := &store{dir: dir, root: f.root, lockf: f.lockf, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()
	if err := flock(s.lockf, true); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path.Join(dir, lockFile), err)
	}
	err = s.openLocked(f, cfg.AutoMigrate)
	if uerr := funlock(s.lockf); err == nil {
		err = uerr
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

func (s *store) openLocked(f *formatHandle, autoMigrate bool) error {
	v, dirty, err := f.version()
	if err != nil {
		return err
	}
	switch {
	case dirty:
		return &workspace.SchemaError{Current: int64(v), Want: latestFormat, Dirty: true}
	case v > latestFormat:
		return &workspace.SchemaError{Current: int64(v), Want: latestFormat} // #nosec G115 -- schema versions are small counts (our migrations number a handful)
	case v == 0 && !f.hasFormat():
		if err := f.checkEmpty(); err != nil {
			return err
		}
		if err := f.migrate(latestFormat); err != nil {
			return err
		}
	case v < latestFormat:
		if !autoMigrate {
			return &workspace.SchemaError{Current: int64(v), Want: latestFormat}
		}
		if err := f.migrate(latestFormat); err != nil {
			return err
		}
	}
	fi, err := s.root.Lstat(artsDir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: %w", path.Join(s.dir, artsDir), errors.New("not a directory (a symbolic link is refused)"))
	}
	if s.mirror, err = s.root.OpenRoot(artsDir); err != nil {
		return err
	}
	if s.journal, err = s.root.OpenFile(journalFile, os.O_RDWR|os.O_CREATE, fileMode); err != nil {
		return err
	}
	s.foldCase = probeFoldCase(s.root)
	if pending, err := s.journalPending(); err != nil {
		return err
	} else if pending {
		if err := s.recoverJournal(); err != nil {
			return err
		}
	}
	return s.load()
}

// probeFoldCase reports whether the file system ignores case, by looking
// FORMAT up in lower case.
func probeFoldCase(root *os.Root) bool {
	a, err := root.Stat(formatFile)
	if err != nil {
		return false
	}
	b, err := root.Stat(strings.ToLower(formatFile))
	return err == nil && os.SameFile(a, b)
}

// Close releases the handle's files; its locks go with them.
func (s *store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, c := range []io.Closer{s.journal, s.lockf, s.mirror, s.root} {
		if c != nil && !isNilCloser(c) {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

func isNilCloser(c io.Closer) bool {
	switch v := c.(type) {
	case *os.File:
		return v == nil
	case *os.Root:
		return v == nil
	}
	return false
}

// Update runs fn in a write transaction: this handle's mutex, then the
// exclusive flock, then a replay of any transaction a dead writer left,
// then fn on the current state. Commit is journal + fsync, then the files.
func (s *store) Update(ctx context.Context, fn func(tx workspace.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return workspace.ErrClosed
	}
	if err := flock(s.lockf, true); err != nil {
		return fmt.Errorf("lock %s: %w", lockFile, err)
	}
	defer func() { _ = funlock(s.lockf) }()
	if pending, err := s.journalPending(); err != nil {
		return err
	} else if pending {
		if err := s.recoverJournal(); err != nil {
			return err
		}
	}
	if err := s.refresh(); err != nil {
		return err
	}
	t := newTx(s, true)
	if err := fn(t); err != nil {
		t.rollback()
		return err
	}
	rec, err := t.record()
	if err != nil {
		t.rollback()
		return err
	}
	if rec == nil {
		return nil
	}
	if err := s.writeJournal(rec); err != nil {
		t.rollback()
		s.st = nil
		return err
	}
	if err := s.apply(rec, s.diskLast); err != nil {
		// Committed: the record stays in the journal and the next
		// transaction (of any handle) replays it.
		s.st = nil
		return fmt.Errorf("json store: applying a committed transaction (it will be replayed): %w", err)
	}
	if err := s.clearJournal(); err != nil {
		s.log.Warn("json store: emptying the journal failed; the transaction will be replayed", "err", err)
	}
	return s.noteLog(len(rec.Events))
}

// View runs fn on the state under the shared flock. If a writer died
// mid-commit it first takes the exclusive lock to finish that commit.
func (s *store) View(ctx context.Context, fn func(tx workspace.ReadTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return workspace.ErrClosed
	}
	for {
		if err := flock(s.lockf, false); err != nil {
			return fmt.Errorf("lock %s: %w", lockFile, err)
		}
		pending, err := s.journalPending()
		if err != nil || !pending {
			if err != nil {
				_ = funlock(s.lockf)
				return err
			}
			break
		}
		if err := flock(s.lockf, true); err != nil {
			_ = funlock(s.lockf)
			return err
		}
		err = nil
		if pending, _ := s.journalPending(); pending {
			err = s.recoverJournal()
		}
		_ = funlock(s.lockf)
		if err != nil {
			return err
		}
	}
	defer func() { _ = funlock(s.lockf) }()
	if err := s.refresh(); err != nil {
		return err
	}
	return fn(newTx(s, false))
}

// noteLog records the log's identity after this handle appended n events
// (or compacted), so that the next refresh reads nothing.
func (s *store) noteLog(n int) error {
	fi, err := s.root.Stat(eventsFile)
	if err != nil {
		s.st = nil
		return nil
	}
	id := logIdent{ino: fileID(fi), size: fi.Size(), mtime: fi.ModTime()}
	if id.ino != s.logID.ino {
		s.logLines = len(s.st.events) // rewritten: one line per kept event
	} else {
		s.logLines += n
	}
	s.logID = id
	return nil
}

// refresh brings the state up to date with other handles' commits: the
// records named by the events they appended are read again. A replaced or
// shrunk log (a compaction) reloads everything.
func (s *store) refresh() error {
	if s.st == nil {
		return s.load()
	}
	fi, err := s.root.Stat(eventsFile)
	if errors.Is(err, fs.ErrNotExist) {
		if s.logID != (logIdent{}) {
			return s.load()
		}
		return nil
	}
	if err != nil {
		return err
	}
	id := logIdent{ino: fileID(fi), size: fi.Size(), mtime: fi.ModTime()}
	if id == s.logID {
		return nil
	}
	if id.ino != s.logID.ino || id.size < s.logID.size {
		return s.load()
	}
	f, err := s.root.Open(eventsFile)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, s.logID.size, id.size-s.logID.size))
	if err != nil {
		return err
	}
	evs, err := parseEvents(data, s.logLines+1)
	if err != nil {
		return err
	}
	if len(evs) > 0 && evs[0].Seq <= s.st.head() {
		return s.load()
	}
	for _, ev := range evs {
		if err := s.reloadSubject(ev.Subject); err != nil {
			return err
		}
	}
	s.st.appendEvents(evs)
	if len(evs) > 0 {
		s.diskLast = evs[len(evs)-1].Seq
	}
	s.logID = id
	s.logLines += len(evs)
	return nil
}

var (
	idRE   = regexp.MustCompile(`^[0-9a-fA-F-]{1,64}$`)
	kindRE = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	shaRE  = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func artifactPath(id string) string { return metaDir + "/" + id + jsonSuffix }
func taskPath(id string) string     { return tasksDir + "/" + id + jsonSuffix }
func notePath(k noteKey) string     { return notesDir + "/" + k.kind + "/" + encodeKey(k.key) + jsonSuffix }
func leasePath(r string) string     { return leasesDir + "/" + encodeKey(r) + jsonSuffix }
func idemPath(k string) string      { return idemDir + "/" + encodeKey(k) + jsonSuffix }
func blobPath(id, sha string) string {
	return blobsDir + "/" + id + "/" + sha
}

// readRecord reads a record file: (nil, nil) if it does not exist.
func (s *store) readRecord(name string) ([]byte, error) {
	data, err := s.root.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// reloadSubject reads the record an event is about again.
func (s *store) reloadSubject(subj workspace.Subject) error {
	switch subj.Kind {
	case workspace.SubjectArtifact:
		if !idRE.MatchString(subj.ID) {
			return corrupt(eventsFile, "artifact id %q", subj.ID)
		}
		data, err := s.readRecord(artifactPath(subj.ID))
		if err != nil || data == nil {
			if data == nil && err == nil {
				s.st.setArt(subj.ID, nil)
			}
			return err
		}
		r, err := decodeArtifact(artifactPath(subj.ID), data)
		if err != nil {
			return err
		}
		s.st.setArt(subj.ID, r)
	case workspace.SubjectTask:
		if !idRE.MatchString(subj.ID) {
			return corrupt(eventsFile, "task id %q", subj.ID)
		}
		data, err := s.readRecord(taskPath(subj.ID))
		if err != nil || data == nil {
			return err
		}
		t, err := decodeTask(taskPath(subj.ID), data)
		if err != nil {
			return err
		}
		s.st.setTask(t)
	case workspace.SubjectNote:
		kind, key, ok := strings.Cut(subj.ID, "/")
		if !ok || !kindRE.MatchString(kind) {
			return corrupt(eventsFile, "note id %q", subj.ID)
		}
		k := noteKey{kind, key}
		data, err := s.readRecord(notePath(k))
		if err != nil {
			return err
		}
		if data == nil {
			s.st.setNote(k, nil)
			return nil
		}
		n, err := decodeNote(notePath(k), data)
		if err != nil {
			return err
		}
		s.st.setNote(k, &n)
	case workspace.SubjectLock:
		data, err := s.readRecord(leasePath(subj.ID))
		if err != nil {
			return err
		}
		if data == nil {
			s.st.setLease(subj.ID, nil)
			return nil
		}
		l, err := decodeLease(leasePath(subj.ID), data)
		if err != nil {
			return err
		}
		s.st.setLease(l.Resource, &l)
	}
	return nil
}

// readDir lists dir's entries, skipping temporary files.
func (s *store) readDir(dir string) ([]fs.DirEntry, error) {
	f, err := s.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory %s: %w", dir, err)
	}
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return strings.HasPrefix(e.Name(), tmpPrefix) }), nil
}

// eachFile calls fn with every regular file of dir (temporary files
// aside), read through a root on dir so each read is one open.
func (s *store) eachFile(dir string, fn func(name string, data []byte) error) error {
	ents, err := s.readDir(dir)
	if err != nil || len(ents) == 0 {
		return err
	}
	r, err := s.root.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := r.ReadFile(e.Name())
		if err != nil {
			return fmt.Errorf("read %s: %w", path.Join(dir, e.Name()), err)
		}
		if err := fn(path.Join(dir, e.Name()), data); err != nil {
			return err
		}
	}
	return nil
}

// load reads the whole tree into a new state.
func (s *store) load() error {
	st := newState()
	err := s.eachFile(metaDir, func(name string, data []byte) error {
		r, err := decodeArtifact(name, data)
		if err != nil {
			return err
		}
		if path.Base(name) != r.id+jsonSuffix {
			return corrupt(name, "holds artifact %s", r.id)
		}
		st.arts[r.id] = r
		if n, ok := st.liveName(r); ok {
			if other, dup := st.byName[n]; dup {
				return corrupt(name, "live name %q is also artifact %s's", n, other)
			}
			st.byName[n] = r.id
			st.folded[fold(n)] = r.id
			st.names = append(st.names, n)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(st.names)
	err = s.eachFile(tasksDir, func(name string, data []byte) error {
		t, err := decodeTask(name, data)
		if err != nil {
			return err
		}
		st.tasks[t.ID] = t
		st.taskIDs = append(st.taskIDs, t.ID)
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(st.taskIDs)
	kinds, err := s.readDir(notesDir)
	if err != nil {
		return err
	}
	for _, k := range kinds {
		if !k.IsDir() {
			continue
		}
		err := s.eachFile(path.Join(notesDir, k.Name()), func(name string, data []byte) error {
			n, err := decodeNote(name, data)
			if err != nil {
				return err
			}
			st.notes[noteKey{n.Kind, n.Key}] = n
			return nil
		})
		if err != nil {
			return err
		}
	}
	err = s.eachFile(leasesDir, func(name string, data []byte) error {
		l, err := decodeLease(name, data)
		if err != nil {
			return err
		}
		st.leases[l.Resource] = l
		return nil
	})
	if err != nil {
		return err
	}
	if data, err := s.readRecord(floorFile); err != nil {
		return err
	} else if data != nil {
		var fj floorJSON
		if err := decodeJSON(floorFile, 1, data, &fj); err != nil {
			return err
		}
		if fj.Floor < 1 {
			return corrupt(floorFile, "floor %d is below 1", fj.Floor)
		}
		st.floor = fj.Floor
	}
	f, err := s.root.Open(eventsFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var id logIdent
	if f != nil {
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(f)
		if err != nil {
			return err
		}
		id = logIdent{ino: fileID(fi), size: int64(len(data)), mtime: fi.ModTime()}
		if id.size != fi.Size() {
			id.mtime = time.Time{} // changed while read: look again next time
		}
		if st.events, err = parseEvents(data, 1); err != nil {
			return err
		}
		if n := len(st.events); n > 0 && st.events[0].Seq < st.floor {
			return corrupt(eventsFile, "seq %d is below the floor %d of %s", st.events[0].Seq, st.floor, floorFile)
		}
	}
	s.st, s.logID, s.logLines = st, id, len(st.events)
	s.diskLast = st.head()
	if n := len(st.events); n == 0 {
		s.diskLast = 0
	}
	return nil
}

// parseEvents decodes NDJSON event lines; first is data's first line
// number. Every line must be complete and seqs must increase.
func parseEvents(data []byte, first int) ([]workspace.Event, error) {
	var out []workspace.Event
	n := first - 1
	for line := range bytes.Lines(data) {
		n++
		if line[len(line)-1] != '\n' {
			return nil, &CorruptError{File: eventsFile, Line: n, Err: errors.New("incomplete last line")}
		}
		ev, err := decodeEventLine(eventsFile, n, line)
		if err != nil {
			return nil, err
		}
		if k := len(out); k > 0 && ev.Seq <= out[k-1].Seq {
			return nil, &CorruptError{File: eventsFile, Line: n, Err: fmt.Errorf("seq %d after seq %d", ev.Seq, out[k-1].Seq)}
		}
		out = append(out, ev)
	}
	return out, nil
}
