package main

import (
	"net/http"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/server"
)

// mcpEndpoint is the MCP endpoint wsctl's servers serve at /mcp: the
// server authenticates each request and tells who it comes from, and the
// MCP tools act as that caller. The server package knows no MCP; this is
// where the two faces meet.
func mcpEndpoint(p server.MCPParams) server.MCPEndpoint {
	m := mcp.NewServer(p.Workspace, mcp.Options{Version: p.Version, Logger: p.Logger, Redact: p.Redact, Agents: p.Agents})
	h := m.HTTPHandler(func(r *http.Request) mcp.Caller {
		c := p.Caller(r)
		return mcp.Caller{Actor: c.Actor, Bound: c.Bound, TokenID: c.TokenID, Expires: c.Expires}
	}, mcp.HTTPOptions{MaxBodyBytes: p.MaxBodyBytes})
	return endpoint{h, m}
}

// endpoint is the MCP server m serving at /mcp through h.
type endpoint struct {
	http.Handler
	*mcp.Server
}

// ServeHTTP is the handler's (the embedded *mcp.Server has none).
func (e endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.Handler.ServeHTTP(w, r) }
