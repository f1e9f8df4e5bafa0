package conformance

import "testing"

// runCore runs the single-feature cases: artifacts, notes, tasks, locks,
// events, batches, idempotency, bad input.
func runCore(t *testing.T, h Harness) {
	t.Run("Smoke", func(t *testing.T) { testSmoke(t, h) })
}
