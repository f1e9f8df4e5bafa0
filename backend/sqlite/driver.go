package sqlite

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
	"github.com/agentspace/agentspace/workspace/engine"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// This backend's own DSN parameters.
const (
	// ParamSynchronous sets PRAGMA synchronous: FULL (the default), NORMAL or OFF.
	ParamSynchronous = "ws_synchronous"
	// ParamBusyTimeout is how long a connection waits for another one's
	// lock before giving up with SQLITE_BUSY (a duration; default 10s).
	ParamBusyTimeout = "ws_busy_timeout"
	// ParamIndexBatch is how many events the event log's tail holds before
	// a writer adds them to the filter indexes at once (1 to
	// MaxIndexBatch; default DefaultIndexBatch). Larger batches write
	// fewer index pages per event; a filtered read scans the tail.
	ParamIndexBatch = "ws_index_batch"
)

// DefaultBusyTimeout is the busy_timeout used when the DSN sets none.
const DefaultBusyTimeout = 10 * time.Second

// readConns is the size of a handle's read pool.
const readConns = 4

func init() {
	driver.Register("sqlite", engine.Backend(Driver{}))
}

// Driver is the driver.Driver of the "sqlite" scheme, registered as
// engine.Backend(Driver{}). It is also a driver.MigratingDriver, for
// `wsctl migrate`.
type Driver struct{}

// Params lists the backend's ws_ DSN parameters.
func (Driver) Params() []string { return []string{ParamBusyTimeout, ParamIndexBatch, ParamSynchronous} }

// Open opens (creating if needed) the database file cfg.Target names and
// checks its schema: an empty file gets the current one, an older one is a
// *workspace.SchemaError unless cfg.AutoMigrate, a newer one is refused.
func (Driver) Open(ctx context.Context, cfg driver.Config) (driver.Store, error) {
	s, err := parseSettings(cfg)
	if err != nil {
		return nil, err
	}
	return openFile(ctx, s, cfg.AutoMigrate, false, cfg.Logger)
}

// Probe reports whether cfg.Target is a workspace, creating nothing (it
// is driver.Driver's Probe, for workspace.Options.MustExist): the file
// must exist and hold a schema version. A file that is not a SQLite
// database is not reported as missing: opening it says what it is.
func (Driver) Probe(ctx context.Context, cfg driver.Config) error {
	s, err := parseSettings(cfg)
	if err != nil {
		return err
	}
	if err := fileExists(s.path); err != nil {
		return err
	}
	// A reader connection is query_only and the file exists, so nothing
	// is created but SQLite's own -wal and -shm files, as any reader's.
	db, err := openReader(s)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := readSchema(ctx, db, s.path)
	if err != nil {
		return err
	}
	return holdsWorkspace(st, s.path)
}

// OpenExisting implements driver.ExistingOpener: Probe and Open in one,
// the schema read once, on the reader connection the store keeps.
func (Driver) OpenExisting(ctx context.Context, cfg driver.Config) (driver.Store, error) {
	s, err := parseSettings(cfg)
	if err != nil {
		return nil, err
	}
	if err := fileExists(s.path); err != nil {
		return nil, err
	}
	return openFile(ctx, s, cfg.AutoMigrate, true, cfg.Logger)
}

// fileExists is the probe's first look: at the file, for what it can tell
// without opening it.
func fileExists(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return &workspace.NoWorkspaceError{Where: path, Reason: "the file does not exist"}
	case err != nil:
		return fmt.Errorf("sqlite: %w", err)
	case fi.IsDir():
		return &workspace.NoWorkspaceError{Where: path, Reason: "it is a directory, not a database file"}
	case fi.Size() == 0:
		return &workspace.NoWorkspaceError{Where: path, Reason: "the file is empty"}
	}
	return nil
}

// holdsWorkspace is the probe's answer for a file whose schema says st.
func holdsWorkspace(st schemaState, path string) error {
	if st.version == 0 && !st.dirty && st.empty {
		return &workspace.NoWorkspaceError{Where: path, Reason: "the database holds no workspace schema"}
	}
	return nil
}

// OpenMigrator opens cfg.Target for `wsctl migrate`, without a schema check.
func (Driver) OpenMigrator(ctx context.Context, cfg driver.Config) (workspace.Migrator, error) {
	s, err := parseSettings(cfg)
	if err != nil {
		return nil, err
	}
	if err := prepareFile(s.path); err != nil {
		return nil, err
	}
	s.blank = isBlank(s.path)
	db, err := openWriter(s)
	if err != nil {
		return nil, err
	}
	if err := pingDB(ctx, db, s.path); err != nil {
		_ = db.Close()
		return nil, err
	}
	return &migrator{db: db, lockPath: lockPathFor(s.path), path: s.path, owned: true}, nil
}

// Open opens the workspace in the SQLite file at path, creating the file and
// its directories if needed, with the defaults of workspace.Open("sqlite:"+path).
// path is a plain file path: DSN parameters need workspace.Open.
func Open(ctx context.Context, path string, opts workspace.Options) (*workspace.Workspace, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := settings{path: path, synchronous: "FULL", busyTimeout: DefaultBusyTimeout, indexBatch: DefaultIndexBatch, poll: opts.WithDefaults().PollInterval}
	if err := s.check(); err != nil {
		return nil, err
	}
	if strings.Contains(path, "?") {
		return nil, &workspace.InvalidError{Field: "path", Reason: fmt.Sprintf("%q contains '?': pass DSN parameters to workspace.Open", path)}
	}
	st, err := openFile(ctx, s, false, false, opts.Logger)
	if err != nil {
		return nil, fmt.Errorf("open sqlite:%s: %w", path, err)
	}
	return engine.New(st, opts), nil
}

// OpenDB returns a workspace on a *sql.DB the caller manages, opened with
// the modernc.org/sqlite driver ("sqlite"). An empty database gets the
// current schema; an older or newer one gives a *workspace.SchemaError.
// Closing the workspace does not close db.
//
// Configure db as Open configures its writer: a DSN with _txlock=immediate
// (writes take the write lock when they begin, so they queue with
// busy_timeout instead of failing when a read upgrades to a write),
// _pragma=busy_timeout(10000), _pragma=journal_mode(WAL),
// _pragma=foreign_keys(1), _pragma=synchronous(FULL),
// _pragma=temp_store(2) (statement journals in memory) and
// _pragma=cache_size(-16384) (a 16 MiB page cache: see cacheKiB), and
// db.SetMaxOpenConns(1) so that the handle's writes queue in the pool
// rather than at the file lock. Reads share db with the writes. Without
// _txlock=immediate writes stay correct but fail busy more often, and are
// retried.
func OpenDB(ctx context.Context, db *sql.DB, opts workspace.Options) (*workspace.Workspace, error) {
	if db == nil {
		return nil, &workspace.InvalidError{Field: "db", Reason: "is nil"}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	var path string
	if err := db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", describe(err, "the database"))
	}
	st := newStore(db, db, path, false, DefaultIndexBatch, opts.WithDefaults().PollInterval, opts.Logger)
	if err := ensureSchema(ctx, st, false); err != nil {
		return nil, err
	}
	if err := st.prepare(ctx); err != nil {
		return nil, err
	}
	return engine.New(st, opts), nil
}

// settings is what a DSN says about the file and its connections.
type settings struct {
	path        string
	extra       string // the DSN's other query parameters, for the driver
	synchronous string
	busyTimeout time.Duration
	indexBatch  int64
	// poll is the DSN's poll interval (see newStore).
	poll time.Duration
	// blank is a file with no pages yet: only then does the writer set
	// auto_vacuum (see dsn).
	blank bool
}

func parseSettings(cfg driver.Config) (settings, error) {
	path, extra, _ := strings.Cut(cfg.Target, "?")
	s := settings{path: path, extra: extra, synchronous: "FULL", busyTimeout: DefaultBusyTimeout, indexBatch: DefaultIndexBatch, poll: cfg.PollInterval}
	if s.poll <= 0 {
		s.poll = workspace.DefaultPollInterval
	}
	if v, ok := cfg.Params[ParamSynchronous]; ok {
		switch up := strings.ToUpper(v); up {
		case "FULL", "NORMAL", "OFF":
			s.synchronous = up
		default:
			return s, &workspace.InvalidError{Field: "dsn", Reason: fmt.Sprintf("%s=%q: want FULL, NORMAL or OFF", ParamSynchronous, v)}
		}
	}
	if v, ok := cfg.Params[ParamBusyTimeout]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > time.Hour {
			return s, &workspace.InvalidError{Field: "dsn", Reason: fmt.Sprintf("%s=%q: want a duration between 0 and 1h", ParamBusyTimeout, v)}
		}
		s.busyTimeout = d
	}
	if v, ok := cfg.Params[ParamIndexBatch]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxIndexBatch {
			return s, &workspace.InvalidError{Field: "dsn", Reason: fmt.Sprintf("%s=%q: want a whole number from 1 to %d", ParamIndexBatch, v, MaxIndexBatch)}
		}
		s.indexBatch = n
	}
	return s, s.check()
}

func (s settings) check() error {
	switch {
	case s.path == "":
		return &workspace.InvalidError{Field: "dsn", Reason: "sqlite: needs a file path, e.g. sqlite:.agentspace/workspace.db"}
	case s.path == ":memory:" || strings.HasPrefix(s.path, "file:"):
		return &workspace.InvalidError{Field: "dsn", Reason: fmt.Sprintf("sqlite: %q: want a plain file path (in-memory and URI databases are not shared between connections)", s.path)}
	}
	return nil
}

// dsn builds the driver DSN; our parameters come first, so they win where
// the driver reads only the first value (_txlock).
func (s settings) dsn(write bool) string {
	var b strings.Builder
	b.WriteString(s.path)
	b.WriteString("?_pragma=busy_timeout(")
	b.WriteString(strconv.FormatInt(s.busyTimeout.Milliseconds(), 10))
	b.WriteString(")&_pragma=foreign_keys(1)&_pragma=cache_size(" + strconv.Itoa(-cacheKiB) + ")&_pragma=journal_size_limit(" + strconv.Itoa(walSizeLimit) + ")")
	if write {
		// auto_vacuum=INCREMENTAL takes effect on a new file only (before
		// its first table); an older file keeps NONE until a VACUUM (see
		// Reclaim). It is set on a blank file only: on a file that has
		// tables, SQLite answers the pragma with a write transaction that
		// rewrites the header page with the same value, which would make
		// every open (a `wsctl task ls` too) commit, fsync the WAL three
		// times and checkpoint at exit. temp_store=MEMORY keeps a
		// statement's journal in memory: the event index batch (one UPDATE
		// of many rows) would otherwise spill it, past 64 KiB, to a
		// temporary file that the committer creates, writes and deletes
		// inside its transaction.
		if s.blank {
			b.WriteString("&_pragma=auto_vacuum(2)")
		}
		b.WriteString("&_pragma=journal_mode(WAL)&_pragma=synchronous(" + s.synchronous + ")&_pragma=temp_store(2)&_txlock=immediate")
	} else {
		b.WriteString("&_pragma=query_only(1)")
	}
	if s.extra != "" {
		b.WriteString("&" + s.extra)
	}
	return b.String()
}

// cacheKiB is each connection's page cache limit (PRAGMA cache_size, in
// KiB; SQLite's default is 2,000). modernc.org/sqlite is built with
// SQLITE_ENABLE_MEMORY_MANAGEMENT, so a process's connections share one
// page cache whose limit is the sum of theirs, with one LRU list. At the
// default, a handle that had written a store of 300,000 events or more
// read its hot pages again on every read transaction (strace: page 1 and
// the same dozen pages, each read from the file or the WAL, per `Get`):
// a `Get` by name took 15 µs where a fresh process took 9 µs, and the
// GROWTH rows W2 and the board 1.6x and 1.5x their 10,000-event figures
// at a million events. At 4 MiB that case was gone; at 16 MiB every
// GROWTH row stays within 1.02x from 10,000 to 1,000,000 events. A limit
// is not an allocation: a connection holds only the pages it has read,
// and a one-shot `wsctl` call reads a few dozen. A DSN's own
// _pragma=cache_size(N) comes after this one and wins.
const cacheKiB = 16 << 10

// walSizeLimit is the connections' journal_size_limit: a WAL restarted
// after a checkpoint is cut back to it (the automatic checkpoint keeps it
// near 4 MiB, so this cuts only after a long-held read), and, as the WAL
// persists (see filesDriver), the last connection to close truncates it
// to nothing once it has checkpointed it all.
const walSizeLimit = 64 << 20

// filesDriver opens the store's own connections: modernc.org/sqlite's,
// with SQLITE_FCNTL_PERSIST_WAL set on each. Without it the last
// connection to close deletes the -wal and -shm files, and the next
// process's first one creates them again: a one-shot `wsctl` call did
// both (twice, with the MustExist probe's connection), and creating a
// file where many were recently deleted costs ext4 milliseconds (its
// inode allocator skips recently freed inodes: `find_inode_bit` was 28%
// of a `wsctl task ls` profile here). A persisted WAL is truncated to
// nothing at the last clean close (walSizeLimit), so a stale one never
// holds frames that a file copied over the database could be read with.
// Connections the caller makes (OpenDB) or that check a backup copy keep
// the default.
var filesDriver = func() *msqlite.Driver {
	d := &msqlite.Driver{}
	d.RegisterConnectionHook(func(c msqlite.ExecQuerierContext, _ string) error {
		fc, ok := c.(msqlite.FileControl)
		if !ok {
			return fmt.Errorf("the driver's connection (%T) offers no file control", c)
		}
		_, err := fc.FileControlPersistWAL("main", 1)
		return err
	})
	return d
}()

// connector opens filesDriver's connections to dsn, for sql.OpenDB.
type connector struct{ dsn string }

func (c connector) Connect(context.Context) (sqldriver.Conn, error) { return filesDriver.Open(c.dsn) }
func (c connector) Driver() sqldriver.Driver                        { return filesDriver }

func openWriter(s settings) (*sql.DB, error) {
	db := sql.OpenDB(connector{s.dsn(true)})
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	db.SetConnMaxLifetime(0)
	return db, nil
}

func openReader(s settings) (*sql.DB, error) {
	db := sql.OpenDB(connector{s.dsn(false)})
	db.SetMaxOpenConns(readConns)
	db.SetMaxIdleConns(readConns)
	return db, nil
}

// prepareFile creates the file's directories (0700) and, if the file does
// not exist, the file itself (0600): SQLite gives its -wal and -shm files
// the database file's mode. An existing file is never opened here: closing
// any descriptor of it would drop this process's SQLite locks on it.
func prepareFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("sqlite: create directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600) // #nosec G304 -- the database file the DSN names: opening it is the point
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: create database file: %w", err)
	}
	return f.Close()
}

// isBlank reports whether the file at path has no pages yet (it was just
// created, or is empty): the one state in which auto_vacuum can be chosen.
// Two processes that both see it blank both set the same mode; the tables
// are created under the migration lock.
func isBlank(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() == 0
}

// openFile opens the store at s.path and brings its schema to the current
// version (or reports why not). Creating the file and migrating happen
// under the migration lock; opening an existing, current store does not
// wait for it, so many agents can open one store at once.
// With mustExist (OpenExisting) the file exists, and a schema that holds
// no workspace is refused as Probe refuses it, before anything is written.
func openFile(ctx context.Context, s settings, autoMigrate, mustExist bool, log *slog.Logger) (_ driver.Store, err error) {
	var unlock func()
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()
	lock := func() error {
		if unlock != nil {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
			return fmt.Errorf("sqlite: create directory: %w", err)
		}
		u, err := lockFile(ctx, lockPathFor(s.path))
		unlock = u
		return err
	}
	if _, err := os.Stat(s.path); err != nil {
		// The file is created under the lock: closing our descriptor of
		// it must not happen while another handle here has it open.
		if err := lock(); err != nil {
			return nil, err
		}
		if err := prepareFile(s.path); err != nil {
			return nil, err
		}
	}
	s.blank = isBlank(s.path)
	w, err := openWriter(s)
	if err != nil {
		return nil, err
	}
	r, err := openReader(s)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	st := newStore(w, r, s.path, true, s.indexBatch, s.poll, log)
	defer func() {
		if err != nil {
			_ = st.Close()
		}
	}()
	// The schema is read on a reader connection, which the reader pool
	// keeps for the reads to come: each new SQLite connection parses the
	// whole schema, and a handle that only reads (a `wsctl task ls`)
	// never opens its writer. The writer connects here only when the
	// schema needs the lock; otherwise at the first write.
	if err := pingDB(ctx, r, s.path); err != nil {
		return nil, err
	}
	var cur schemaState
	if err := retryBusy(ctx, log, "read the schema", func() (err error) {
		cur, err = readSchema(ctx, r, s.path)
		return err
	}); err != nil {
		return nil, err
	}
	if mustExist {
		if err := holdsWorkspace(cur, s.path); err != nil {
			return nil, err
		}
	}
	if cur.dirty || cur.version != LatestVersion() || cur.chainNext != 0 {
		// Empty, older, newer, mid-migration or with events to chain:
		// decide under the lock.
		if err := lock(); err != nil {
			return nil, err
		}
		if err := pingDB(ctx, w, s.path); err != nil {
			return nil, err
		}
		if err := checkOrMigrate(ctx, st, autoMigrate); err != nil {
			return nil, err
		}
	}
	if err := st.prepare(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// pingDB opens the first connection, which is where a file that is not a
// database shows (setting journal_mode reads its header). Switching a new
// file to WAL takes an exclusive lock without waiting for busy_timeout when
// that could deadlock, so a busy first connection is retried.
func pingDB(ctx context.Context, db *sql.DB, path string) error {
	if err := retryBusy(ctx, nil, "open", func() error { return db.PingContext(ctx) }); err != nil {
		return fmt.Errorf("sqlite: open: %w", describe(err, path))
	}
	return nil
}

// describe turns the driver's terse errors about the file into ones that
// say what is wrong with which file, keeping the cause.
func describe(err error, path string) error {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_NOTADB:
		return fmt.Errorf("%s is not a SQLite database (or it is encrypted): %w", path, err)
	case sqlite3.SQLITE_CORRUPT:
		return fmt.Errorf("%s is corrupt: %w", path, err)
	case sqlite3.SQLITE_CANTOPEN:
		return fmt.Errorf("cannot open %s: %w", path, err)
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM:
		return fmt.Errorf("%s is not writable: %w", path, err)
	}
	return err
}

// isBusy reports whether err is SQLITE_BUSY (or SQLITE_LOCKED): another
// connection held a lock past busy_timeout, and trying again may work.
func isBusy(err error) bool {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}
