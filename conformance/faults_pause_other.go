//go:build !unix

package conformance

import (
	"bufio"
	"testing"
)

const rolePausedHolder = "paused-holder"

// testPausedLeaseHolder needs SIGSTOP and SIGCONT, which only Unix has.
func testPausedLeaseHolder(t *testing.T, _ Harness) {
	t.Skip("pausing a process needs SIGSTOP (Unix only)")
}

func pausedHolderChild(t *testing.T, _, _ string, _ *bufio.Scanner, _ func(string, ...any)) {
	t.Fatal("no paused holder on this platform")
}

const roleStoppedAgent = "stopped-agent"

// testStoppedAgentIsFencedOut needs SIGSTOP and SIGCONT, which only Unix has.
func testStoppedAgentIsFencedOut(t *testing.T, _ Harness) {
	t.Skip("pausing a process needs SIGSTOP (Unix only)")
}

func stoppedAgentChild(t *testing.T, _, _ string, _ *bufio.Scanner, _ func(string, ...any)) {
	t.Fatal("no stopped agent on this platform")
}
