package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentspace/agentspace/internal/testskip"
)

// EnvRequirePgbouncer makes a missing pgbouncer binary a test failure
// instead of a skip (CI sets it, and installs Debian's pgbouncer).
const EnvRequirePgbouncer = "AGENTSPACE_TEST_REQUIRE_PGBOUNCER"

// Pooler is a pgbouncer started by a test on a free loopback port, in
// front of the test server, with a config of its own in a temporary
// directory. It is stopped when the test ends.
type Pooler struct {
	// Mode is pgbouncer's pool_mode: "transaction" or "session".
	Mode string
	// Port is the loopback port clients connect to.
	Port int

	server *url.URL // the test server's admin DSN
	cmd    *exec.Cmd
	done   chan struct{}
	mu     sync.Mutex
	stderr strings.Builder
}

// PoolerOptions configure StartPgbouncer.
type PoolerOptions struct {
	// Mode is the pool_mode: "transaction" (the default) or "session".
	Mode string
	// PoolSize is default_pool_size: server connections per database and
	// user (default 20).
	PoolSize int
}

// StartPgbouncer starts pgbouncer in front of the test server (which
// must be on loopback or reachable by host and port), or skips t when
// there is no pgbouncer binary (fails it when
// AGENTSPACE_TEST_REQUIRE_PGBOUNCER=1). As root it runs pgbouncer as the
// user postgres, since pgbouncer refuses to run as root.
func StartPgbouncer(t testing.TB, o PoolerOptions) *Pooler {
	t.Helper()
	admin := ServerDSN(t)
	bin := RequirePgbouncer(t)
	if o.Mode == "" {
		o.Mode = "transaction"
	}
	if o.PoolSize == 0 {
		o.PoolSize = 20
	}
	su, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	host, port := su.Hostname(), su.Port()
	if port == "" {
		port = "5432"
	}
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	p := &Pooler{Mode: o.Mode, Port: FreePort(t), server: su, done: make(chan struct{})}
	dir := t.TempDir()
	var runAs []string
	if os.Geteuid() == 0 {
		// pgbouncer will not run as root; the postgres user must read the
		// config it is given.
		if _, err := user.Lookup("postgres"); err != nil {
			t.Fatalf("pgtest: running as root and there is no user postgres to run pgbouncer as: %v", err)
		}
		runAs = []string{"-u", "postgres"}
		// #nosec G302 -- a test's own temporary directory, read by pgbouncer running as postgres
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	userName := su.User.Username()
	pw, _ := su.User.Password()
	authFile := filepath.Join(dir, "userlist.txt")
	// #nosec G306 -- read by pgbouncer running as another user; a test server's credentials
	if err := os.WriteFile(authFile, []byte(fmt.Sprintf("%q %q\n", userName, pw)), 0o644); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	authType := "trust"
	if pw != "" {
		authType = "plain"
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = %s
auth_file = %s
admin_users = %s
pool_mode = %s
default_pool_size = %d
max_client_conn = 2000
max_db_connections = %d
server_login_retry = 0
log_connections = 0
log_disconnections = 0
`, host, port, p.Port, authType, authFile, userName, o.Mode, o.PoolSize, o.PoolSize)
	confFile := filepath.Join(dir, "pgbouncer.ini")
	// #nosec G306 -- read by pgbouncer running as another user
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	args := append(append([]string{}, runAs...), confFile)
	p.cmd = exec.Command(bin, args...) // #nosec G204 -- the test's own pgbouncer binary and config
	p.cmd.Stderr = &lockedWriter{p: p}
	p.cmd.Stdout = p.cmd.Stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("pgtest: start pgbouncer: %v", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgtest: pgbouncer said:\n%s", p.output())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", p.addr(), time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		select {
		case <-p.done:
			t.Fatalf("pgtest: pgbouncer exited: %s", p.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: pgbouncer did not listen on %s: %v\n%s", p.addr(), err, p.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// PgbouncerBinary finds the pgbouncer binary: on PATH, or Debian's
// /usr/sbin/pgbouncer.
func PgbouncerBinary() (string, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr == nil {
			return "/usr/sbin/pgbouncer", nil
		}
	}
	return bin, err
}

// RequirePgbouncer returns the pgbouncer binary, or skips t when there
// is none (fails it when AGENTSPACE_TEST_REQUIRE_PGBOUNCER=1).
func RequirePgbouncer(t testing.TB) string {
	t.Helper()
	bin, err := PgbouncerBinary()
	if err != nil {
		testskip.Skip(t, EnvRequirePgbouncer, "pgtest: SKIPPING PGBOUNCER TEST: no pgbouncer binary: %v (apt-get install pgbouncer)", err)
	}
	return bin
}

type lockedWriter struct{ p *Pooler }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	if w.p.stderr.Len() < 1<<16 {
		w.p.stderr.Write(b)
	}
	return len(b), nil
}

func (p *Pooler) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *Pooler) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)) }

func (p *Pooler) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGINT) // pgbouncer's immediate shutdown
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Via returns dsn (a DSN of the test server) pointed at the pooler: host
// and port replaced, every other parameter kept.
func (p *Pooler) Via(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u.Host = p.addr()
	return u.String()
}

// DSN returns the DSN docs/postgres.md gives for a transaction-mode
// pooler, for a fresh workspace: the pooler's address with
// default_query_exec_mode=exec, and ws_listen_dsn the server's own.
func (p *Pooler) DSN(t testing.TB) string {
	t.Helper()
	direct := NewDSN(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	q := u.Query()
	listen := *u
	lq := url.Values{}
	for k, v := range q {
		if !strings.HasPrefix(k, "ws_") {
			lq[k] = v
		}
	}
	listen.RawQuery = lq.Encode()
	q.Set("default_query_exec_mode", "exec")
	q.Set("ws_listen_dsn", listen.String())
	u.RawQuery = q.Encode()
	u.Host = p.addr()
	return u.String()
}

// Admin runs a command on pgbouncer's admin console (PAUSE, RESUME,
// KILL db, SHOW POOLS, ...).
func (p *Pooler) Admin(ctx context.Context, command string) error {
	u := *p.server
	u.Host = p.addr()
	u.Path = "/pgbouncer"
	q := url.Values{"sslmode": {"disable"}, "default_query_exec_mode": {"simple_protocol"}}
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return fmt.Errorf("pgbouncer admin: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, command); err != nil {
		return fmt.Errorf("pgbouncer admin %s: %w", command, err)
	}
	return nil
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
