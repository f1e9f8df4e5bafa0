package remote

import (
	"net"
	"syscall"

	"github.com/agentspace/agentspace/internal/sockpeek"
)

// peerOpen reports whether the server has not closed c while it was idle,
// with one non-blocking peek: end of stream means closed, and any byte
// means the server said something unasked (a timeout answer before it
// closed), so c is not fit for a request either.
func peerOpen(c net.Conn) bool {
	open := false
	var buf [1]byte
	ok, err := sockpeek.Look(c, func(fd uintptr) {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
	})
	if !ok {
		return true
	}
	return err == nil && open
}
