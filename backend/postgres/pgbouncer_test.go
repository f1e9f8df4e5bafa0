package postgres_test

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentspace/agentspace/backend/postgres/pgtest"
	"github.com/agentspace/agentspace/conformance"
)

// bouncerHarness hands the suite fresh workspaces reached through a
// pgbouncer with the DSN docs/postgres.md gives: the main DSN through the
// pooler with default_query_exec_mode=exec, ws_listen_dsn to the server.
type bouncerHarness struct{ p *pgtest.Pooler }

func (h bouncerHarness) NewDSN(t testing.TB) string { return h.p.DSN(t) }

// bouncerModeEnv makes the test binary run only the suite behind a
// pgbouncer in the pool_mode it names: TestMain starts it so, in a
// process of its own (see startBouncerSuites).
const bouncerModeEnv = "AGENTSPACE_PGTEST_PGBOUNCER_MODE"

// bouncerSessionCases are the cases the session-mode pass runs: those
// that make many connections at once, which a session pool gives out one
// server connection each, up to its size, and those that hold one
// (LISTEN, a lease waiter). The rest behaves as on a direct connection,
// which a session pooler hands through; the transaction-mode pass, where
// pooling changes what a connection keeps between transactions, runs
// every case.
var bouncerSessionCases = []string{
	"SharedStore", "SeparateStores", "LoadLosesNothingAndLeaksNothing",
	"ChildProcessesLoseNoUpdateAndDoubleClaimNothing", "EventSubscribeResumesFromSavedSeq",
	"EventSubscribeBacklogThenLive", "LockWaitAcquiresAfterRelease", "BatchesCommittedTogetherKeepTheirOwnOutcomes",
}

// bouncerFullEnv set (to anything) makes the transaction-mode pass run
// every case of the suite, as it was run to prove the docs' DSN (see
// docs/postgres.md); without it, the pass runs bouncerSessionCases and
// bouncerTransactionCases, which keeps its CI cost within budget.
const bouncerFullEnv = "AGENTSPACE_TEST_PGBOUNCER_FULL"

// bouncerTransactionCases are the cases the transaction-mode pass adds to
// the pooling ones by default: those whose statements depend on what a
// connection keeps between transactions under transaction pooling (the
// schema's search_path, the writers' advisory lock, prepared statements,
// a predicted write's clock, LISTEN on its own DSN), one or more per part
// of the engine.
var bouncerTransactionCases = []string{
	"ArtifactCreateGetUpdateKeepsEveryVersion", "ArtifactStaleIfVersionConflicts", "ArtifactListPagesWithoutGapsOrDuplicates",
	"NotePutGetUpdateWithIfVersion", "ReservedKindsAreWrittenOnlyByTheirOwners",
	"TaskStateMachine", "TaskClaimTakesHighestPriorityThenOldestReady", "TaskClaimWaitWokenByNewTask", "TaskExpiredClaimReturnsTask",
	"LockStaleFenceRejected", "LockWaitAcquiresAfterExpiry", "LockForceReleaseRevokesTheFence", "StopActorEndsItsLeasesAndClaims",
	"EventSubscribeIdleHeartbeats", "EventVisibleOnlyAfterCommit", "EventCompactedBelowFloor",
	"BatchIsAllOrNothing", "IdempotentBatchReplays", "IdempotencyKeysExpire",
	"MustExistFindsNoWorkspaceAndCreatesNone", "ProbeAndOpenExistingAgree", "ReopenKeepsEverything", "StatusReportsTheWorkspace",
	"PolicyChangeIsSeenByEveryHandle", "PolicyChangeBindsConcurrentWritersWithinTheRecheck", "PolicyBatchWithOneForbiddenOpIsRefusedWhole",
	"EventChainSurvivesExportAndImport", "GCUnderConcurrentWritersAndSubscribers", "GCKeepsVersionsAnOpPinned",
}

// bouncerSuite is a pass of the suite behind pgbouncer in a process of
// its own.
type bouncerSuite struct {
	mode  string
	cmd   *exec.Cmd
	out   bytes.Buffer
	err   error
	took  time.Duration
	done  chan struct{}
	start time.Time
}

// bouncerSuites are the passes TestMain started, nil when this run does
// not run TestConformanceBehindPgbouncer.
var bouncerSuites []*bouncerSuite

// startBouncerSuites starts, from TestMain, the suite behind pgbouncer
// in transaction mode (see bouncerFullEnv) and in session mode (the pooling
// cases), each in a process of its own, so that they run while this
// process runs the package's other tests: the suite mostly waits on the
// server, and so do the others. They cannot share a process, as the
// suite checks that it leaves no goroutine behind.
// TestConformanceBehindPgbouncer waits for them and reports.
func startBouncerSuites() {
	for _, env := range []string{"AGENTSPACE_CONFORMANCE_CHILD", "AGENTSPACE_RELIABILITY_CHILD", bouncerModeEnv, migrateChildEnv, failoverChildEnv} {
		if os.Getenv(env) != "" {
			return
		}
	}
	if !runs("TestConformanceBehindPgbouncer") {
		return
	}
	if _, err := pgtest.PgbouncerBinary(); err != nil {
		return // the test says so
	}
	full := os.Getenv(bouncerFullEnv) != ""
	for _, mode := range []string{"transaction", "session"} {
		run := "^TestConformanceBehindPgbouncer$"
		switch {
		case mode == "session":
			run += "/^(" + strings.Join(bouncerSessionCases, "|") + ")$"
		case !full:
			run += "/^(" + strings.Join(append(bouncerSessionCases, bouncerTransactionCases...), "|") + ")$"
		}
		s := &bouncerSuite{mode: mode, done: make(chan struct{}), start: time.Now()}
		// #nosec G204 -- this test binary, run again for one pass of the suite
		s.cmd = exec.Command(os.Args[0], "-test.run="+run, "-test.count=1", "-test.timeout=12m")
		s.cmd.Env = append(os.Environ(), bouncerModeEnv+"="+mode)
		s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
		if s.err = s.cmd.Start(); s.err != nil {
			close(s.done)
		} else {
			go func() { s.err = s.cmd.Wait(); s.took = time.Since(s.start); close(s.done) }()
		}
		bouncerSuites = append(bouncerSuites, s)
	}
}

// stopBouncerSuites kills the passes still running when the tests end.
func stopBouncerSuites() {
	for _, s := range bouncerSuites {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
}

// runs reports whether this run's -test.run and -test.skip let the
// top-level test name run (a pattern's first level, as go test reads it).
func runs(name string) bool {
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return false
	}
	first := func(pattern string) string { return strings.SplitN(pattern, "/", 2)[0] }
	if f := flag.Lookup("test.skip"); f != nil && f.Value.String() != "" {
		if ok, _ := regexp.MatchString(first(f.Value.String()), name); ok {
			return false
		}
	}
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return true
	}
	ok, err := regexp.MatchString(first(f.Value.String()), name)
	return ok || err != nil
}

// TestConformanceBehindPgbouncer runs the suite through pgbouncer in
// transaction mode, as docs/postgres.md says to (every case with
// AGENTSPACE_TEST_PGBOUNCER_FULL set; else bouncerTransactionCases and
// the pooling ones), and its pooling cases
// (bouncerSessionCases) through pgbouncer in session mode with the same
// DSN: each pass in a process of its own that TestMain started, alongside
// the package's other tests.
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
	pgtest.RequirePgbouncer(t)
	if len(bouncerSuites) == 0 {
		t.Fatal("TestMain started no pass of the suite behind pgbouncer")
	}
	for _, s := range bouncerSuites {
		t.Run(s.mode, func(t *testing.T) {
			<-s.done
			if s.err != nil {
				t.Fatalf("the suite in %s mode failed (%v):\n%s", s.mode, s.err, tail(s.out.Bytes(), 20000))
			}
			if strings.Contains(s.out.String(), "no tests to run") {
				t.Fatalf("the %s-mode pass ran no test:\n%s", s.mode, tail(s.out.Bytes(), 2000))
			}
			t.Logf("the suite passed in %s mode, in its own process, in %v", s.mode, s.took.Round(time.Second))
		})
	}
}

// tail is the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
