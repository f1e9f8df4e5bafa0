package remote

import (
	"net"
	"syscall"
)

// peerOpen reports whether the server has not closed c while it was idle,
// with one non-blocking peek: end of stream means closed, and any byte
// means the server said something unasked (a timeout answer before it
// closed), so c is not fit for a request either.
func peerOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	var buf [1]byte
	err = raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		return true
	})
	return err == nil && open
}
