package postgres_test

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/conformance"
)

// bouncerHarness hands the suite fresh workspaces reached through a
// pgbouncer with the DSN docs/postgres.md gives: the main DSN through the
// pooler with default_query_exec_mode=exec, ws_listen_dsn to the server.
type bouncerHarness struct{ p *pgtest.Pooler }

func (h bouncerHarness) NewDSN(t testing.TB) string { return h.p.DSN(t) }

// bouncerModeEnv makes the test binary run only the session-mode suite:
// TestConformanceBehindPgbouncer runs it so, in a process of its own.
const bouncerModeEnv = "AGENTSPACE_PGTEST_PGBOUNCER_MODE"

// TestConformanceBehindPgbouncer runs the whole suite through pgbouncer
// in transaction mode, as docs/postgres.md says to, and at the same time,
// in another process of this binary, through pgbouncer in session mode
// with the same DSN. The suite mostly waits, so the two cost about the
// wall time of one; they cannot share a process, as the suite checks
// that it leaves no goroutine behind.
func TestConformanceBehindPgbouncer(t *testing.T) {
	if os.Getenv("AGENTSPACE_CONFORMANCE_CHILD") != "" || os.Getenv("AGENTSPACE_RELIABILITY_CHILD") != "" {
		// A child process of the suite: it asks for no DSN.
		conformance.Run(t, bouncerHarness{})
		return
	}
	if mode := os.Getenv(bouncerModeEnv); mode != "" {
		conformance.Run(t, bouncerHarness{p: pgtest.StartPgbouncer(t, pgtest.PoolerOptions{Mode: mode})})
		return
	}
	// Skip (or fail) here, not in the other process, when there is no pgbouncer.
	tx := pgtest.StartPgbouncer(t, pgtest.PoolerOptions{Mode: "transaction"})
	// #nosec G204 -- this test binary, run again for the session-mode suite
	session := exec.Command(os.Args[0], "-test.run=^TestConformanceBehindPgbouncer$", "-test.count=1", "-test.timeout=10m")
	session.Env = append(os.Environ(), bouncerModeEnv+"=session")
	var out bytes.Buffer
	session.Stdout, session.Stderr = &out, &out
	if err := session.Start(); err != nil {
		t.Fatalf("start the session-mode suite: %v", err)
	}
	t.Cleanup(func() {
		if session.ProcessState == nil {
			_ = session.Process.Kill()
			_ = session.Wait()
		}
	})
	t.Run("transaction", func(t *testing.T) { conformance.Run(t, bouncerHarness{p: tx}) })
	t.Run("session", func(t *testing.T) {
		if err := session.Wait(); err != nil {
			t.Fatalf("the suite in session mode failed (%v):\n%s", err, tail(out.Bytes(), 20000))
		}
		t.Logf("the suite passed in session mode, in its own process")
	})
}

// tail is the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
