//go:build linux

package bench_test

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentspace/agentspace/bench"
)

func TestMachineCPUCountsWorkDoneMeanwhile(t *testing.T) {
	b0, t0, ok := bench.MachineCPU()
	require.True(t, ok, "/proc/stat is readable on Linux")
	assert.Positive(t, b0)
	assert.LessOrEqual(t, b0, t0, "busy time is part of all the CPUs' time")
	// Keep one CPU busy for a while: the machine's busy time grows by
	// about as much (other processes may add to it, never take from it).
	sum := sha256.Sum256(nil)
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		sum = sha256.Sum256(sum[:])
	}
	b1, t1, ok := bench.MachineCPU()
	require.True(t, ok)
	assert.GreaterOrEqual(t, b1-b0, 150*time.Millisecond, "a CPU busy for 300ms shows in the machine's busy time")
	assert.Greater(t, t1, t0)
	assert.LessOrEqual(t, b1-b0, t1-t0)
}
