package jsonstore_test

import (
	"os"
	"testing"
)

// TestMain lets the test binary play a crash-test writer when re-executed
// by TestKilledWritersLoseNoAcknowledgedWrite.
func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		os.Exit(crashChild(dir))
	}
	os.Exit(m.Run())
}
