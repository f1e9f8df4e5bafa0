package postgres_test

import (
	"os"
	"testing"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/conformance"
)

// bouncerHarness hands the suite fresh workspaces reached through a
// pgbouncer with the DSN docs/postgres.md gives: the main DSN through the
// pooler with default_query_exec_mode=exec, ws_listen_dsn to the server.
type bouncerHarness struct{ p *pgtest.Pooler }

func (h bouncerHarness) NewDSN(t testing.TB) string { return h.p.DSN(t) }

// runBehindPgbouncer starts a pooler in mode and runs the suite through
// it. A child process of the suite (which the suite marks in its
// environment and which asks for no DSN) starts none.
func runBehindPgbouncer(t *testing.T, mode string) {
	// The suite mostly waits (on leases, processes, the server): run
	// beside the package's other parallel tests, it costs little wall time.
	t.Parallel()
	if os.Getenv("AGENTSPACE_CONFORMANCE_CHILD") != "" {
		conformance.Run(t, bouncerHarness{})
		return
	}
	conformance.Run(t, bouncerHarness{p: pgtest.StartPgbouncer(t, pgtest.PoolerOptions{Mode: mode})})
}

// TestConformanceBehindPgbouncerTransactionPooling runs the whole suite
// through pgbouncer in transaction mode, as docs/postgres.md says to.
func TestConformanceBehindPgbouncerTransactionPooling(t *testing.T) {
	runBehindPgbouncer(t, "transaction")
}

// TestConformanceBehindPgbouncerSessionPooling runs it through pgbouncer
// in session mode, with the same DSN.
func TestConformanceBehindPgbouncerSessionPooling(t *testing.T) {
	runBehindPgbouncer(t, "session")
}
