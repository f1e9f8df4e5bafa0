package jsonstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/agentspace/agentspace/workspace"
)

// The tree's format version lives in DIR/FORMAT as one line: the version,
// followed by " dirty" while a migration step runs (a step that fails
// half-way leaves it so, and `wsctl migrate force N` clears it after a
// check). Steps are Go functions; each runs under the exclusive flock, so
// two `migrate up` at once are safe.

const latestFormat = 3

// migration moves the tree from version i to i+1 (up) and back (down).
type migration struct {
	name string
	up   func(f *formatHandle) error
	down func(f *formatHandle) error
}

// migrations[i] migrates version i to i+1.
var migrations = []migration{
	{name: "initial layout", up: createLayout, down: removeLayout},
	{name: "append-only artifact versions", up: splitVersions, down: joinVersions},
	{name: "event hash chain", up: startChain, down: dropChain},
}

// layoutDirs are the directories of format 1 (format 2 adds versionsDir).
var layoutDirs = []string{artsDir, metaDir, blobsDir, tasksDir, notesDir, leasesDir, idemDir}

// ownEntries are every top-level name the backend creates.
var ownEntries = []string{formatFile, lockFile, journalFile, eventsFile, floorFile, artsDir, "meta", blobsDir, tasksDir, notesDir, leasesDir, idemDir}

func createLayout(f *formatHandle) error {
	dirs := dirSet{}
	for _, d := range layoutDirs {
		if err := mkdirs(f.root, d, dirs); err != nil {
			return err
		}
	}
	ev, err := f.root.OpenFile(eventsFile, os.O_WRONLY|os.O_CREATE, fileMode)
	if err != nil {
		return err
	}
	err = ev.Sync()
	if cerr := ev.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	dirs["."] = struct{}{}
	return syncDirs(f.root, dirs)
}

func removeLayout(f *formatHandle) error {
	for _, name := range ownEntries {
		if name == formatFile || name == lockFile {
			continue
		}
		if err := f.root.RemoveAll(name); err != nil {
			return err
		}
	}
	return nil
}

// Format 1 kept every version's metadata in meta/artifacts/ID.json, which
// was rewritten whole by each update: a write cost grew with the artifact's
// versions. Format 2 keeps only the head there and appends each version as
// one line to meta/versions/ID.ndjson.

// artifactFileV1 is meta/artifacts/ID.json in format 1.
type artifactFileV1 struct {
	ID       string        `json:"id"`
	Name     string        `json:"name"`
	Deleted  bool          `json:"deleted,omitempty"`
	Versions []versionJSON `json:"versions"`
}

// splitVersions moves every artifact to format 2: its versions file
// (written first), then its head file. A file already in format 2 (a step
// that stopped half-way and is run again) is left as it is.
func splitVersions(f *formatHandle) error {
	if err := f.replayJournal(); err != nil {
		return err
	}
	dirs := dirSet{}
	if err := mkdirs(f.root, versionsDir, dirs); err != nil {
		return err
	}
	err := f.eachMeta(func(name string, data []byte) error {
		var old artifactFileV1
		if err := decodeJSON(name, 1, data, &old); err != nil {
			if _, err2 := decodeArtifact(name, data); err2 == nil {
				return nil // already split
			}
			return err
		}
		if old.ID == "" || old.Name == "" || len(old.Versions) == 0 || path.Base(name) != old.ID+jsonSuffix || !idRE().MatchString(old.ID) {
			return corrupt(name, "an artifact needs an id (its file's name), a name and at least one version")
		}
		r := &artRec{id: old.ID, name: old.Name, deleted: old.Deleted}
		for i, v := range old.Versions {
			if v.Version != int64(i+1) {
				return corrupt(name, "version %d is listed at position %d", v.Version, i+1)
			}
			r.versions = append(r.versions, fromVersionJSON(old.ID, v))
		}
		vdata, err := encodeVersions(r.versions)
		if err != nil {
			return err
		}
		head, err := encodeArtifact(r)
		if err != nil {
			return err
		}
		if err := writeAtomic(f.root, versionsPath(r.id), vdata, dirs); err != nil {
			return err
		}
		return writeAtomic(f.root, name, head, dirs)
	})
	if err != nil {
		return err
	}
	return syncDirs(f.root, dirs)
}

// joinVersions moves every artifact back to format 1, then removes
// meta/versions.
func joinVersions(f *formatHandle) error {
	if err := f.replayJournal(); err != nil {
		return err
	}
	dirs := dirSet{}
	err := f.eachMeta(func(name string, data []byte) error {
		r, err := decodeArtifact(name, data)
		if err != nil {
			var old artifactFileV1
			if decodeJSON(name, 1, data, &old) == nil {
				return nil // already joined
			}
			return err
		}
		if path.Base(name) != r.id+jsonSuffix || !idRE().MatchString(r.id) {
			return corrupt(name, "holds artifact %s", r.id)
		}
		p := versionsPath(r.id)
		vdata, err := f.root.ReadFile(p)
		if err != nil {
			return err
		}
		vs, err := parseVersions(p, r.id, vdata, 1)
		if err != nil {
			return err
		}
		if r, err = withVersions(p, r, vs); err != nil {
			return err
		}
		old := artifactFileV1{ID: r.id, Name: r.name, Deleted: r.deleted}
		for _, a := range r.versions {
			old.Versions = append(old.Versions, toVersionJSON(a))
		}
		out, err := marshalFile(old)
		if err != nil {
			return err
		}
		return writeAtomic(f.root, name, out, dirs)
	})
	if err != nil {
		return err
	}
	if err := syncDirs(f.root, dirs); err != nil {
		return err
	}
	return f.root.RemoveAll(versionsDir)
}

// eachMeta calls fn with every artifact head file.
func (f *formatHandle) eachMeta(fn func(name string, data []byte) error) error {
	d, err := f.root.Open(metaDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, tmpPrefix) || !strings.HasSuffix(n, jsonSuffix) {
			continue
		}
		name := metaDir + "/" + n
		data, err := f.root.ReadFile(name)
		if err != nil {
			return err
		}
		if err := fn(name, data); err != nil {
			return err
		}
	}
	return nil
}

// replayJournal finishes a transaction a killed writer left in the journal
// before a migration step changes the layout under it: the transaction was
// written in the format the tree had then.
func (f *formatHandle) replayJournal() error {
	jf, err := f.root.OpenFile(journalFile, os.O_RDWR, fileMode)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer jf.Close()
	fi, err := jf.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	mirror, err := f.root.OpenRoot(artsDir)
	if err != nil {
		return err
	}
	defer mirror.Close()
	s := &store{dir: f.dir, root: f.root, mirror: mirror, journal: jf, log: slog.Default()}
	defer s.closeSubRoots()
	return s.recoverJournal()
}

// formatHandle is DIR opened for its format: the root and the lock file.
type formatHandle struct {
	dir   string
	root  *os.Root
	lockf *os.File
}

// openFormat creates dir if needed and opens it and its lock file.
func openFormat(dir string) (*formatHandle, error) {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	lockf, err := root.OpenFile(lockFile, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		_ = root.Close()
		return nil, fmt.Errorf("open %s: %w", path.Join(dir, lockFile), err)
	}
	return &formatHandle{dir: dir, root: root, lockf: lockf}, nil
}

// hasFormat reports whether FORMAT exists (a new workspace has none).
func (f *formatHandle) hasFormat() bool {
	_, err := f.root.Lstat(formatFile)
	return err == nil
}

func (f *formatHandle) close() error {
	return errors.Join(f.lockf.Close(), f.root.Close())
}

// version reads FORMAT: 0 if it is missing.
func (f *formatHandle) version() (uint, bool, error) {
	data, err := f.root.ReadFile(formatFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return parseFormat(data)
}

// parseFormat decodes FORMAT's content: "N\n" or "N dirty\n".
func parseFormat(data []byte) (uint, bool, error) {
	fields := strings.Fields(string(data))
	if len(fields) == 0 || len(fields) > 2 || (len(fields) == 2 && fields[1] != "dirty") {
		return 0, false, &CorruptError{File: formatFile, Line: 1, Err: fmt.Errorf("want \"VERSION\" or \"VERSION dirty\", got %q", truncate(string(data), 40))}
	}
	v, err := strconv.ParseUint(fields[0], 10, 31)
	if err != nil {
		return 0, false, &CorruptError{File: formatFile, Line: 1, Err: fmt.Errorf("version %q is not a number", truncate(fields[0], 20))}
	}
	return uint(v), len(fields) == 2, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func (f *formatHandle) setVersion(v uint, dirty bool) error {
	if v == 0 && !dirty {
		err := f.root.Remove(formatFile)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		return err
	}
	s := strconv.FormatUint(uint64(v), 10)
	if dirty {
		s += " dirty"
	}
	dirs := dirSet{}
	if err := writeAtomic(f.root, formatFile, []byte(s+"\n"), dirs); err != nil {
		return err
	}
	return syncDirs(f.root, dirs)
}

// checkEmpty refuses to create a workspace in a directory holding anything
// that is not ours (a half-made workspace of ours is finished).
func (f *formatHandle) checkEmpty() error {
	d, err := f.root.Open(".")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if !isOwnEntry(n) {
			return fmt.Errorf("%s is not an agentspace json workspace (no %s) and is not empty: found %q", f.dir, formatFile, n)
		}
	}
	return nil
}

func isOwnEntry(n string) bool {
	for _, o := range ownEntries {
		if n == o {
			return true
		}
	}
	return strings.HasPrefix(n, tmpPrefix)
}

// migrate runs steps up or down to target. The caller holds the exclusive lock.
func (f *formatHandle) migrate(target uint) error {
	if target > latestFormat {
		return fmt.Errorf("format version %d is unknown: the newest is %d", target, latestFormat)
	}
	v, dirty, err := f.version()
	if err != nil {
		return err
	}
	if dirty {
		return &workspace.SchemaError{Current: int64(v), Want: int64(target), Dirty: true}
	}
	if v > latestFormat {
		return &workspace.SchemaError{Current: int64(v), Want: latestFormat} // #nosec G115 -- schema versions are small counts (our migrations number a handful)
	}
	for v < target {
		if err := f.step(v, v+1, migrations[v].up); err != nil {
			return err
		}
		v++
	}
	for v > target {
		if err := f.step(v, v-1, migrations[v-1].down); err != nil {
			return err
		}
		v--
	}
	return nil
}

func (f *formatHandle) step(from, to uint, fn func(*formatHandle) error) error {
	if from > 0 {
		if err := f.setVersion(from, true); err != nil {
			return err
		}
	}
	if err := fn(f); err != nil {
		if from == 0 {
			_ = f.setVersion(0, true)
		}
		return fmt.Errorf("json format migration %d -> %d: %w", from, to, err)
	}
	return f.setVersion(to, false)
}

// migrator implements workspace.Migrator for a json store.
type migrator struct{ f *formatHandle }

func (m *migrator) locked(exclusive bool, fn func() error) error {
	if err := flock(m.f.lockf, exclusive); err != nil {
		return err
	}
	defer func() { _ = funlock(m.f.lockf) }()
	return fn()
}

func (m *migrator) Version(ctx context.Context) (uint, bool, error) {
	var (
		v     uint
		dirty bool
	)
	err := m.locked(false, func() error {
		var err error
		v, dirty, err = m.f.version()
		return err
	})
	return v, dirty, err
}

func (m *migrator) Latest() uint { return latestFormat }

func (m *migrator) Up(ctx context.Context) error {
	return m.locked(true, func() error {
		v, _, err := m.f.version()
		if err == nil && v == 0 {
			if err := m.f.checkEmpty(); err != nil {
				return err
			}
		}
		if err != nil {
			return err
		}
		return m.f.migrate(latestFormat)
	})
}

func (m *migrator) Down(ctx context.Context, n int) error {
	return m.locked(true, func() error {
		v, _, err := m.f.version()
		if err != nil {
			return err
		}
		target := uint(0)
		if n > 0 && uint(n) < v {
			target = v - uint(n) // #nosec G115 -- n > 0 is checked above
		}
		return m.f.migrate(target)
	})
}

func (m *migrator) Goto(ctx context.Context, v uint) error {
	return m.locked(true, func() error { return m.f.migrate(v) })
}

func (m *migrator) Force(ctx context.Context, v int) error {
	if v < 0 || v > latestFormat {
		return &workspace.InvalidError{Field: "version", Reason: fmt.Sprintf("%d: the json format has versions 0 to %d", v, latestFormat)}
	}
	return m.locked(true, func() error { return m.f.setVersion(uint(v), false) }) // #nosec G115 -- v is in [0, latestFormat], checked above
}

func (m *migrator) Close() error { return m.f.close() }
