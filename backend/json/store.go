package jsonstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/internal/dirwatch"
	"github.com/agentspace/agentspace/internal/filegate"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Names in DIR. See doc.go for the whole tree.
const (
	formatFile   = "FORMAT"
	lockFile     = ".lock"
	eventsFile   = "events.ndjson"
	floorFile    = "floor.json"
	artsDir      = "artifacts"
	metaDir      = "meta/artifacts"
	versionsDir  = "meta/versions"
	blobsDir     = "blobs"
	tasksDir     = "tasks"
	notesDir     = "notes"
	leasesDir    = "leases"
	idemDir      = "idempotency"
	jsonSuffix   = ".json"
	ndjsonSuffix = ".ndjson"
	probeSuffix  = ".probe"
)

type floorJSON struct {
	Floor int64 `json:"floor"`
	// Hash is the hash the event at the floor chains from (hex), absent
	// when it is 32 zero bytes.
	Hash string `json:"hash,omitempty"`
}

// fileIdent is an append-only file as last read: its inode (a replaced
// file is read again whole) and how many bytes were read.
type fileIdent struct {
	ino  uint64
	size int64
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
	// journalEnd is where this handle's last entry (or marker) ends.
	journalEnd int64
	// knownDirs are directories under DIR this handle created or found.
	knownDirs map[string]bool
	// subRoots are roots on the directories most files are in (see sub).
	subRoots map[string]*os.Root
	log      *slog.Logger
	// foldCase is set when the file system ignores case: names that differ
	// only in case would share a file, so they count as the same name.
	foldCase bool

	mu       sync.Mutex
	closed   bool
	st       *state // nil: load everything at the next transaction
	diskLast int64  // last seq in events.ndjson
	logID    logIdent
	logLines int
	// vfiles is what this handle last saw of each artifact's versions file
	// (which only grows, or is replaced): a refresh reads only what was
	// appended since.
	vfiles map[string]fileIdent

	gate  *filegate.Gate    // this process's writers of DIR, in line
	watch *dirwatch.Watcher // nil: other processes' commits are polled for
}

// openStore opens (creating if needed) the workspace in dir.
func openStore(ctx context.Context, cfg driver.Config) (*store, error) {
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
	s.gate = filegate.Open(dir)
	// Every commit writes the journal and appends to the event log:
	// watching them wakes other processes' waiters at once. The watch
	// begins when someone first waits (Notify's Wake): a handle that
	// never waits never pays the 8-20 ms that ending a watch costs (see
	// dirwatch.Watcher.Start).
	poll := cfg.PollInterval
	if poll <= 0 {
		poll = workspace.DefaultPollInterval
	}
	s.watch, err = dirwatch.NewLater(dir, poll, journalFile, eventsFile)
	if err != nil && !errors.Is(err, dirwatch.ErrUnsupported) {
		s.log.Debug("agentspace: cannot watch the workspace directory; polling for other processes' commits", "err", err)
	}
	ok = true
	return s, nil
}

// RewritesLog implements driver.LogRewriter: a compaction rewrites
// events.ndjson, so gc does it in one step.
func (s *store) RewritesLog() bool { return true }

var _ driver.Notifier = (*store)(nil)

// Notify implements driver.Notifier where the directory can be watched
// (it offers nothing otherwise, and the engine polls).
func (s *store) Notify(wanted func() bool) driver.Notifications {
	if s.watch == nil {
		return driver.Notifications{}
	}
	wake := func() {
		if !wanted() {
			return
		}
		// Once begun, the watch stays until Close (see the sqlite store's).
		if err := s.watch.Start(); err != nil && !errors.Is(err, os.ErrClosed) {
			s.log.Warn("agentspace: cannot watch the workspace directory; polling for other processes' commits", "dir", s.dir, "err", err)
		}
	}
	return driver.Notifications{Changes: s.watch.C, Wake: wake}
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
		if fi.Mode()&fs.ModeSymlink != 0 {
			return symlinkError(artsDir)
		}
		return fmt.Errorf("%s: %w", path.Join(s.dir, artsDir), errors.New("not a directory"))
	}
	if s.mirror, err = s.root.OpenRoot(artsDir); err != nil {
		return err
	}
	if s.journal, err = s.root.OpenFile(journalFile, os.O_RDWR|os.O_CREATE, fileMode); err != nil {
		return err
	}
	s.foldCase = probeFoldCase(s.root)
	// After a power cut the files of applied entries may be missing: at
	// open, every entry is replayed, pending or not.
	if fi, err := s.journal.Stat(); err != nil {
		return err
	} else if fi.Size() > 0 {
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

// Close checkpoints the journal, then releases the handle's files; its
// locks go with them.
func (s *store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.journal != nil && s.lockf != nil && s.mirror != nil {
		if err := s.closeCheckpoint(); err != nil {
			s.log.Warn("json store: checkpoint at close failed; the journal keeps every transaction", "err", err)
		}
	}
	_ = s.watch.Close()
	s.closeSubRoots()
	s.gate.Close()
	var errs []error
	for _, c := range []io.Closer{s.journal, s.lockf, s.mirror, s.root} {
		if c != nil && !isNilCloser(c) {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// closeCheckpoint checkpoints a journal holding applied entries, so that a
// workspace left alone has its files synced and an empty journal. One that
// ends with a pending entry is left to the next lock holder.
func (s *store) closeCheckpoint() error {
	fi, err := s.journal.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	if err := flock(s.lockf, true); err != nil {
		return err
	}
	defer func() { _ = funlock(s.lockf) }()
	pending, err := s.journalPending()
	if err != nil || pending {
		return err
	}
	if fi, err = s.journal.Stat(); err != nil || fi.Size() == 0 {
		return err
	}
	return s.checkpoint()
}

// subRootDirs are the directories whose files every commit touches: a
// root opened on each once saves walking their path on every access.
var subRootDirs = []string{metaDir, versionsDir, blobsDir}

// sub returns the root to reach p (relative to DIR) through and p relative
// to it: a root on p's directory among subRootDirs, opened once, or DIR's.
func (s *store) sub(p string) (*os.Root, string) {
	for _, d := range subRootDirs {
		rest, ok := strings.CutPrefix(p, d+"/")
		if !ok {
			continue
		}
		r := s.subRoots[d]
		if r == nil {
			var err error
			if r, err = s.root.OpenRoot(d); err != nil {
				return s.root, p
			}
			if s.subRoots == nil {
				s.subRoots = map[string]*os.Root{}
			}
			s.subRoots[d] = r
		}
		return r, rest
	}
	return s.root, p
}

func (s *store) closeSubRoots() {
	for d, r := range s.subRoots {
		_ = r.Close()
		delete(s.subRoots, d)
	}
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
func (s *store) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.gate.Enter(ctx); err != nil {
		return err
	}
	defer s.gate.Leave()
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
	if err := s.checkLinks(rec); err != nil {
		t.rollback()
		return err
	}
	if err := s.writeJournal(rec); err != nil {
		t.rollback()
		s.st = nil
		return err
	}
	if err := s.apply(rec, s.diskLast); err != nil {
		// Committed: the entry stays unmarked in the journal and the next
		// transaction (of any handle) replays it.
		s.st = nil
		return fmt.Errorf("json store: applying a committed transaction (it will be replayed): %w", err)
	}
	if err := s.markApplied(); err != nil {
		s.log.Warn("json store: marking a transaction applied failed; it will be replayed", "err", err)
	} else if s.journalEnd >= checkpointBytes {
		if err := s.checkpoint(); err != nil {
			// The journal keeps every entry: nothing is lost, and the next
			// commit tries again.
			s.log.Warn("json store: checkpoint failed", "err", err)
		}
	}
	s.noteVersions(t.arts)
	return s.noteLog(len(rec.Events))
}

// View runs fn on the state under the shared flock. If a writer died
// mid-commit it first takes the exclusive lock to finish that commit.
func (s *store) View(ctx context.Context, fn func(tx driver.ReadTx) error) error {
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

var (
	idRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-fA-F-]{1,64}$`) })
	kindRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]*$`) })
	shaRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })
)

func artifactPath(id string) string { return metaDir + "/" + id + jsonSuffix }
func versionsPath(id string) string { return versionsDir + "/" + id + ndjsonSuffix }
func taskPath(id string) string     { return tasksDir + "/" + id + jsonSuffix }
func notePath(k noteKey) string     { return notesDir + "/" + k.kind + "/" + encodeKey(k.key) + jsonSuffix }
func leasePath(r string) string     { return leasesDir + "/" + encodeKey(r) + jsonSuffix }
func idemPath(k string) string      { return idemDir + "/" + encodeKey(k) + jsonSuffix }
func blobPath(id, sha string) string {
	return blobsDir + "/" + id + "/" + sha
}
