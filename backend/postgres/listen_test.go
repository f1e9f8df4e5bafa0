package postgres

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
)

// freezingProxy forwards TCP connections to target until freeze, after
// which the connections it holds stay open but carry nothing: a half-open
// connection, as a dead peer or a dropped route leaves behind. Connections
// made after freeze work.
type freezingProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen []net.Conn
	live   []net.Conn
	wg     sync.WaitGroup
}

func newFreezingProxy(t *testing.T, target string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &freezingProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *freezingProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.live = append(p.live, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

func (p *freezingProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
}

// freeze stops the current connections' traffic without closing them.
func (p *freezingProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.live {
		// A read deadline in the past stops the pipes; the sockets stay open.
		_ = c.SetReadDeadline(time.Unix(1, 0))
	}
	p.frozen, p.live = append(p.frozen, p.live...), nil
}

func (p *freezingProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range append(p.frozen, p.live...) {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func TestListenerPingsAfterSilenceAndReconnectsFromAHalfOpenConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cfg, err := pgx.ParseConfig(pgtest.ServerDSN(t))
	require.NoError(t, err)
	proxy := newFreezingProxy(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	addr := proxy.ln.Addr().(*net.TCPAddr)
	cfg.Host, cfg.Port = addr.IP.String(), uint16(addr.Port)

	channel := "agentspace." + pgtest.RandomName("t_")
	l := newListener(cfg, channel, nil, testLogger(t))
	l.ping, l.pingWait = 100*time.Millisecond, 200*time.Millisecond
	l.start()
	t.Cleanup(l.close)
	waitSignal(ctx, t, l) // the signal after connecting
	first := l.backendPID()
	require.NotZero(t, first)

	proxy.freeze()
	waitSignal(ctx, t, l) // the signal after reconnecting: only a ping can have noticed
	assert.NotEqual(t, first, l.backendPID())

	// The new connection hears notifications.
	admin := pgtest.Connect(t)
	for {
		_, err := admin.Exec(ctx, "SELECT pg_notify($1, '1')", channel)
		require.NoError(t, err)
		select {
		case <-l.changes:
			return
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("no notification heard after reconnecting")
		}
	}
}

func waitSignal(ctx context.Context, t *testing.T, l *listener) {
	t.Helper()
	select {
	case <-l.changes:
	case <-ctx.Done():
		t.Fatal("the listener sent no signal")
	}
}
