//go:build !linux

package engine

import "time"

// nap sleeps for d (see the Linux version; elsewhere a timer does).
func nap(d time.Duration) { time.Sleep(d) }
