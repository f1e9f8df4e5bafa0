package postgres

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentspace/agentspace/workspace"
)

// Listener timings. A blocked read cannot see a half-open TCP connection,
// so an idle listener pings the server every listenPing.
const (
	listenPing       = 15 * time.Second
	listenPingWait   = 5 * time.Second
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// listener holds one dedicated session connection that LISTENs on the
// workspace's channel, and turns every notification, and every
// (re)connect, into a coalesced hint on changes. Notifications sent while it
// was disconnected are lost; the hint after reconnecting makes the engine
// catch up from the log.
type listener struct {
	cfg      *pgx.ConnConfig
	ping     time.Duration // silence after which the connection is pinged
	pingWait time.Duration // how long a ping may take before the connection counts as dead
	channel  string
	log      *slog.Logger
	changes  chan struct{}
	// own is the last seq its store committed, when set: a notification
	// of a commit no later than that is the store's own (or older), and
	// the engine has already seen it.
	own *atomic.Int64
	// heard is the highest seq announced since the last (re)connect, 0
	// before the first: see workspace.HeadNotifier.
	heard atomic.Int64
	// carried holds the events notifications carried since the engine
	// last took them (see workspace.EventNotifier), at most maxCarried.
	carriedMu sync.Mutex
	carried   []workspace.Event
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}

	mu  sync.Mutex
	pid uint32 // the backend of the current connection, for tests
}

func startListener(cfg *pgx.ConnConfig, channel string, own *atomic.Int64, log *slog.Logger) *listener {
	l := newListener(cfg, channel, log, listenPing, listenPingWait)
	l.own = own
	go l.run(l.ctx)
	return l
}

func startListenerTimed(cfg *pgx.ConnConfig, channel string, log *slog.Logger, ping, pingWait time.Duration) *listener {
	l := newListener(cfg, channel, log, ping, pingWait)
	go l.run(l.ctx)
	return l
}

func newListener(cfg *pgx.ConnConfig, channel string, log *slog.Logger, ping, pingWait time.Duration) *listener {
	cfg = cfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "agentspace-listen:" + channel
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{cfg: cfg, ping: ping, pingWait: pingWait, channel: channel, log: log,
		changes: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// close stops the goroutine and waits for it.
func (l *listener) close() {
	l.cancel()
	<-l.done
}

// signal sends a hint without blocking: one pending hint is enough.
func (l *listener) signal() {
	select {
	case l.changes <- struct{}{}:
	default:
	}
}

func (l *listener) run(ctx context.Context) {
	defer close(l.done)
	backoff := listenBackoffMin
	for ctx.Err() == nil {
		conn, err := l.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.log.Warn("agentspace: postgres listener cannot connect; retrying", "in", backoff, "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(backoff*2, listenBackoffMax)
			continue
		}
		backoff = listenBackoffMin
		// Whatever was committed while we were not listening is in the
		// log, past what was heard: the engine must look it up.
		l.heard.Store(0)
		l.takeEvents()
		l.signal()
		err = l.listen(ctx, conn)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(closeCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("agentspace: postgres listener lost its connection; reconnecting", "err", err)
	}
}

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
	l.mu.Lock()
	l.pid = conn.PgConn().PID()
	l.mu.Unlock()
	return conn, nil
}

// listen waits for notifications until the connection fails or ctx ends.
func (l *listener) listen(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, l.ping)
		n, err := conn.WaitForNotification(wctx)
		timedOut := wctx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case err == nil:
			if seq, evs, ok := l.other(n.Payload); ok {
				l.keep(evs)
				raise(&l.heard, seq)
				l.signal()
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case timedOut && !conn.IsClosed():
			pctx, cancel := context.WithTimeout(ctx, l.pingWait)
			err = conn.Ping(pctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// other reads a notification's payload (see parsePayload) and reports
// whether it is news for the engine: a seq later than its store's own last
// commit, or an unreadable payload (then the seq is 0 and the engine looks
// in the store).
func (l *listener) other(payload string) (int64, []workspace.Event, bool) {
	seq, evs := parsePayload(payload)
	if seq == 0 {
		return 0, nil, true
	}
	if l.own != nil && seq <= l.own.Load() {
		return seq, nil, false
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
