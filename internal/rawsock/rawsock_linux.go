package rawsock

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

func wrap(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	network := "unix"
	if a := c.RemoteAddr(); a != nil {
		network = a.Network()
	}
	return &conn{Conn: c, raw: raw, network: network}
}

// conn is a net.Conn whose Read and Write are raw system calls on its
// socket, waiting through the runtime's poller.
type conn struct {
	net.Conn
	raw     syscall.RawConn
	network string
}

// NetConn returns the connection wrapped.
func (c *conn) NetConn() net.Conn { return c.Conn }

// SyscallConn returns the socket's raw connection.
func (c *conn) SyscallConn() (syscall.RawConn, error) { return c.raw, nil }

// Read reads as net.Conn's Read does: io.EOF at the end of the stream, a
// *net.OpError on failure, and the poller's error on a deadline or Close.
func (c *conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var (
		n     int
		errno syscall.Errno
	)
	err := c.raw.Read(func(fd uintptr) bool {
		n, errno = rawCall(syscall.SYS_READ, fd, p)
		return errno != syscall.EAGAIN
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, c.opError("read", errno)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, waiting while the socket's buffer is full, as
// net.Conn's Write does.
func (c *conn) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		var (
			n     int
			errno syscall.Errno
		)
		err := c.raw.Write(func(fd uintptr) bool {
			n, errno = rawCall(syscall.SYS_WRITE, fd, p[done:])
			return errno != syscall.EAGAIN
		})
		if err != nil {
			return done, err
		}
		if errno != 0 {
			return done, c.opError("write", errno)
		}
		if n == 0 {
			return done, io.ErrShortWrite
		}
		done += n
	}
	return done, nil
}

func (c *conn) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: c.network, Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}

// rawCall makes the read or write trap on fd with p, again on EINTR.
// p is not empty.
func rawCall(trap, fd uintptr, p []byte) (int, syscall.Errno) {
	return raw6(trap, fd, p, 0)
}

// Recv is recvfrom(2) on the non-blocking socket fd, with flags, as a raw
// system call (see the package comment); p is not empty. It is for a
// callback of syscall.RawConn, which holds fd open.
func Recv(fd uintptr, p []byte, flags int) (int, syscall.Errno) {
	return raw6(syscall.SYS_RECVFROM, fd, p, uintptr(flags)) // #nosec G115 -- MSG_ flags are small and positive
}

// raw6 makes trap on fd with p and a fourth argument (read and write take
// none, recvfrom its flags; recvfrom's address arguments are nil), again
// on EINTR.
func raw6(trap, fd uintptr, p []byte, a4 uintptr) (int, syscall.Errno) {
	for {
		// #nosec G103 -- the kernel reads or fills p, which outlives the call
		r, _, errno := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)), a4, 0, 0)
		if errno != syscall.EINTR {
			return int(r), errno
		}
	}
}
