package server

import (
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/workspace"
)

// mcpRoute is where the MCP streamable HTTP transport is served.
const mcpRoute = "/mcp"

// MCPParams is what Options.MCP is given to build the MCP endpoint: the
// server's workspace and settings, and who each request comes from.
type MCPParams struct {
	// Workspace is the server's workspace.
	Workspace *workspace.Workspace
	// Version, Logger and Redact are the server's (Options).
	Version string
	Logger  *slog.Logger
	Redact  func(error) error
	// MaxBodyBytes is the server's cap on a request body.
	MaxBodyBytes int64
	// Agents are the server's thresholds of the agents' state rule
	// (Options.Agents), so that /mcp and /v1/agents judge alike.
	Agents agents.Rule
	// Caller tells who a request acts as, as the server authenticated it.
	Caller func(r *http.Request) MCPCaller
}

// MCPCaller is who a request to /mcp comes from.
type MCPCaller struct {
	// Actor is the token's actor, or (no token, where the server allows
	// it) the actor the request names.
	Actor string
	// Bound is set when Actor comes from a verified token, whose public id
	// is TokenID and which ends at Expires (zero: never).
	Bound   bool
	TokenID string
	Expires time.Time
}

// MCPEndpoint is what Options.MCP builds: the handler served at /mcp, what
// Drain closes, and how the server ends a revoked token's sessions.
type MCPEndpoint interface {
	http.Handler
	io.Closer
	// EndSessions closes the sessions opened with token tokenID ("":
	// every token's).
	EndSessions(tokenID string)
}

// mountMCP serves the endpoint Options.MCP builds at /mcp, if it is set.
// The middleware authenticates /mcp as it does /v1, so a tool call acts as
// the token's actor (or, where tokens are not required, the
// X-Agentspace-Actor header's).
func (s *Server) mountMCP() {
	if s.opts.MCP == nil {
		return
	}
	s.mcp = s.opts.MCP(MCPParams{
		Workspace: s.ws, Version: s.opts.Version, Logger: s.log, Redact: s.opts.Redact, MaxBodyBytes: s.maxBody(), Agents: s.opts.Agents,
		Caller: func(r *http.Request) MCPCaller {
			p := principalFrom(r.Context())
			return MCPCaller{Actor: p.actor, Bound: p.bound(), TokenID: p.token, Expires: p.expires}
		},
	})
	s.mux.Handle(mcpRoute, s.mcp)
}

// closeMCP stops what the MCP endpoint started (its change watcher).
func (s *Server) closeMCP() {
	if s.mcp != nil {
		_ = s.mcp.Close()
	}
}
