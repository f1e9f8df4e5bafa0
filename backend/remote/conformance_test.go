package remote_test

import (
	"testing"

	"github.com/agentspace/agentspace/conformance"
)

// TestConformance runs the suite through a server on loopback TCP in
// front of SQLite.
func TestConformance(t *testing.T) { conformance.Run(t, harness{}) }
