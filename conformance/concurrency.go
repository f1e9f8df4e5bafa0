package conformance

import "testing"

// runConcurrency runs the cases with many handles, goroutines and
// processes, and the model-based test.
func runConcurrency(t *testing.T, h Harness) {
}

// runChild plays a child process's part (see processes.go) and exits.
func runChild(t *testing.T) {
	t.Fatalf("unknown child role %q", childRole())
}
