// Package rawsock reads and writes a socket with raw system calls, so
// that a process waiting on one connection at a time stays asleep while
// it waits.
//
// Why: every system call the Go runtime is told of (syscall.Read, Write,
// Recvfrom: the net package's own) wakes the runtime's monitor thread
// (sysmon) from the deep sleep it falls into when a process has nothing
// to run, and a woken monitor polls every 20 µs for as long as the
// process works. A client process that sends a request, sleeps until the
// answer, and sends the next, as an agent calling a server does, paid a
// fifth of its CPU there: on a 2-core machine shared with 16 such
// processes, each of those polls is a context switch (docs/performance.md).
//
// Invariant: a raw call is made only on a non-blocking socket (the net
// package makes every socket it opens so), so it returns at once; when
// it would block (EAGAIN) the wait goes to the runtime's poller as the
// net package's own would, deadlines and Close included. Where raw calls
// are not made (any OS but Linux, a connection without a socket), Wrap
// returns the connection as it is.
package rawsock

import (
	"context"
	"net"
)

// Wrap returns c reading and writing with raw system calls where it can
// (see the package comment), and c itself elsewhere. The connection
// returned keeps c's deadlines, addresses and Close; NetConn returns c,
// and SyscallConn c's socket.
func Wrap(c net.Conn) net.Conn { return wrap(c) }

// Dial dials with d and wraps what it connects (Wrap).
func Dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return Wrap(c), nil
}
