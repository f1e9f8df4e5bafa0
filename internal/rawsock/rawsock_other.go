//go:build !linux

package rawsock

import "net"

func wrap(c net.Conn) net.Conn { return c }
