package remote

import (
	"net"
	"syscall"

	"github.com/agentspace/agentspace/internal/rawsock"
	"github.com/agentspace/agentspace/internal/sockpeek"
)

// peerOpen reports whether the server has not closed c while it was idle,
// with one non-blocking peek: end of stream means closed, and any byte
// means the server said something unasked (a timeout answer before it
// closed), so c is not fit for a request either. The peek is a raw system
// call, so that it does not wake the runtime's monitor (see rawsock).
func peerOpen(c net.Conn) bool {
	open := false
	var buf [1]byte
	ok, err := sockpeek.Look(c, func(fd uintptr) {
		_, errno := rawsock.Recv(fd, buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = errno == syscall.EAGAIN
	})
	if !ok {
		return true
	}
	return err == nil && open
}
