package remote_test

import (
	"testing"

	"github.com/agentspace/agentspace/conformance"
)

// TestConformance runs the suite through a server on loopback TCP in
// front of SQLite.
func TestConformance(t *testing.T) { conformance.Run(t, harness{}) }

// TestConformanceOverUnixSocket runs it through a server on a unix socket
// in front of SQLite.
func TestConformanceOverUnixSocket(t *testing.T) { conformance.Run(t, harness{unix: true}) }

// TestConformancePostgres runs it through a server on loopback TCP in
// front of PostgreSQL (skipped, loudly, where there is none; see pgtest).
func TestConformancePostgres(t *testing.T) { conformance.Run(t, harness{postgres: true}) }
