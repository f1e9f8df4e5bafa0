package server

import (
	"net/http"

	"github.com/agentspace/agentspace/mcp"
)

// mcpRoute is where the MCP streamable HTTP transport is served.
const mcpRoute = "/mcp"

// mountMCP serves the workspace's MCP tools at /mcp. The middleware
// authenticates /mcp as it does /v1, so a tool call acts as the token's
// actor (or, where tokens are not required, the X-Agentspace-Actor
// header's).
func (s *Server) mountMCP() {
	s.mcp = mcp.NewServer(s.ws, mcp.Options{Version: s.opts.Version, Logger: s.log, Redact: s.opts.Redact})
	s.mux.Handle(mcpRoute, s.mcp.HTTPHandler(func(r *http.Request) mcp.Caller {
		p := principalFrom(r.Context())
		return mcp.Caller{Actor: p.actor, Bound: p.bound(), TokenID: p.token, Expires: p.expires}
	}, mcp.HTTPOptions{MaxBodyBytes: s.maxBody()}))
}
