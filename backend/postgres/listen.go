package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentspace/agentspace/workspace"
)

// Listener timings. A blocked read cannot see a half-open TCP connection,
// so a listener refreshes its registration, which pings the server, every
// listenPing; a registration not refreshed for listenTTL lapses.
const (
	listenPing       = 15 * time.Second
	listenPingWait   = 5 * time.Second
	listenTTL        = 4 * listenPing
	listenLinger     = 10 * time.Second
	unregisterWait   = time.Second
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
	// listenProbe is how often a listener waiting out its back-off asks
	// the pool whether the database answers again, and listenProbeWait
	// how long one probe may take.
	listenProbe     = 100 * time.Millisecond
	listenProbeWait = time.Second
)

// listener holds one dedicated session connection that LISTENs on the
// workspace's channel while its engine has someone waiting for a change
// (and for a while after: see linger), and turns every notification, and
// every start of listening, into a coalesced hint on changes.
// Notifications sent while it was not listening are lost; the hint after
// it starts makes the engine catch up from the log.
//
// While it listens, its store is registered in the schema's listeners
// table, so that other stores' writers notify (see registration). A
// listener without a registration hears only writers that always notify.
type listener struct {
	cfg      *pgx.ConnConfig
	ping     time.Duration // how often the registration is refreshed and the connection pinged
	pingWait time.Duration // how long that may take before the connection counts as dead
	linger   time.Duration // how long it keeps listening after no one wants it
	// backoffMin and backoffMax bound the wait between failed connects;
	// probe, when set, is tried every probeEvery meanwhile and ends the
	// wait when it succeeds (see waitOut).
	backoffMin, backoffMax time.Duration
	probe                  func(context.Context) error
	probeEvery             time.Duration
	// failed counts failed connects, for tests.
	failed  atomic.Int64
	channel string
	reg     *registration
	log     *slog.Logger
	changes chan struct{}
	// wake is poked when the engine may have begun to want changes.
	wake chan struct{}
	// wanted reports whether anyone waits for a change; nil: always.
	wanted func() bool
	// own is the last seq its store committed, when set: a notification
	// of a commit no later than that is the store's own (or older), and
	// the engine has already seen it.
	own *atomic.Int64
	// heard is the highest seq announced since listening last started, 0
	// before that and while not listening: see driver.Notifications.Head.
	heard atomic.Int64
	// restarts counts restart calls: what was heard before one may be of
	// a server that is gone (see store.NotifyRestarts).
	restarts atomic.Int64
	// carried holds the events notifications carried since the engine
	// last took them (see driver.Notifications.Events), at most maxCarried.
	carriedMu sync.Mutex
	carried   []workspace.Event
	startOnce sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}

	mu  sync.Mutex
	pid uint32 // the backend of the current connection, for tests
}

// registration is a listening store's row in the schema's listeners
// table. It is written, refreshed and read (by writers deciding whether
// to notify) under the writers' advisory lock, each time by the
// database's clock: a writer that did not see it committed before it was
// written, so the head the engine reads once listening has started covers
// that writer's commit; every later writer sees it and notifies, until it
// lapses. A lapse is found at the next refresh, which registers again and
// hints the engine to look in the log.
type registration struct {
	key   int64         // the writers' advisory lock
	store string        // the registering store's id
	ttl   time.Duration // how long a registration lasts unrefreshed
	// upsert writes the store's row and reports whether the row was live
	// before; rows of stores that died are dropped on the way. It runs
	// after the writers' lock is taken, in the same transaction.
	upsert string
	// drop deletes the store's row.
	drop string
}

// newRegistration is the registration of store in schema's listeners table.
func newRegistration(schema string, key int64, store string, ttl time.Duration) *registration {
	return &registration{key: key, store: store, ttl: ttl,
		upsert: `WITH old AS (SELECT expires_at > clock_timestamp() AS live FROM ` + pgx.Identifier{schema, "listeners"}.Sanitize() + ` WHERE store = $1),
			gone AS (DELETE FROM ` + pgx.Identifier{schema, "listeners"}.Sanitize() + ` WHERE expires_at < clock_timestamp() AND store <> $1),
			up AS (INSERT INTO ` + pgx.Identifier{schema, "listeners"}.Sanitize() + ` (store, expires_at)
				VALUES ($1, clock_timestamp() + $2::bigint * interval '1 microsecond')
				ON CONFLICT (store) DO UPDATE SET expires_at = EXCLUDED.expires_at)
		SELECT coalesce((SELECT live FROM old), false)`,
		drop: `DELETE FROM ` + pgx.Identifier{schema, "listeners"}.Sanitize() + ` WHERE store = $1`,
	}
}

// register writes or refreshes the registration, under the writers' lock,
// and reports whether it was still live.
func (l *listener) register(ctx context.Context, conn *pgx.Conn) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.pingWait)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, l.reg.key)
	var live bool
	b.Queue(l.reg.upsert, l.reg.store, l.reg.ttl.Microseconds()).QueryRow(func(row pgx.Row) error { return row.Scan(&live) })
	b.Queue(`COMMIT`)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("register listener: %w", err)
	}
	return live, nil
}

// unregister drops the registration, so writers stop notifying at once
// rather than when it lapses. It is best effort, and bounded by
// unregisterWait so that closing a store never waits long on a server that
// is gone.
func (l *listener) unregister(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), unregisterWait)
	defer cancel()
	if _, err := conn.Exec(ctx, l.reg.drop, l.reg.store); err != nil {
		l.log.Debug("agentspace: postgres listener could not unregister; its registration will lapse", "err", err)
	}
}

func newListener(cfg *pgx.ConnConfig, channel string, reg *registration, log *slog.Logger) *listener {
	cfg = cfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "agentspace-listen:" + channel
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{cfg: cfg, ping: listenPing, pingWait: listenPingWait, linger: listenLinger,
		backoffMin: listenBackoffMin, backoffMax: listenBackoffMax, probeEvery: listenProbe,
		channel: channel, reg: reg, log: log,
		changes: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// start starts the listener's goroutine, once; wanted and the timings
// must be set before.
func (l *listener) start() {
	l.startOnce.Do(func() { go l.run(l.ctx) })
}

// close stops the goroutine, if started, and waits for it.
func (l *listener) close() {
	l.cancel()
	started := true
	l.startOnce.Do(func() { started = false })
	if started {
		<-l.done
	}
}

// poke tells the listener that it may be wanted now.
func (l *listener) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// signal sends a hint without blocking: one pending hint is enough.
func (l *listener) signal() {
	select {
	case l.changes <- struct{}{}:
	default:
	}
}

func (l *listener) isWanted() bool { return l.wanted == nil || l.wanted() }

// errIdle ends a listen that no one has wanted for the linger time.
var errIdle = errors.New("no one waits for changes")

func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	backoff := l.backoffMin
	for ctx.Err() == nil {
		for !l.isWanted() {
			select {
			case <-l.wake:
			case <-ctx.Done():
				return
			}
		}
		conn, err := l.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.failed.Add(1)
			l.log.Warn("agentspace: postgres listener cannot connect; retrying", "in", backoff, "err", err)
			if !l.waitOut(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, l.backoffMax)
			continue
		}
		backoff = l.backoffMin
		// Whatever was committed while we were not listening is in the
		// log, past what was heard: the engine must look it up.
		l.restart()
		err = l.listen(ctx, conn)
		if (errors.Is(err, errIdle) || ctx.Err() != nil) && l.reg != nil {
			l.unregister(conn)
		}
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		// Not listening: nothing heard stays current.
		l.heard.Store(0)
		l.takeEvents()
		if ctx.Err() != nil {
			return
		}
		if !errors.Is(err, errIdle) {
			l.log.Warn("agentspace: postgres listener lost its connection; reconnecting", "err", err)
		}
	}
}

// waitOut waits out a reconnect back-off of d, or less: every probeEvery
// it probes the database through the store's pool, and ends the wait when
// that succeeds. So whatever the back-off has grown to, the listener
// reconnects, and the engine reads the log (see restart), within about a
// probe's period of the database answering again. It reports false when
// ctx ended.
func (l *listener) waitOut(ctx context.Context, d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		wait := time.Until(end)
		if l.probe != nil {
			wait = min(wait, l.probeEvery)
		}
		if wait <= 0 {
			return true
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false
		}
		if l.probe == nil || !time.Now().Before(end) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, listenProbeWait)
		err := l.probe(pctx)
		cancel()
		if err == nil {
			return true
		}
	}
}

// restart forgets what was heard and hints the engine to read the log:
// listening has (re)started, after a span in which commits went unheard.
func (l *listener) restart() {
	l.restarts.Add(1)
	l.heard.Store(0)
	l.takeEvents()
	l.signal()
}

// connect opens the session, LISTENs and registers, in that order: a
// writer that sees the registration notifies a session already listening.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, l.cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	if l.reg != nil {
		if _, err := l.register(cctx, conn); err != nil {
			_ = conn.Close(context.Background())
			return nil, err
		}
	}
	l.mu.Lock()
	l.pid = conn.PgConn().PID()
	l.mu.Unlock()
	return conn, nil
}

// listen waits for notifications until the connection fails, ctx ends, or
// no one has wanted changes for the linger time (errIdle). Every ping it
// refreshes the registration (or, without one, pings): a lapsed one is
// written again and the engine hinted to read the log.
func (l *listener) listen(ctx context.Context, conn *pgx.Conn) error {
	pinged := time.Now()
	var idleSince time.Time
	for {
		now := time.Now()
		wait := pinged.Add(l.ping).Sub(now)
		if l.isWanted() {
			idleSince = time.Time{}
		} else {
			if idleSince.IsZero() {
				idleSince = now
			}
			left := idleSince.Add(l.linger).Sub(now)
			if left <= 0 {
				return errIdle
			}
			wait = min(wait, left)
		}
		var (
			n   *pgconn.Notification
			err error
		)
		if wait > 0 {
			wctx, cancel := context.WithTimeout(ctx, wait)
			n, err = conn.WaitForNotification(wctx)
			cancel()
		}
		switch {
		case wait > 0 && err == nil:
			if seq, evs, ok := l.other(n.Payload); ok {
				l.keep(evs)
				raise(&l.heard, seq)
				l.signal()
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case wait > 0 && !pgconn.Timeout(err):
			return err
		case conn.IsClosed():
			return errors.New("connection closed")
		case time.Since(pinged) >= l.ping:
			if err := l.refresh(ctx, conn); err != nil {
				return err
			}
			pinged = time.Now()
		}
	}
}

// refresh extends the registration, or pings when there is none.
func (l *listener) refresh(ctx context.Context, conn *pgx.Conn) error {
	if l.reg == nil {
		pctx, cancel := context.WithTimeout(ctx, l.pingWait)
		defer cancel()
		return conn.Ping(pctx)
	}
	live, err := l.register(ctx, conn)
	if err != nil {
		return err
	}
	if !live {
		l.log.Debug("agentspace: postgres listener registration had lapsed; registered again")
		l.restart()
	}
	return nil
}

// other reads a notification's payload (see parsePayload) and reports
// whether it is news for the engine: a seq later than its store's own last
// commit, or an unreadable payload (then the seq is 0 and the engine looks
// in the store). The store's own are dropped before their events are parsed.
func (l *listener) other(payload string) (int64, []workspace.Event, bool) {
	if seq, _ := payloadSeq(payload); seq > 0 && l.own != nil && seq <= l.own.Load() {
		return seq, nil, false
	}
	seq, evs := parsePayload(payload)
	if seq == 0 {
		return 0, nil, true
	}
	return seq, evs, true
}

// maxCarried bounds the events a listener keeps for an engine that is not
// taking them (no one is waiting): past it the oldest go, and whoever
// needs them reads the log.
const maxCarried = 2048

// keep holds evs for the engine.
func (l *listener) keep(evs []workspace.Event) {
	if len(evs) == 0 {
		return
	}
	l.carriedMu.Lock()
	defer l.carriedMu.Unlock()
	l.carried = append(l.carried, evs...)
	if n := len(l.carried); n > maxCarried {
		l.carried = append(l.carried[:0:0], l.carried[n-maxCarried/2:]...)
	}
}

// takeEvents returns the events kept since the last call.
func (l *listener) takeEvents() []workspace.Event {
	l.carriedMu.Lock()
	defer l.carriedMu.Unlock()
	evs := l.carried
	l.carried = nil
	return evs
}

// backendPID is the listening connection's server process (0 before the first connect).
func (l *listener) backendPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

// raise sets a to v if v is larger, atomically.
func raise(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}
