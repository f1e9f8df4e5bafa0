//go:build unix

package server

import (
	"errors"
	"net"
	"syscall"

	"github.com/agentspace/agentspace/internal/sockpeek"
)

// peerGone reports whether the client of a taken-over stream has closed
// its end, without waiting: it reads what the socket holds (a client
// sends nothing after its request, so whatever it sent is dropped) and
// finds the end of the stream or an error. A stream calls it before each
// heartbeat, so a gone client is noticed within one heartbeat even where
// the heartbeat's write would succeed (TCP takes one write to learn of a
// closed peer).
func peerGone(c net.Conn) bool {
	if t, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = t.NetConn() // a TLS connection's socket
	}
	gone := false
	ok, err := sockpeek.Look(c, func(fd uintptr) { gone = drained(int(fd)) })
	if !ok {
		return false
	}
	return gone || err != nil
}

// drained reads the non-blocking socket fd until it would block (false)
// or ends or fails (true), dropping up to 64 KiB.
func drained(fd int) bool {
	var b [512]byte
	for range 128 {
		n, err := syscall.Read(fd, b[:])
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EAGAIN):
			return false
		case err != nil, n == 0:
			return true
		}
	}
	return false
}
