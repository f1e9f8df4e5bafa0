package remote_test

import (
	"testing"

	"github.com/agentspace/agentspace/conformance"
)

// TestConformance runs the suite through a server on loopback TCP in
// front of SQLite.
func TestConformance(t *testing.T) { conformance.Run(t, newHarness(t, false)) }

// The unix-socket transport is the same client and server over another
// dialer: TestScenarioFileInOneWorkspace runs the shared scenario through
// it, rather than the whole suite once more (minutes of CI).

// TestConformancePostgres runs it through a server on loopback TCP in
// front of PostgreSQL (skipped, loudly, where there is none; see pgtest).
func TestConformancePostgres(t *testing.T) { conformance.Run(t, newHarness(t, true)) }
