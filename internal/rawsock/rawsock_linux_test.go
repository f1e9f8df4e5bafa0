package rawsock

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pair returns two connected sockets of network ("unix" or "tcp"), both
// wrapped.
func pair(t testing.TB, network string) (net.Conn, net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s.sock")
	}
	ln, err := net.Listen(network, addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	a, err := net.Dial(network, ln.Addr().String())
	require.NoError(t, err)
	b, ok := <-accepted
	require.True(t, ok)
	a, b = Wrap(a), Wrap(b)
	t.Cleanup(func() { _, _ = a.Close(), b.Close() })
	return a, b
}

func TestWrapIsRaw(t *testing.T) {
	a, _ := pair(t, "unix")
	require.IsType(t, &conn{}, a)
	// What finds a connection's socket still finds it.
	_, isSys := a.(syscall.Conn)
	require.True(t, isSys)
	inner, isWrapper := a.(interface{ NetConn() net.Conn })
	require.True(t, isWrapper)
	require.IsType(t, &net.UnixConn{}, inner.NetConn())
	// A connection without a socket is returned as it is.
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	require.Equal(t, p, Wrap(p))
}

// TestBytesBothWays sends more than a socket buffer holds each way at
// once, so writes fill the buffer and wait, and reads come in pieces.
func TestBytesBothWays(t *testing.T) {
	for _, network := range []string{"unix", "tcp"} {
		t.Run(network, func(t *testing.T) {
			a, b := pair(t, network)
			out := make([]byte, 4<<20)
			_, _ = rand.Read(out)
			back := make([]byte, 3<<20)
			_, _ = rand.Read(back)
			errs := make(chan error, 2)
			go func() {
				n, err := a.Write(out)
				if err == nil && n != len(out) {
					err = io.ErrShortWrite
				}
				errs <- err
			}()
			go func() {
				n, err := b.Write(back)
				if err == nil && n != len(back) {
					err = io.ErrShortWrite
				}
				errs <- err
			}()
			gotB := make([]byte, len(out))
			readErr := make(chan error, 1)
			go func() { _, err := io.ReadFull(b, gotB); readErr <- err }()
			gotA := make([]byte, len(back))
			_, err := io.ReadFull(a, gotA)
			require.NoError(t, err)
			require.NoError(t, <-readErr)
			require.NoError(t, <-errs)
			require.NoError(t, <-errs)
			require.True(t, bytes.Equal(out, gotB))
			require.True(t, bytes.Equal(back, gotA))
			require.Zero(t, mustRead(t, a, 0))
		})
	}
}

func mustRead(t *testing.T, c net.Conn, n int) int {
	t.Helper()
	got, err := c.Read(make([]byte, n))
	require.NoError(t, err)
	return got
}

func TestEndOfStream(t *testing.T) {
	a, b := pair(t, "unix")
	_, err := b.Write([]byte("last"))
	require.NoError(t, err)
	require.NoError(t, b.Close())
	got, err := io.ReadAll(a)
	require.NoError(t, err)
	require.Equal(t, "last", string(got))
	n, err := a.Read(make([]byte, 8))
	require.Zero(t, n)
	require.ErrorIs(t, err, io.EOF)
}

func TestDeadlineAndClose(t *testing.T) {
	a, _ := pair(t, "tcp")
	require.NoError(t, a.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, err := a.Read(make([]byte, 8))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout())

	// Close wakes a blocked read, as net.Conn's does.
	require.NoError(t, a.SetReadDeadline(time.Time{}))
	done := make(chan error, 1)
	go func() { _, err := a.Read(make([]byte, 8)); done <- err }()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, a.Close())
	require.ErrorIs(t, <-done, net.ErrClosed)
	_, err = a.Write([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)
}

// TestWriteToClosedPeer fails with the socket's error, typed as the net
// package's, and the process lives on (the runtime ignores SIGPIPE for
// sockets).
func TestWriteToClosedPeer(t *testing.T) {
	a, b := pair(t, "unix")
	require.NoError(t, b.Close())
	var err error
	for range 100 {
		if _, err = a.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	require.Error(t, err)
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "write", op.Op)
	require.Equal(t, "unix", op.Net)
	require.True(t, errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET), "%v", err)
}

func TestRecv(t *testing.T) {
	a, b := pair(t, "unix")
	raw, err := a.(syscall.Conn).SyscallConn()
	require.NoError(t, err)
	look := func() (n int, errno syscall.Errno) {
		buf := make([]byte, 4)
		require.NoError(t, raw.Control(func(fd uintptr) { n, errno = Recv(fd, buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT) }))
		return n, errno
	}
	_, errno := look()
	require.Equal(t, syscall.EAGAIN, errno)
	_, err = b.Write([]byte("hi"))
	require.NoError(t, err)
	// Wait for the bytes without reading them.
	require.Eventually(t, func() bool { _, e := look(); return e == 0 }, 5*time.Second, time.Millisecond)
	n, errno := look()
	require.Equal(t, 2, n)
	require.Zero(t, errno)
	require.Equal(t, 2, mustRead(t, a, 8)) // a peek left them there
}
