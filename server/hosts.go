package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentspace/agentspace/wire"
)

// The Host and Origin rules keep browsers from reaching a server they were
// not sent to. A page on evil.example whose name is rebound to 127.0.0.1
// (DNS rebinding) sends Host: evil.example; a page on another origin that
// posts to the server sends its own Origin. Both are refused before
// authentication, on every route.
//
// A request may name as its Host only the address it arrived on (the
// connection's local address, which is the listen address or, behind a
// wildcard listen address, the interface address), the loopback names
// with that port when it arrived on loopback (127.0.0.1, localhost,
// [::1]), or an allowed host. A state-changing request (any method but
// GET, HEAD and OPTIONS) that carries an Origin must come from one of the
// same hosts, over http or https; Origin "null" and a browser's
// Sec-Fetch-Site of cross-site or same-site are refused. Requests on a
// unix socket are not checked: no browser can open one, and the socket's
// file mode bounds who can. A handler called without a connection (in
// process, no local address) gets the Origin rule only.

// loopbackNames are the names a loopback listener answers to, besides its
// literal address.
var loopbackNames = []string{"127.0.0.1", "localhost", "::1"}

// hostPort splits a Host header or an Origin's host into a lower-case
// name (IPv6 without brackets) and a port, the scheme's default when the
// header has none.
func hostPort(h string, tls bool) (string, string) {
	name, port, err := net.SplitHostPort(h)
	if err != nil {
		name, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), "80"
		if tls {
			port = "443"
		}
	}
	return strings.ToLower(name), port
}

// allowedHost reports whether host (a Host header's value, or an Origin's
// host) names the server as the request's connection reached it.
func (s *Server) allowedHost(r *http.Request, host string, tls bool) bool {
	name, port := hostPort(host, tls)
	for _, a := range s.opts.AllowedHosts {
		an, ap, err := net.SplitHostPort(a)
		if err != nil {
			// No port: the name on any port.
			if strings.EqualFold(strings.Trim(a, "[]"), name) {
				return true
			}
			continue
		}
		if strings.EqualFold(an, name) && ap == port {
			return true
		}
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if !ok {
		// In process, no connection: the request's own Host is the server.
		rn, rp := hostPort(r.Host, r.TLS != nil)
		return rn == name && rp == port
	}
	if fmt.Sprint(local.Port) != port {
		return false
	}
	if ip := net.ParseIP(name); ip != nil && ip.Equal(local.IP) {
		return true
	}
	if local.IP.IsLoopback() {
		for _, n := range loopbackNames {
			if name == n {
				return true
			}
		}
	}
	return false
}

// checkHost applies the Host and Origin rules to r; nil lets it through.
func (s *Server) checkHost(r *http.Request) *wire.Problem {
	switch r.Context().Value(http.LocalAddrContextKey).(type) {
	case *net.UnixAddr:
		return nil
	case *net.TCPAddr:
		if !s.allowedHost(r, r.Host, r.TLS != nil) {
			return wire.NewProblem(wire.CodeForbidden, fmt.Sprintf("this server does not answer to Host %q: name it by the address it listens on, or start it with --allowed-host", truncate(r.Host, 100)))
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return wire.NewProblem(wire.CodeForbidden, "a state-changing request from another site's page is refused")
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || !s.allowedHost(r, u.Host, u.Scheme == "https") {
		return wire.NewProblem(wire.CodeForbidden, fmt.Sprintf("a state-changing request from Origin %q is refused: only the server's own origin (or an --allowed-host) may send one", truncate(o, 100)))
	}
	return nil
}
