// Package server serves a workspace over HTTP: the /v1 JSON API, the event
// log as Server-Sent Events, bearer tokens kept in the workspace itself,
// an OpenAPI 3.1 document generated from the handlers, /healthz and
// Prometheus /metrics, and the live web dashboard (package dashboard) at /.
//
// Every handler makes calls of the public workspace API only, so the
// server keeps no state of its own and enforces no rule the library does
// not: a behaviour that differs between the CLI and the API is a bug.
// Records are sent in the workspace types' own JSON; errors are RFC 9457
// problems with a stable code, and wire.DecodeError turns one back into the
// workspace's typed error, so a client over the network sees what an
// in-process caller would.
//
// Identity comes from the token: a request that presents one acts as its
// actor and cannot name another (403). Without Options.RequireToken, a
// request without a token acts as whoever it names, which a caller must
// allow only on a loopback or unix-socket listener.
package server
