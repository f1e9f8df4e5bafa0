//go:build !unix

package bench

import "time"

// cpuTime cannot be read here.
func cpuTime() (time.Duration, bool) { return 0, false }
