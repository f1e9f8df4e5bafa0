package main

import (
	"io"
	"net/http"

	"github.com/agentspace/agentspace/mcp"
	"github.com/agentspace/agentspace/server"
)

// mcpEndpoint is the MCP endpoint wsctl's servers serve at /mcp: the
// server authenticates each request and tells who it comes from, and the
// MCP tools act as that caller. The server package knows no MCP; this is
// where the two faces meet.
func mcpEndpoint(p server.MCPParams) (http.Handler, io.Closer) {
	m := mcp.NewServer(p.Workspace, mcp.Options{Version: p.Version, Logger: p.Logger, Redact: p.Redact})
	h := m.HTTPHandler(func(r *http.Request) mcp.Caller {
		actor, bound := p.Caller(r)
		return mcp.Caller{Actor: actor, Bound: bound}
	}, mcp.HTTPOptions{MaxBodyBytes: p.MaxBodyBytes})
	return h, m
}
