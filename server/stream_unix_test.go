//go:build unix

package server

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPeerGoneSeesAClosedClientAndNothingElse looks at a server's end of
// a TCP connection: open and silent, open after the client sent bytes
// (they are dropped), then closed by the client.
func TestPeerGoneSeesAClosedClientAndNothingElse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	srv, err := ln.Accept()
	require.NoError(t, err)
	defer srv.Close()

	assert.False(t, peerGone(srv), "an open, silent client")
	_, err = client.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	require.NoError(t, err)
	// The bytes arrive at once on loopback; either way the client is there.
	time.Sleep(20 * time.Millisecond)
	assert.False(t, peerGone(srv), "an open client that sent bytes")
	require.NoError(t, client.Close())
	assert.Eventually(t, func() bool { return peerGone(srv) }, 5*time.Second, 5*time.Millisecond, "a closed client")
}
