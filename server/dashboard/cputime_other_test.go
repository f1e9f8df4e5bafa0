//go:build !unix

package dashboard

import "time"

// cpuTime is not measured here: the benchmark reports 0.
func cpuTime() time.Duration { return 0 }

// CPUTime is cpuTime for the external tests' benchmarks.
var CPUTime = cpuTime
