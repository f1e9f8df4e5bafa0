package server

import (
	"log/slog"
	"net/http"

	"github.com/agentspace/agentspace/workspace"
)

// mcpRoute is where the MCP streamable HTTP transport is served.
const mcpRoute = "/mcp"

// MCPParams is what Options.MCP is given to build the MCP endpoint: the
// server's workspace and settings, and who each request comes from.
type MCPParams struct {
	// Workspace is the server's workspace.
	Workspace workspace.Workspace
	// Version, Logger and Redact are the server's (Options).
	Version string
	Logger  *slog.Logger
	Redact  func(error) error
	// MaxBodyBytes is the server's cap on a request body.
	MaxBodyBytes int64
	// Caller tells who a request acts as, as the server authenticated it:
	// the token's actor with bound set, or (no token, where the server
	// allows it) the actor the request names.
	Caller func(r *http.Request) (actor string, bound bool)
}

// mountMCP serves the endpoint Options.MCP builds at /mcp, if it is set.
// The middleware authenticates /mcp as it does /v1, so a tool call acts as
// the token's actor (or, where tokens are not required, the
// X-Agentspace-Actor header's).
func (s *Server) mountMCP() {
	if s.opts.MCP == nil {
		return
	}
	var h http.Handler
	h, s.mcp = s.opts.MCP(MCPParams{
		Workspace: s.ws, Version: s.opts.Version, Logger: s.log, Redact: s.opts.Redact, MaxBodyBytes: s.maxBody(),
		Caller: func(r *http.Request) (string, bool) {
			p := principalFrom(r.Context())
			return p.actor, p.bound()
		},
	})
	s.mux.Handle(mcpRoute, h)
}

// closeMCP stops what the MCP endpoint started (its change watcher).
func (s *Server) closeMCP() {
	if s.mcp != nil {
		_ = s.mcp.Close()
	}
}
