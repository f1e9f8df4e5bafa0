// Package gcpace sets the garbage collector's pace for a process whose
// work is serving: `wsctl serve`, and the bench while it runs a server as
// `wsctl serve` would.
//
// A server's live heap is small (a few MiB with a thousand streams held
// open) and every request allocates its body, its answer and its
// statements' arguments, so at Go's default GOGC=100 the collector runs
// every few hundred writes: about a tenth of the server's CPU time on W1
// from 16 processes (its mark workers, its assists and its sweeping). At
// ServePercent it runs a quarter as often, and the heap it lets grow is
// still only a few times the live one.
//
// Invariant: the pace is the operator's when they set it. GOGC in the
// environment (any value, "off" included) wins, and GOMEMLIMIT still
// bounds the heap, as the runtime makes the limit win over the percent.
package gcpace

import (
	"os"
	"runtime/debug"
	"sync"
)

// ServePercent is the GOGC a serving process runs at unless GOGC is set.
const ServePercent = 400

var (
	mu    sync.Mutex
	users int
	prev  int
)

// Serve sets the pace to ServePercent, unless the environment sets
// GOGC, until the returned func is called. Calls nest: the pace goes back
// to what it was when the last of them is undone.
func Serve() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	mu.Lock()
	defer mu.Unlock()
	if users == 0 {
		prev = debug.SetGCPercent(ServePercent)
	}
	users++
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			users--
			if users == 0 {
				debug.SetGCPercent(prev)
			}
		})
	}
}
