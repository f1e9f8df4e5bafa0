// Package remote is the client backend: it opens a workspace served by
// `wsctl serve` (package server) elsewhere, over HTTP, and implements
// *workspace.Workspace over the /v1 API, so that a program (and the
// conformance suite) uses a served workspace exactly as a local one.
//
// Importing it registers three DSN schemes:
//
//	http://HOST:PORT[/PREFIX]?ws_token=ast_…
//	https://HOST:PORT[/PREFIX]?ws_token=ast_…
//	http+unix:///path/to.sock?ws_token=ast_…
//
// ws_token is the agent's bearer token (from `wsctl token create`); it is
// sent in the Authorization header only, and workspace.RedactDSN hides it.
// Without a token the server must allow anonymous requests (a loopback or
// unix-socket listener), and every write names its actor as usual. With
// one, a write acts as the token's actor: an empty Actor is filled in by
// the server and any other is refused with wire.ErrForbidden.
//
// Errors come back typed: the server sends each workspace error as a
// problem with its fields, and wire.DecodeError rebuilds it, so
// errors.Is and errors.As hold as they do in-process. Waits (a Claim or
// Acquire with Wait) are long polls repeated until the caller's context
// ends. Subscribe reads Server-Sent Events and, when the connection drops,
// resumes after the last id it saw, so the stream stays gap-free and
// duplicate-free across reconnects and server restarts.
//
// GETs, and writes that carry an idempotency key, are retried after a
// connection error or a 503 unavailable answer (the server cannot reach
// its store for now) for up to RetryFor: the key makes the retry of an
// acknowledged write return the first result rather than write twice.
//
// What stays with the store: the shared ws_ parameters that tune a store
// (ws_max_artifact_size is checked by the client as well, before sending;
// ws_idempotency_ttl, ws_poll, ws_group_wait and ws_private are the
// server's affair and are ignored here), and Export and Import, which need
// the store itself: they answer ErrRemoteArchive.
package remote
