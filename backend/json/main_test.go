package jsonstore_test

import (
	"os"
	"testing"
)

// TestMain lets the test binary play a crash-test writer when re-executed
// by TestKilledWritersLoseNoAcknowledgedWrite, or the idle writer of
// TestWriterKilledBetweenCommitsIsReplayed.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	if dir := os.Getenv(walChildEnv); dir != "" {
		os.Exit(walChild(dir))
	}
	os.Exit(m.Run())
}
