package jsonstore_test

import (
	"testing"

	"github.com/agentspace/agentspace/conformance"
)

// TestKilledBatchWritersKeepWholeBatches kills a writer process with
// SIGKILL 50 times, mostly mid-batch: every acknowledged batch survives,
// every batch is all there or not at all, and the log stays contiguous.
func TestKilledBatchWritersKeepWholeBatches(t *testing.T) {
	conformance.RunKilledBatchWriters(t, harness{}, 50)
}
