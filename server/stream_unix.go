//go:build unix

package server

import (
	"errors"
	"net"
	"syscall"
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
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	gone := false
	// The callback returns true: one look, never a wait for readiness.
	err = raw.Read(func(fd uintptr) bool {
		gone = drained(int(fd))
		return true
	})
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
