package mcp

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Caller is who an HTTP request comes from, as the embedding server
// authenticated it.
type Caller struct {
	// Actor is who the request acts as: the token's actor, or (no token,
	// where the server allows it) the actor the request names.
	Actor string
	// Bound is set when Actor comes from a verified token: a session is
	// then kept to that token (TokenID), and a request with another token,
	// even one of the same actor, is refused with 403.
	Bound bool
	// TokenID is the verified token's public id (with Bound).
	TokenID string
	// Expires is when the token expires (zero: never): its sessions
	// close then.
	Expires time.Time
}

// tokenActor is the key of the actor in the SDK's token info.
const tokenActor = "agentspace.actor"

// HTTPOptions configure the streamable HTTP handler.
type HTTPOptions struct {
	// MaxBodyBytes caps a request body (default: the SDK's).
	MaxBodyBytes int64
	// SessionTimeout closes a session idle this long (default 30 minutes).
	SessionTimeout time.Duration
	// MaxSessionsPerCaller caps the sessions one token (or, without
	// tokens, one named actor) keeps open; a new one closes the least
	// recently used idle one (default DefaultMaxSessionsPerCaller).
	MaxSessionsPerCaller int
}

// statelessVersion is the first protocol version without sessions; the
// SDK serves it only from a stateless handler.
const statelessVersion = "2026-07-28"

// HTTPHandler serves the MCP streamable HTTP transport. caller tells who
// each request comes from; the embedding server authenticates it before
// this handler runs. Clients that negotiate a protocol with sessions
// (2025-11-25 and before, most clients today) get sessions, with resource
// subscriptions; clients of the stateless protocol are served statelessly.
func (s *Server) HTTPHandler(caller func(*http.Request) Caller, o HTTPOptions) http.Handler {
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.MaxSessionsPerCaller > 0 {
		s.sessions.max = o.MaxSessionsPerCaller
	}
	get := func(*http.Request) *sdk.Server { return s.sdk }
	stateful := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
		SessionTimeout: o.SessionTimeout, MaxRequestBodyBytes: o.MaxBodyBytes,
	})
	stateless := sdk.NewStreamableHTTPHandler(get, &sdk.StreamableHTTPOptions{
		Stateless: true, MaxRequestBodyBytes: o.MaxBodyBytes, PropagateRequestCancellation: true,
	})
	tracked := s.sessions.track(stateful, caller)
	route := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= statelessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet {
			// A session's notification stream has no body and may stay
			// open for as long as the session: no read deadline applies.
			_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		}
		tracked.ServeHTTP(w, r)
	})
	// A verified token goes in the SDK's token info: the SDK binds a
	// session to its UserID (the token's id, not its actor, so another
	// token of the same actor cannot take the session over) and hands the
	// actor to every tool call in req.Extra.TokenInfo.
	bound := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c := caller(r)
		return &auth.TokenInfo{UserID: "token:" + c.TokenID, Expiration: c.Expires, Extra: map[string]any{tokenActor: c.Actor}}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(route)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := caller(r)
		if c.Bound {
			bound.ServeHTTP(w, r)
			return
		}
		route.ServeHTTP(w, r.WithContext(withActor(r.Context(), c.Actor)))
	})
}
