//go:build !linux

package bench

import "time"

// MachineCPU cannot be read here: only Linux's /proc/stat is read.
func MachineCPU() (busy, total time.Duration, ok bool) { return 0, 0, false }

// hostInfo knows nothing of the processor, memory or kernel here.
func hostInfo() (cpu string, memGiB float64, kernel string) { return "", 0, "" }

// storageOf cannot name the file system here.
func storageOf(string) string { return "" }

// loadAverage is not read here.
func loadAverage() float64 { return 0 }
