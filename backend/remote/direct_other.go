//go:build !linux

package remote

import "net"

// peerOpen cannot look without blocking here: a connection the server
// closed shows on the next request, which is sent again where that is
// safe (see replayable).
func peerOpen(net.Conn) bool { return true }
