package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentspace/agentspace/internal/testskip"
)

// EnvRequireClusters makes missing PostgreSQL server binaries (initdb,
// pg_ctl, pg_basebackup) a test failure instead of a skip.
const EnvRequireClusters = "AGENTSPACE_TEST_REQUIRE_CLUSTERS"

// Cluster is a PostgreSQL cluster a test made with initdb in a temporary
// directory, listening on a free loopback port, run as the user postgres
// when the test runs as root. It is stopped (immediately) and removed
// when the test ends.
type Cluster struct {
	Port int
	Dir  string

	bin  string
	cred *syscall.Credential
	log  string
}

// serverBin finds the directory of initdb, pg_ctl and pg_basebackup, or
// skips t (fails it under AGENTSPACE_TEST_REQUIRE_CLUSTERS=1).
func serverBin(t testing.TB) string {
	t.Helper()
	var dirs []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(found) - 1; i >= 0; i-- {
		dirs = append(dirs, found[i])
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "pg_basebackup")); err == nil {
				return d
			}
		}
	}
	testskip.Skip(t, EnvRequireClusters, "pgtest: SKIPPING CLUSTER TEST: no initdb and pg_basebackup found (pg_config --bindir, /usr/lib/postgresql/*/bin; install the PostgreSQL server)")
	return ""
}

// clusterDir makes a directory the server's user owns, removed when the
// test ends, and the credential to run the server binaries with.
func clusterDir(t testing.TB) (string, *syscall.Credential) {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentspace-pg")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() != 0 {
		return dir, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("pgtest: running as root and there is no user postgres to run a cluster as: %v", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dir, &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

func (c *Cluster) run(t testing.TB, name string, args ...string) {
	t.Helper()
	// #nosec G204 -- the test's own PostgreSQL binaries
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		logs, _ := os.ReadFile(c.log)
		t.Fatalf("pgtest: %s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, out.String(), logs)
	}
}

// NewPrimary initdb's and starts a cluster with a database "test",
// ready to stream to standbys, asynchronously until SyncStandby.
func NewPrimary(t testing.TB) *Cluster {
	t.Helper()
	bin := serverBin(t)
	dir, cred := clusterDir(t)
	c := &Cluster{Port: FreePort(t), Dir: filepath.Join(dir, "data"), bin: bin, cred: cred, log: filepath.Join(dir, "log")}
	c.run(t, "initdb", "-D", c.Dir, "-U", "postgres", "-A", "trust", "--no-sync", "--no-instructions")
	c.configure(t, dir, "wal_keep_size = '64MB'")
	c.start(t)
	conn := c.Connect(t, "postgres")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := conn.Exec(ctx, "CREATE DATABASE test"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return c
}

// SyncStandby makes commits on c wait for a standby's flush
// (synchronous_standby_names = '*'), once a standby streams: set before,
// every commit would wait for one that is not there.
func (c *Cluster) SyncStandby(t testing.TB) {
	t.Helper()
	c.WaitStreaming(t, false)
	conn := c.Connect(t, "postgres")
	// Bounded, as every wait here: a cluster that stops answering fails
	// the test where it stopped, not at the package's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := conn.Exec(ctx, "ALTER SYSTEM SET synchronous_standby_names = '*'"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	c.WaitStreaming(t, true)
}

// configure appends settings to the cluster's postgresql.conf: its
// port, loopback only, its socket in dir, and what streaming needs.
func (c *Cluster) configure(t testing.TB, dir string, extra ...string) {
	t.Helper()
	lines := append([]string{
		fmt.Sprintf("port = %d", c.Port),
		"listen_addresses = '127.0.0.1'",
		fmt.Sprintf("unix_socket_directories = '%s'", dir),
		"max_connections = 60",
		"shared_buffers = '16MB'",
		"fsync = off", // the tests kill processes, never the machine
		"max_wal_senders = 4",
		"hot_standby = on",
		"logging_collector = off",
	}, extra...)
	f, err := os.OpenFile(filepath.Join(c.Dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteString("\n" + strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
}

func (c *Cluster) start(t testing.TB) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.Dir, "-l", c.log, "-w", "-t", "60", "start")
	t.Cleanup(func() { c.Kill() })
}

// NewStandby makes a streaming standby of c with pg_basebackup -R and
// starts it, on a port of its own.
func (c *Cluster) NewStandby(t testing.TB) *Cluster {
	t.Helper()
	dir, cred := clusterDir(t)
	s := &Cluster{Port: FreePort(t), Dir: filepath.Join(dir, "data"), bin: c.bin, cred: cred, log: filepath.Join(dir, "log")}
	s.run(t, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres",
		"-D", s.Dir, "-R", "-X", "stream", "--no-sync", "-c", "fast")
	s.configure(t, dir)
	// A primary made synchronous by ALTER SYSTEM hands that on in
	// postgresql.auto.conf, which wins over postgresql.conf: the standby
	// starts asynchronous until SyncStandby, once promoted.
	f, err := os.OpenFile(filepath.Join(s.Dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	_, err = f.WriteString("synchronous_standby_names = ''\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s.start(t)
	return s
}

// WaitStreaming waits until a standby streams from c (and, with sync,
// is its synchronous standby).
func (c *Cluster) WaitStreaming(t testing.TB, sync bool) {
	t.Helper()
	conn := c.Connect(t, "postgres")
	want := "async"
	if sync {
		want = "sync"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = $1`, want).Scan(&n)
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("pgtest: no standby streams")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addr is the cluster's host:port.
func (c *Cluster) Addr() string { return "127.0.0.1:" + strconv.Itoa(c.Port) }

// DSN is a URL DSN of database db on the cluster, as postgres.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", c.Addr(), db)
}

// Connect opens a connection to database db, closed when the test ends.
func (c *Cluster) Connect(t testing.TB, db string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.DSN(db))
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", c.Addr(), err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// Pid is the postmaster's process id.
func (c *Cluster) Pid(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "postmaster.pid"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		t.Fatalf("pgtest: postmaster.pid: %v", err)
	}
	return pid
}

// KillPostmaster sends SIGKILL to the postmaster, as a crash would: its
// backends find their postmaster gone and exit.
func (c *Cluster) KillPostmaster(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(c.Pid(t), syscall.SIGKILL); err != nil {
		t.Fatalf("pgtest: kill postmaster: %v", err)
	}
}

// Crash kills the postmaster and every process it started with SIGKILL,
// as the machine's crash would, and waits until they are all gone: no
// backend of c finishes anything after Crash returns.
func (c *Cluster) Crash(t testing.TB) {
	t.Helper()
	pid := c.Pid(t)
	procs := []int{pid}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			procs = append(procs, child)
		}
	}
	for _, p := range procs {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range procs {
		for syscall.Kill(p, 0) == nil {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); err == nil && strings.Contains(string(b[strings.LastIndexByte(string(b), ')')+1:]), " Z ") {
				break // a zombie: dead, not yet reaped by its parent
			}
			if time.Now().After(deadline) {
				t.Fatalf("pgtest: process %d of the crashed cluster still runs", p)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Promote makes a standby the primary and waits until it is.
func (c *Cluster) Promote(t testing.TB) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.Dir, "-w", "-t", "60", "promote")
}

// Kill stops the cluster at once (pg_ctl stop -m immediate), if it runs.
func (c *Cluster) Kill() {
	// #nosec G204 -- the test's own PostgreSQL binaries
	cmd := exec.Command(filepath.Join(c.bin, "pg_ctl"), "-D", c.Dir, "-m", "immediate", "stop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	_ = cmd.Run()
}
