package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// store is the driver.Store of one schema, on a pgx pool.
type store struct {
	pool    *pgxpool.Pool
	ownPool bool
	path    string // the schema as a search_path value
	key     int64  // the writers' advisory lock
	// startRead takes a View's snapshot; head and floor come with it, as
	// reads ask for them all the time. It names the schema: a batch is
	// prepared before its set_config runs.
	startRead string
	// startWrite reads a writer's clock, the head, and whether another
	// store listens, once it holds the lock (see lockWrite and
	// registration). It names the schema for the same reason.
	startWrite string
	// id names the store in the listeners table.
	id string
	// early holds the reads of a hinted record and its lease, naming the
	// schema for the same reason (see UpdateHinted).
	early earlyReads
	// viewAhead are ViewHinted's statements, naming the schema: they run
	// outside a transaction, with no search_path set.
	viewAhead viewReads
	channel   string // the NOTIFY channel
	listener  *listener
	own       atomic.Int64 // the last seq this store committed
	// memo is what the store's last write left, for predicted writes;
	// guard is the statement that checks a prediction (see predict.go).
	memo            memo
	guard, guardOne string
	// deleteBelow is gc's delete of the rows below the floor.
	deleteBelow string
	writers     writers
	// guardArrays has every prediction checked by guard, for tests.
	guardArrays bool
	log         *slog.Logger
}

// writeHook, set only by this package's tests (export_test.go), is
// called at points of every write transaction: hookAppend as it appends
// events (an answer of true sends no NOTIFY for them), hookCommit before
// its COMMIT is sent, hookCommitted once the COMMIT was acknowledged. The
// failover tests block in it while they crash the database, to land the
// crash at those moments.
var writeHook atomic.Pointer[func(point string, tx *writeTx) bool]

// hook calls writeHook, if set, at point.
func hook(point string, tx *writeTx) bool {
	if h := writeHook.Load(); h != nil {
		return (*h)(point, tx)
	}
	return false
}

// The points of writeHook.
const (
	hookAppend    = "append"
	hookCommit    = "commit"
	hookCommitted = "committed"
)

// maxAttempts bounds how often Update and View run fn after retryable failures.
const maxAttempts = 8

// openStore checks (or creates) the schema and starts the listener.
func openStore(ctx context.Context, pool *pgxpool.Pool, ownPool bool, opts Options) (*store, error) {
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if err := checkSchema(opts.Schema); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &store{
		pool:      pool,
		ownPool:   ownPool,
		path:      pgx.Identifier{opts.Schema}.Sanitize(),
		key:       lockKey(opts.Schema),
		startRead: qualify(opts.Schema, `SELECT set_config('search_path', $1, true), clock_timestamp(), seq, floor FROM counters`),
		startWrite: qualify(opts.Schema, `SELECT clock_timestamp(), seq,
			EXISTS (SELECT 1 FROM listeners WHERE store <> $1 AND expires_at > clock_timestamp()) FROM counters`),
		id:          uuid.NewString(),
		early:       newEarlyReads(opts.Schema),
		guard:       qualify(opts.Schema, guardSQL),
		guardOne:    qualify(opts.Schema, guardOneSQL),
		deleteBelow: deleteBelowFloor(opts.Schema),
		viewAhead:   newViewReads(opts.Schema),
		channel:     channelName(opts.Schema),
		log:         opts.Logger,
	}
	// Migrations hold a session advisory lock and LISTEN needs a session:
	// both go to ListenDSN when set, the pool's server otherwise.
	session := pool.Config().ConnConfig
	if opts.ListenDSN != "" {
		var err error
		if session, err = pgx.ParseConfig(opts.ListenDSN); err != nil {
			return nil, driver.RedactError(fmt.Errorf("parse %s: %w", paramListenDSN, err), opts.ListenDSN)
		}
	}
	if err := checkSchemaVersion(ctx, pool, session, opts.Schema, opts.AutoMigrate); err != nil {
		return nil, driver.RedactError(err, opts.ListenDSN)
	}
	if !opts.NoListen {
		s.listener = newListener(session, s.channel, newRegistration(opts.Schema, s.key, s.id, listenTTL), s.log)
		s.listener.own = &s.own
		s.listener.probe = pool.Ping
	}
	return s, nil
}

var _ driver.Notifier = (*store)(nil)

// Notify implements driver.Notifier: the listener's notifications, which
// carry the head and, when they fit, the events; the listener listens
// only while wanted reports true (see Interest). It offers nothing when
// LISTEN is off, and the engine then polls.
func (s *store) Notify(wanted func() bool) driver.Notifications {
	if s.listener == nil {
		return driver.Notifications{}
	}
	s.Interest(wanted)
	return driver.Notifications{Changes: s.Changes(), Wake: s.Wake, Head: s.NotifiedHead, Events: s.NotifiedEvents, Restarts: s.NotifyRestarts}
}

// Changes is Notify's Changes. It is nil when LISTEN is off. The first
// call starts the listener: lazy, when Interest came first; else
// listening from then on.
func (s *store) Changes() <-chan struct{} {
	if s.listener == nil {
		return nil
	}
	s.listener.start()
	return s.listener.changes
}

// Interest is Notify's wanted: the listener listens (and
// other stores' writers notify) only while wanted reports true, and for
// listenLinger after.
func (s *store) Interest(wanted func() bool) {
	if s.listener != nil {
		s.listener.wanted = wanted
	}
}

// Wake is Notify's Wake: the listener looks at wanted again.
func (s *store) Wake() {
	if s.listener != nil {
		s.listener.poke()
	}
}

// NotifiedHead is Notify's Head.
func (s *store) NotifiedHead() int64 {
	if s.listener == nil {
		return 0
	}
	return s.listener.heard.Load()
}

// NotifyRestarts is Notify's Restarts: the listener's restarts.
func (s *store) NotifyRestarts() int64 {
	if s.listener == nil {
		return 0
	}
	return s.listener.restarts.Load()
}

// NotifiedEvents is Notify's Events.
func (s *store) NotifiedEvents() []workspace.Event {
	if s.listener == nil {
		return nil
	}
	return s.listener.takeEvents()
}

func (s *store) Close() error {
	if s.listener != nil {
		s.listener.close()
	}
	if s.ownPool {
		s.pool.Close()
	}
	return nil
}

// Update runs fn in a transaction that holds the schema's advisory lock,
// retrying serialization failures, deadlocks and connections lost before
// the commit was sent.
func (s *store) Update(ctx context.Context, fn func(tx driver.Tx) error) error {
	return s.retry(ctx, "update", func() (bool, error) { return s.updateOnce(ctx, nil, fn) })
}

// UpdateHinted implements driver.HintedUpdater: the hinted records
// (artifacts, notes, tasks, leases, a claim's; at most maxEarly) and the
// leases that guard them are read
// in the round trip that takes the writers' lock, after it, so the reads of
// a group's ops cost no round trips of their own.
func (s *store) UpdateHinted(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.Tx) error) error {
	return s.retry(ctx, "update", func() (bool, error) { return s.updateOnce(ctx, hints, fn) })
}

// maxEarly bounds the records a transaction reads ahead.
const maxEarly = 32

// View runs fn in a REPEATABLE READ READ ONLY transaction: one snapshot.
func (s *store) View(ctx context.Context, fn func(tx driver.ReadTx) error) error {
	return s.retry(ctx, "view", func() (bool, error) { return s.viewOnce(ctx, fn) })
}

func (s *store) retry(ctx context.Context, op string, once func() (bool, error)) error {
	backoff := 5 * time.Millisecond
	for attempt := 1; ; attempt++ {
		retryable, err := once()
		if err == nil || !retryable || attempt == maxAttempts || ctx.Err() != nil {
			return unavailable(err, false)
		}
		s.log.Debug("agentspace: postgres transaction failed; retrying", "op", op, "attempt", attempt, "err", err)
		sleep := backoff/2 + rand.N(backoff) // #nosec G404 -- retry jitter needs no unpredictability
		select {
		case <-time.After(sleep):
		case <-ctx.Done():
			return unavailable(err, false)
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

const (
	beginWrite = `BEGIN ISOLATION LEVEL READ COMMITTED`
	// lockWrite scopes the search_path to the transaction and serializes the
	// schema's writers; the clock and the event log's head are read in the
	// next statement, after the lock is held, so Now never goes back from
	// one writer to the next and the head stays what it was read as until
	// the commit: only writers holding the lock move it.
	lockWrite = `SELECT set_config('search_path', $1, true), pg_advisory_xact_lock($2)`
	// lockWriteGeneric is lockWrite and genericOn in one statement, for a
	// predicted group (see updatePredicted).
	lockWriteGeneric = `SELECT set_config('search_path', $1, true), pg_advisory_xact_lock($2),
		set_config('plan_cache_mode', 'force_generic_plan', true)
		FROM (SELECT set_config('agentspace.plan_cache_mode', current_setting('plan_cache_mode'), true) OFFSET 0) saved`
	beginRead  = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
	commitStmt = `COMMIT`
)

// updateOnce runs one attempt of Update; it reports whether a failure may
// be retried. A transaction that runs alone on a store whose memo knows
// what it reads is tried on that prediction first (see predict.go).
func (s *store) updateOnce(ctx context.Context, hints []driver.ReadHint, fn func(tx driver.Tx) error) (bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("postgres: acquire connection: %w", err)
	}
	defer conn.Release()
	alone, start := s.writers.begin()
	defer s.writers.end()
	still := func() bool { return s.writers.still(alone, start) }
	if alone {
		if p, ok := s.memo.predict(hints, s.NotifiedHead()); ok {
			if done, retry, err := s.updatePredicted(ctx, conn, p, fn, still); done {
				return retry, err
			}
		}
	}
	b := &pgx.Batch{}
	b.Queue(beginWrite)
	b.Queue(lockWrite, s.path, s.key)
	var (
		now    time.Time
		head   int64
		notify bool
	)
	b.Queue(s.startWrite, s.id).QueryRow(func(row pgx.Row) error { return row.Scan(&now, &head, &notify) })
	early := s.early.queueAll(b, hints[:min(len(hints), maxEarly)])
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		s.abort(conn)
		return retryable(conn, err), fmt.Errorf("postgres: begin: %w", err)
	}
	if own := s.own.Load(); head < own {
		// The log lost commits this store acknowledged (a failover to a
		// replica behind): appending now would give their seqs to other
		// events. Nothing is written.
		s.abort(conn)
		s.memo.drop()
		return false, fmt.Errorf("postgres: %w: the log's head is %d, below seq %d this store committed", workspace.ErrRewound, head, own)
	}
	started := time.Now()
	pl := newPipeline(ctx, conn)
	pl.early = early
	reads := slices.Clone(early)
	tx := &writeTx{readTx: readTx{q: pl, pl: pl, now: clock(now)}, channel: s.channel, notify: notify, seq: head, wrote: make([]memoWrite, 0, min(len(hints), maxEarly))}
	if err := fn(tx); err != nil {
		s.abort(conn)
		return retryable(conn, err), err
	}
	hook(hookCommit, tx)
	if pl.broken != nil {
		// A send lost the savepoints (see pipeline.broken): nothing was
		// committed, and the whole attempt may run again.
		s.abort(conn)
		s.memo.drop()
		return retryable(conn, pl.broken), unavailable(pl.broken, false)
	}
	tag, err := pl.commit()
	if err != nil {
		s.abort(conn)
		s.memo.drop()
		// The queued writes went with the COMMIT: only a refusal from the
		// server proves that nothing was committed.
		var pe *pgconn.PgError
		return errors.As(err, &pe) && abortedCode(pe.Code), unavailable(fmt.Errorf("postgres: commit: %w", err), true)
	}
	if tag.String() != "COMMIT" {
		return false, fmt.Errorf("postgres: commit: transaction was rolled back (%s)", tag.String())
	}
	hook(hookCommitted, tx)
	if tx.seq > head {
		// Only seqs this transaction appended are the store's own.
		raise(&s.own, tx.seq)
	}
	s.memo.learn(learned{tx: tx, alone: still(), offset: now.Sub(started), start: head, reads: reads})
	return false, nil
}

// updatePredicted runs fn on prediction p and sends its writes with BEGIN,
// the writers' lock, the guard and COMMIT in one round trip. It is done
// unless the transaction must run the usual way: fn read what was not
// predicted or failed (perhaps because of a value predicted), in which
// case nothing was sent, or the server refused a statement before the
// COMMIT (the guard, most likely), in which case nothing was written.
// still reports whether it has run alone (see writers).
func (s *store) updatePredicted(ctx context.Context, conn *pgxpool.Conn, p prediction, fn func(tx driver.Tx) error,
	still func() bool) (done, retry bool, err error) {
	pl := newPipeline(ctx, conn)
	pl.predicted = true
	pl.queue(beginWrite)
	if p.one() && !s.guardArrays {
		pl.queue(lockWrite, s.path, s.key)
		pl.queue(s.guardOne, newGuardOneParams(p, s.id).args()...)
	} else {
		// The guard of arrays wants generic plans, as does a group's
		// append of its events; the group's writes between are planned
		// alike either way (pipeline.generic).
		pl.queue(lockWriteGeneric, s.path, s.key)
		pl.queue(s.guard, newGuardParams(p, s.id).args()...)
		pl.generic = true
	}
	pl.early = p.early
	reads := slices.Clone(p.early)
	tx := &writeTx{readTx: readTx{q: pl, pl: pl, now: p.now}, channel: s.channel, notify: p.notify, seq: p.head, wrote: make([]memoWrite, 0, len(p.early))}
	if err := fn(tx); err != nil || pl.unpredicted {
		return false, false, nil
	}
	last := len(pl.sqls) // COMMIT's place
	hook(hookCommit, tx)
	tag, err := pl.commit()
	if err != nil {
		s.abort(conn)
		var pre pgx.ErrPreprocessingBatch
		if errors.As(err, &pre) {
			// Nothing ran: a statement new to this connection was parsed
			// before the batch set the search_path. The usual way
			// prepares it inside the transaction, for the next time.
			return false, false, nil
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pl.failedAt < last {
			// Refused before the COMMIT: nothing was written.
			s.memo.failed()
			return false, false, nil
		}
		s.memo.drop()
		return true, errors.As(err, &pe) && abortedCode(pe.Code), unavailable(fmt.Errorf("postgres: commit: %w", err), true)
	}
	if tag.String() != "COMMIT" {
		s.memo.failed()
		return true, false, fmt.Errorf("postgres: commit: transaction was rolled back (%s)", tag.String())
	}
	hook(hookCommitted, tx)
	if tx.seq > p.head {
		raise(&s.own, tx.seq)
	}
	s.memo.learn(learned{tx: tx, alone: still(), predicted: true, start: p.head, reads: reads})
	return true, false, nil
}

func (s *store) viewOnce(ctx context.Context, fn func(tx driver.ReadTx) error) (bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("postgres: acquire connection: %w", err)
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue(beginRead)
	var (
		now         time.Time
		head, floor int64
	)
	b.Queue(s.startRead, s.path).QueryRow(func(row pgx.Row) error { return row.Scan(nil, &now, &head, &floor) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		s.abort(conn)
		return retryable(conn, err), fmt.Errorf("postgres: begin: %w", err)
	}
	pl := newPipeline(ctx, conn)
	if err := fn(&readTx{q: pl, pl: pl, now: clock(now), snapshot: true, head: head, floor: floor}); err != nil {
		s.abort(conn)
		return retryable(conn, err), err
	}
	if _, err := pl.commit(); err != nil {
		s.abort(conn)
		return retryable(conn, err), fmt.Errorf("postgres: end read: %w", err)
	}
	return false, nil
}

// abort rolls back whatever transaction conn is in. A connection that
// cannot is closed, so the pool never hands out one inside a transaction.
func (s *store) abort(conn *pgxpool.Conn) {
	if conn.Conn().IsClosed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// retryable reports whether an attempt that failed before its commit may be
// run again: the server asked for it, or the connection died under it.
func retryable(conn *pgxpool.Conn, err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return retryableCode(pe.Code)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return conn.Conn().IsClosed() || pgconn.SafeToRetry(err)
}

// retryableCode reports whether the server aborted the transaction for a
// reason that a new attempt may not meet, before COMMIT was processed.
func retryableCode(code string) bool {
	switch code {
	case "40001", "40P01": // serialization_failure, deadlock_detected
		return true
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return true
	}
	return false
}

// abortedCode reports whether an error received in reply to a COMMIT batch
// proves that the transaction did not commit. A terminated backend
// (57P01) may have committed before it died, so it is not proof.
func abortedCode(code string) bool { return code == "40001" || code == "40P01" }

// clock normalizes a database time: UTC, microseconds.
func clock(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
