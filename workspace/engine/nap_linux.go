//go:build linux

package engine

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// nap sleeps for d in the kernel. A runtime timer under a millisecond
// fires after about a millisecond in a process with nothing else to do:
// the runtime then waits for its next timer in epoll_wait, whose timeout is
// whole milliseconds (golang/go#44343). nap holds a thread while it sleeps,
// so it is for short sleeps on one goroutine at a time.
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		err := unix.Nanosleep(&ts, &ts)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
