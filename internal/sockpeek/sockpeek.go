// Package sockpeek looks at a connection's socket without waiting: the
// one mechanism behind the HTTP client's check that a pooled connection
// is still open and the server's check that a stream's client is still
// there. What a look means is the caller's (a peek, a read to drop what
// waits); this package only hands it the descriptor on the runtime's
// terms.
package sockpeek

import (
	"net"
	"syscall"
)

// Look calls f once with c's socket descriptor, through the runtime's
// poller but without waiting for the socket to be readable (the callback
// reports done after one call). ok is false when c has no socket to look
// at (f is not called); err is the runtime's, when the look failed.
func Look(c net.Conn, f func(fd uintptr)) (ok bool, err error) {
	sc, isSock := c.(syscall.Conn)
	if !isSock {
		return false, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true, err
	}
	return true, raw.Read(func(fd uintptr) bool {
		f(fd)
		return true
	})
}
