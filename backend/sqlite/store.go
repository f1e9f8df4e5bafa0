package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/agentspace/agentspace/internal/dirwatch"
	"github.com/agentspace/agentspace/internal/filegate"
	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// maxBusyRetries bounds how often a transaction that found the database
// busy past busy_timeout is tried again.
const maxBusyRetries = 8

// store is the driver.Store on one SQLite file: a one-connection writer
// pool and a read pool (the same *sql.DB for OpenDB).
type store struct {
	w, r   *sql.DB
	ws, rs *stmtCache // prepared statements of w and r (the same cache if w == r)
	path   string
	owned  bool // Close closes w and r
	log    *slog.Logger
	watch  *dirwatch.Watcher // nil: other processes' commits are polled for
	// bell is rung after each commit (see dirwatch.Bell), and is what
	// watch watches; nil where it cannot be opened, and then watch, if
	// set, watches the WAL's writes, which come before the commit can be
	// read (early).
	bell *dirwatch.Bell
	// ended is a read transaction already rolled back: every statement on
	// it fails with sql.ErrTxDone. A read-ahead view's other reads run on
	// it (see ViewHinted).
	ended *sql.Tx
	gate  *filegate.Gate // this process's writers of the file, in line
	// indexBatch is the length of the event log's tail at which a writer
	// indexes it (ParamIndexBatch).
	indexBatch int64
	// memo is what the store's own commits left (see memo.go).
	memo memo
}

// newStore makes the store of w and r; poll is how often a waiter looks
// at the file for other processes' commits where the file cannot be
// watched after all.
func newStore(w, r *sql.DB, path string, owned bool, indexBatch int64, poll time.Duration, log *slog.Logger) *store {
	s := &store{w: w, r: r, path: path, owned: owned, indexBatch: indexBatch, log: log}
	if poll <= 0 {
		poll = workspace.DefaultPollInterval
	}
	if path != "" && path != ":memory:" {
		s.gate = filegate.Open(path)
		if err := s.watchFile(path, poll); err != nil && !errors.Is(err, dirwatch.ErrUnsupported) {
			log.Debug("agentspace: cannot watch the database file; polling for other processes' commits", "err", err)
		}
	}
	return s
}

// watchFile sets what wakes the store for other handles' commits. Every
// process's commits ring the file's bell once they can be read: watching
// it wakes waiters at once. Where the bell cannot be opened or watched (a
// directory this process may not write), the database file and its WAL
// are watched instead, whose writes come before the commit can be read
// (and also wake for the commits of releases before the bell). The watch
// begins when someone first waits (Notify's Wake): a handle that never
// waits, as a `wsctl task ls` does not, never pays the 8-20 ms that
// ending a watch costs (see dirwatch.Watcher.Start).
func (s *store) watchFile(path string, poll time.Duration) error {
	if bell, err := openBell(BellPath(path)); err == nil {
		watch, err := dirwatch.WatchBellLater(BellPath(path), poll)
		if err == nil {
			s.bell, s.watch = bell, watch
			return nil
		}
		_ = bell.Close()
	}
	base := filepath.Base(path)
	var err error
	s.watch, err = dirwatch.NewLater(filepath.Dir(path), poll, base, base+"-wal")
	return err
}

var _ driver.Notifier = (*store)(nil)

// Notify implements driver.Notifier where the file can be watched (it
// offers nothing otherwise, and the engine polls). A bell rings after its
// commit can be read; without a bell the notifications are early: the
// file watch sees a commit's WAL frames as they are written, before its
// fsync ends and the commit is published in the WAL index.
func (s *store) Notify(wanted func() bool) driver.Notifications {
	if s.watch == nil {
		return driver.Notifications{}
	}
	wake := func() {
		if !wanted() {
			return
		}
		// Once begun, the watch stays until Close: a file watch that
		// nobody takes from costs nothing (dirwatch), and ending one costs
		// milliseconds.
		if err := s.watch.Start(); err != nil && !errors.Is(err, os.ErrClosed) {
			s.log.Warn("agentspace: cannot watch the database file; polling for other processes' commits", "path", s.path, "err", err)
		}
	}
	return driver.Notifications{Changes: s.watch.C, Early: s.bell == nil, Wake: wake}
}

// prepare makes the statement caches, which prepare each query after its
// first run; the schema must be in place.
func (s *store) prepare(ctx context.Context) error {
	s.ws = newStmtCache(s.w, writeQueries)
	if s.r == s.w {
		s.rs = s.ws
	} else {
		s.rs = newStmtCache(s.r, readQueries)
	}
	return s.endTx(ctx)
}

// endTx sets ended: a transaction begun and rolled back at once, which
// holds no connection.
func (s *store) endTx(ctx context.Context) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("sqlite: begin read: %w", describe(err, s.path))
	}
	_ = tx.Rollback()
	s.ended = tx
	return nil
}

// querier is what both transactions run statements on.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *store) Close() error {
	_ = s.watch.Close()
	_ = s.bell.Close()
	s.gate.Close()
	s.ws.close()
	if s.rs != s.ws {
		s.rs.close()
	}
	if !s.owned {
		return nil
	}
	return errors.Join(s.r.Close(), s.w.Close())
}

// Update runs fn in a BEGIN IMMEDIATE transaction on the writer connection,
// after the writers of other handles on the file in this process.
func (s *store) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	return s.update(ctx, nil, fn)
}

// UpdateHinted implements driver.HintedUpdater: Update, with the hinted
// artifacts read ahead in a statement or two when there are two or more
// (see readArtifactsAhead).
func (s *store) UpdateHinted(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.Tx) error) error {
	return s.update(ctx, hints, fn)
}

// JoinsLate implements driver.LateJoiner: a write transaction reads the
// file directly, hinted or not.
func (s *store) JoinsLate() bool { return true }

func (s *store) update(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.Tx) error) error {
	if err := s.gate.Enter(ctx); err != nil {
		return err
	}
	defer s.gate.Leave()
	// Deferred after Leave, so it runs before it (no other handle of the
	// process writes) and after the transaction (its connection is free).
	defer s.ws.prepareWanted(ctx)
	return s.retry(ctx, "write", func() error {
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("sqlite: begin write: %w", describe(err, s.path))
		}
		wt := &writeTx{readTx: readTx{q: txq{tx: tx, cache: s.ws, whole: true, kept: &kept{}}, now: now()}, indexBatch: s.indexBatch}
		if err := wt.fromMemo(ctx, &s.memo, hints); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := wt.readArtifactsAhead(ctx, hints); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := fn(wt); err != nil {
			_ = tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("sqlite: commit: %w", describe(err, s.path))
		}
		s.memo.learn(&wt.noted)
		s.ring()
		return nil
	})
}

// ring tells the processes following the file that a commit can be
// read. A ring that fails is not the commit's failure: its followers
// find the commit at their next poll.
func (s *store) ring() { _ = s.bell.Ring() }

// openBell opens a store's bell (a variable for the test of a process
// that rings none).
var openBell = dirwatch.OpenBell

// BellPath is the bell (dirwatch.Bell) beside the database file at path,
// which every process rings after its commits.
func BellPath(path string) string { return path + "-bell" }

// Checkpoint implements driver.Checkpointer: a PASSIVE checkpoint, which
// copies back the WAL frames no reader still needs and never waits for or
// blocks a writer. It runs on a reader connection: query_only does not
// stop a checkpoint.
func (s *store) Checkpoint(ctx context.Context) error {
	if _, err := s.r.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return fmt.Errorf("sqlite: checkpoint: %w", describe(err, s.path))
	}
	return nil
}

// A reclaim step frees a fixed number of pages: a pragma takes no
// parameters, and its text is never built.
const (
	reclaimLarge  = 1024
	qReclaimSmall = `PRAGMA incremental_vacuum(128)`
	qReclaimLarge = `PRAGMA incremental_vacuum(1024)`
)

// Reclaim implements driver.Reclaimer (pages below 1024 free 128, more free
// 1024). With auto_vacuum=INCREMENTAL (every
// file created by this version) one step is PRAGMA incremental_vacuum(pages)
// in a write transaction of its own. A file created before has no pointer
// map to move pages by: its first Reclaim switches it to INCREMENTAL with a
// VACUUM, which rewrites the whole file and holds the write lock while it
// does (writers wait, up to busy_timeout in other processes).
func (s *store) Reclaim(ctx context.Context, pages int64) (freed, left int64, err error) {
	var mode, pageSize, free, before int64
	read := func() error {
		for q, v := range map[string]*int64{`PRAGMA auto_vacuum`: &mode, `PRAGMA page_size`: &pageSize, `PRAGMA freelist_count`: &free} {
			if err := s.w.QueryRowContext(ctx, q).Scan(v); err != nil {
				return fmt.Errorf("sqlite: reclaim: %w", describe(err, s.path))
			}
		}
		return nil
	}
	if err := s.gate.Enter(ctx); err != nil {
		return 0, 0, err
	}
	defer s.gate.Leave()
	if err := read(); err != nil {
		return 0, 0, err
	}
	if pages <= 0 || free == 0 {
		return 0, free * pageSize, nil
	}
	before = free
	err = s.retry(ctx, "reclaim", func() error {
		if mode != 2 {
			// Not a transaction: VACUUM cannot run in one.
			_, err := s.w.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`)
			if err == nil {
				_, err = s.w.ExecContext(ctx, `VACUUM`)
			}
			return err
		}
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		q := qReclaimSmall
		if pages >= reclaimLarge {
			q = qReclaimLarge
		}
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		if err := rows.Close(); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: reclaim: %w", describe(err, s.path))
	}
	if err := read(); err != nil {
		return 0, 0, err
	}
	return (before - free) * pageSize, free * pageSize, nil
}

// View runs fn in a read transaction. Its first statement reads the floor,
// which starts the WAL snapshot every later read in fn sees.
func (s *store) View(ctx context.Context, fn func(tx driver.ReadTx) error) error {
	defer s.rs.prepareWanted(ctx)
	return s.retry(ctx, "read", func() error {
		tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return fmt.Errorf("sqlite: begin read: %w", describe(err, s.path))
		}
		defer func() { _ = tx.Rollback() }()
		rt := &readTx{q: txq{tx: tx, cache: s.rs}, now: now()}
		if err := rt.q.QueryRowContext(ctx, qFloor).Scan(&rt.floor); err != nil {
			return fmt.Errorf("sqlite: read meta: %w", describe(err, s.path))
		}
		if err := fn(rt); err != nil {
			return err
		}
		return tx.Commit()
	})
}

// retry runs op with retryBusy, logging to the store's logger. A
// transaction whose context ended is rolled back by database/sql, on a
// goroutine of its own, and a statement under way meanwhile fails with
// whatever database/sql makes of it: sql.ErrTxDone, or "sql: Rows are
// closed" when the rollback closes a row between its Next and its Scan
// (an error database/sql does not export). Any failure of op once ctx
// has ended is reported as the context's error, which is what ended it:
// nothing was committed (a commit that returns an error did not commit),
// and a write transaction's context ends only when every caller in its
// group has given up (see engine's runGroup).
func (s *store) retry(ctx context.Context, what string, op func() error) error {
	err := retryBusy(ctx, s.log, what, op)
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// retryBusy runs op until it does not fail with SQLITE_BUSY, at most
// maxBusyRetries more times, backing off with jitter. A busy op has left
// nothing behind (its transaction was rolled back), and Store.Update's fn
// may be run again by contract.
func retryBusy(ctx context.Context, log *slog.Logger, what string, op func() error) error {
	delay := 5 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := op()
		switch {
		case err == nil || !isBusy(err):
			return err
		case ctx.Err() != nil:
			return fmt.Errorf("sqlite: waiting for another connection's lock: %w", ctx.Err())
		case attempt == maxBusyRetries:
			// Another process held the lock through every retry: the
			// store is unavailable for now, as a database that does not
			// answer is (ErrUnavailable; wsctl exits 75, "try again").
			return &workspace.UnavailableError{Backend: "sqlite", Cause: err}
		}
		if log != nil {
			log.Debug("agentspace: sqlite busy; retrying", "op", what, "attempt", attempt+1, "err", err)
		}
		t := time.NewTimer(delay/2 + rand.N(delay)) // #nosec G404 -- retry jitter needs no unpredictability
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sqlite: waiting for another connection's lock: %w", ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, time.Second)
	}
}

func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// readTx implements driver.ReadTx on one transaction.
type readTx struct {
	q     querier
	now   time.Time
	floor int64 // set by View's first read; 0: read it when asked
	// viewed is what a read-ahead view read (see ViewHinted).
	viewed *viewed
}

// writeTx implements driver.Tx.
type writeTx struct {
	readTx
	depth int // open savepoints
	// indexBatch: see store.indexBatch.
	indexBatch int64
	// leaseRead is the lease Artifact read last, until a lease write or a
	// savepoint's rollback.
	leaseRead *leaseRead
	// readAhead are the artifacts read ahead (see readArtifactsAhead),
	// each until it is taken or a write makes it stale.
	readAhead []readAheadHead
	// noted is what the store's memo learns from the transaction if it
	// commits; memoed counts the artifacts the memo answered.
	noted  noted
	memoed int
}

func (t *readTx) Now() time.Time { return t.now }

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// Times are stored as microseconds since the epoch; NULL is the zero time.

func micros(t time.Time) int64 { return t.UnixMicro() }

func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

// jsonText encodes v for a JSON column, NULL for an empty value.
func jsonText(v any, empty bool) (any, error) {
	if empty {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// decodeJSON decodes a JSON column into v, naming the row if it is corrupt.
func decodeJSON(s sql.NullString, v any, table, key, column string) error {
	if !s.Valid || s.String == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(s.String), v); err != nil {
		return corrupt(table, key, column, err)
	}
	return nil
}

func corrupt(table, key, column string, err error) error {
	return fmt.Errorf("sqlite: corrupt row in table %s (key %q): column %s: %w", table, key, column, err)
}

// notFound turns sql.ErrNoRows into workspace.ErrNotFound.
func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, workspace.ErrNotFound)
	}
	return fmt.Errorf("sqlite: %s: %w", what, err)
}
