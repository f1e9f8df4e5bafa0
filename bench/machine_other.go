//go:build !linux

package bench

import "time"

// MachineCPU cannot be read here: only Linux's /proc/stat is read.
func MachineCPU() (busy, total time.Duration, ok bool) { return 0, 0, false }
