package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/workspace/touch"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/agentspace/agentspace/server/dashboard"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// Defaults of Options.
const (
	DefaultHeartbeat = 15 * time.Second
	DefaultMaxWait   = 60 * time.Second
	// DefaultMaxStreamsPerToken caps the event streams one token keeps
	// open on one server.
	DefaultMaxStreamsPerToken = 32
	// framing is what a body may hold beside one artifact's content: the
	// other fields and JSON's escaping.
	framing = 1 << 20
)

// Options configure a Server. The zero value serves without requiring
// tokens, which a caller must allow only on a loopback or unix-socket
// listener.
type Options struct {
	// RequireToken makes every /v1 request present a valid bearer token.
	// Without it, a request without a token acts as the actor it names
	// (X-Agentspace-Actor or the body's actor); a request with a token is
	// still bound to the token's actor (one that names another, in its
	// header or its body, is refused), and a bad token is refused.
	RequireToken bool
	// ReadOnly refuses every change a request without a token asks for:
	// a /v1 write (any method but GET and HEAD) and any request to /mcp,
	// whose tool calls may write, each with a 403 forbidden problem that
	// says how to write instead. Reads, the event stream and the
	// dashboard's pages are served as ever; a request with a valid token
	// acts as its actor. wsctl dashboard sets it: a loopback page for
	// people is no way in for every local user to write as anyone.
	ReadOnly bool
	// MaxArtifactSize is the workspace's limit on one artifact's content
	// (default workspace.DefaultMaxArtifactSize); request bodies are capped
	// at its base64 size plus framing.
	MaxArtifactSize int64
	// Heartbeat is how often an idle event stream sends a comment line with
	// the seq it has reached (default 15s).
	Heartbeat time.Duration
	// MaxWait bounds a long poll's wait (default 60s).
	MaxWait time.Duration
	// MaxStreamsPerToken caps the event streams (/v1/events) one token
	// keeps open on this server: one more is refused with 429 too_many
	// until one of them ends (default DefaultMaxStreamsPerToken). Streams
	// without a token are not counted: a server without tokens trusts its
	// host, and a name is no identity to count by.
	MaxStreamsPerToken int
	// Logger receives one debug line per request and warnings; never a
	// token (default slog.Default()).
	Logger *slog.Logger
	// Redact, when set, cleans an unexpected error's text before it is
	// logged (the CLI passes one that hides the DSN's password).
	Redact func(error) error
	// Version is reported in the OpenAPI document.
	Version string
	// MCP, when set, builds the MCP endpoint served at /mcp (wsctl passes
	// one over package mcp): the server authenticates its requests as it
	// does /v1's and Drain closes what it returns. Without it, /mcp is
	// not served.
	MCP func(MCPParams) MCPEndpoint
	// AllowedHosts are the names, besides the address a request arrives
	// on, that a request's Host (and a state-changing request's Origin)
	// may give: "name" on any port, or "name:port". See hosts.go.
	AllowedHosts []string
	// Agents are the thresholds of the agents' state rule (/v1/agents).
	Agents agents.Rule
	// TouchEvery, when positive, makes each request (an MCP call over
	// /mcp included) a heartbeat of its actor: the actor's claims and
	// leases are renewed, at most once per TouchEvery per actor and never
	// by more than each last granted (touch.Toucher). Zero: off.
	TouchEvery time.Duration
	// EscalateEvery is how often the server escalates the messages whose
	// ack deadline has passed unacknowledged (default
	// DefaultEscalateEvery; negative: never, leaving it to the readers of
	// inboxes and other servers).
	EscalateEvery time.Duration
}

// Server serves one workspace over HTTP: the /v1 API (JSON, with events as
// Server-Sent Events), /v1/openapi.json, /healthz and /metrics. It calls
// only the public workspace API, so its rules are the library's.
type Server struct {
	ws      *workspace.Workspace
	opts    Options
	log     *slog.Logger
	mux     *http.ServeMux
	handler http.Handler
	api     huma.API
	tokens  *agents.Tokens
	revoke  *revoker
	metrics *metrics
	mcp     MCPEndpoint
	dash    *dashboard.Handler
	touch   *touch.Toucher
	// served lists the /v1 routes ("METHOD /path") the mux serves, for
	// the test that finds each in the OpenAPI document.
	served []string

	// drain is cancelled by Drain: streams and long polls end on it.
	drain     context.Context
	drainOnce sync.Once
	stop      context.CancelFunc
	// escalated is closed when the escalator has stopped (nil: none runs).
	escalated chan struct{}
	// streams are the event streams that took their connections over
	// from net/http (stream.go): Drain waits for them.
	streams streamSet
	// perToken counts each token's open event streams
	// (Options.MaxStreamsPerToken).
	perToken tokenStreams
}

// New builds the server for ws. It does not close ws.
func New(ws *workspace.Workspace, opts Options) (*Server, error) {
	if ws == nil {
		return nil, errors.New("server.New: nil workspace")
	}
	if opts.MaxArtifactSize <= 0 {
		opts.MaxArtifactSize = workspace.DefaultMaxArtifactSize
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	if opts.MaxStreamsPerToken <= 0 {
		opts.MaxStreamsPerToken = DefaultMaxStreamsPerToken
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Redact == nil {
		opts.Redact = func(err error) error { return err }
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{ws: ws, opts: opts, log: opts.Logger, mux: http.NewServeMux(), tokens: agents.NewTokens(ws)}
	s.drain, s.stop = context.WithCancel(context.Background())
	s.revoke = newRevoker(s)
	if opts.TouchEvery > 0 {
		s.touch = touch.New(ws, touch.Options{Every: opts.TouchEvery})
	}
	s.metrics = newMetrics(ws)

	cfg := huma.DefaultConfig("agentspace", opts.Version)
	// The link transformer would add "$schema" to every record: the wire
	// shape is the workspace types' and nothing else.
	cfg.CreateHooks = nil
	cfg.DocsPath = ""
	cfg.SchemasPath = ""
	cfg.OpenAPIPath = "/v1/openapi"
	// A misspelt filter (lable=, limt=) is a 422 rather than silently
	// ignored.
	cfg.RejectUnknownQueryParameters = true
	cfg.Info.Description = "The agentspace workspace over HTTP: artifacts, tasks, notes, locks, batches and the event log. " +
		"Errors are application/problem+json with a stable code."
	cfg.Info.License = &huma.License{Name: "MIT", Identifier: "MIT"}
	// The document is served by the server it describes: paths are relative to it.
	cfg.Servers = []*huma.Server{{URL: "/", Description: "the server that serves this document (wsctl serve; default http://127.0.0.1:7465)"}}
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "ast_<id>_<secret>, from wsctl token create"},
	}
	cfg.Security = []map[string][]string{{"bearer": {}}, {}}
	cfg.Formats = maps.Clone(cfg.Formats)
	cfg.Formats["application/json"] = jsonFormat
	cfg.Formats["json"] = jsonFormat
	cfg.Transformers = []huma.Transformer{func(_ huma.Context, _ string, v any) (any, error) {
		if m, ok := v.(*huma.ErrorModel); ok {
			return fromHuma(m), nil
		}
		return v, nil
	}}
	s.api = humago.New(s.mux, cfg)
	registerWireTypes(s.api)
	s.routes()
	s.mountMCP()
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	s.documentOps()
	if err := s.mountDashboard(); err != nil {
		return nil, err
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, wire.NewProblem(wire.CodeNoRoute, "no such route: "+r.Method+" "+truncate(r.URL.Path, 200)+nameHint(r.URL)))
	})
	s.handler = s.middleware(s.mux)
	if opts.EscalateEvery == 0 {
		opts.EscalateEvery = DefaultEscalateEvery
	}
	if opts.EscalateEvery > 0 {
		s.escalated = make(chan struct{})
		go s.escalator(opts.EscalateEvery)
	}
	return s, nil
}

// nameHint says how to name a record whose name holds a slash, when the
// path looks like one that did not escape it (/v1/artifacts/docs/plan.md).
func nameHint(u *url.URL) string {
	for _, prefix := range []string{"/v1/artifacts/", "/v1/locks/"} {
		rest, ok := strings.CutPrefix(u.EscapedPath(), prefix)
		if ok && strings.Contains(rest, "/") {
			return "; a name holding a slash is one path segment: escape it (/v1/artifacts/docs%2Fplan.md)"
		}
	}
	return ""
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// OpenAPI returns the API's OpenAPI 3.1 document (the one served at
// /v1/openapi.json).
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// Drain ends every event stream and long poll cleanly and makes new ones
// return at once: call it when shutting down (http.Server.RegisterOnShutdown),
// since Shutdown itself waits for them. An event stream over HTTP/1.x has
// taken its connection from the http.Server, whose Shutdown and Close do
// not reach it: Drain ends it and returns once its connection is closed
// (within a second of its last write). It also stops the MCP server's
// change watcher, the dashboard's streams and the escalation of due
// messages (Options.EscalateEvery). Other requests are unaffected.
func (s *Server) Drain() {
	s.drainOnce.Do(func() {
		s.stop()
		s.streams.drain()
		s.closeMCP()
		s.dash.Close()
		s.revoke.close()
		if s.escalated != nil {
			<-s.escalated
		}
	})
}

// Tokens returns the token store the server checks requests against.
func (s *Server) Tokens() *agents.Tokens { return s.tokens }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	head, err := s.ws.Events().Head(ctx)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		s.log.Warn("agentspace server: health check failed", "err", s.opts.Redact(err))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"ok":false}` + "\n"))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "head": head})
}

// writeProblem writes p as the answer, outside huma (plain handlers).
func writeProblem(w http.ResponseWriter, p *wire.Problem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	for k, v := range p.GetHeaders() {
		w.Header()[k] = v
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// fail maps a workspace call's error to the answer huma writes. An error
// outside the known set is logged (redacted) and answered as internal
// without its text.
func (s *Server) fail(ctx context.Context, err error) *wire.Problem {
	if p, ok := wire.ProblemOf(err); ok {
		return p
	}
	if e := tokenEnded(ctx); e != nil {
		p, _ := wire.ProblemOf(e)
		return p
	}
	if p := wire.TimeoutOf(err, "the request's deadline passed"); p != nil {
		return p
	}
	if errors.Is(err, context.Canceled) {
		if s.drain.Err() != nil {
			return wire.NewProblem(wire.CodeUnavailable, "the server is shutting down")
		}
		// The client went away: no one reads the answer, and it is no
		// failure of the server's.
		return wire.NewProblem(wire.CodeTimeout, "the request was cancelled")
	}
	s.log.LogAttrs(ctx, slog.LevelError, "agentspace server: request failed", slog.Any("err", s.opts.Redact(err)))
	return wire.NewProblem(wire.CodeInternal, "internal error (logged by the server)")
}

// documentOps adds the plain routes outside /v1 to the OpenAPI document,
// so that it lists everything the server answers.
func (s *Server) documentOps() {
	oapi := s.api.OpenAPI()
	oapi.AddOperation(&huma.Operation{
		OperationID: "healthz", Method: http.MethodGet, Path: "/healthz", Tags: []string{"meta"},
		Summary:  "Liveness and store reachability: 200 with the head, or 503",
		Security: []map[string][]string{{}},
		Responses: map[string]*huma.Response{
			"200": {Description: "The store answers", Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Type: "object", Properties: map[string]*huma.Schema{"ok": {Type: "boolean"}, "head": {Type: "integer", Format: "int64"}}}}}},
			"503": {Description: "The store does not answer"},
		},
	})
	oapi.AddOperation(&huma.Operation{
		OperationID: "metrics", Method: http.MethodGet, Path: "/metrics", Tags: []string{"meta"},
		Summary:  "Prometheus metrics (text exposition format)",
		Security: []map[string][]string{{}},
		Responses: map[string]*huma.Response{
			"200": {Description: "The metrics", Content: map[string]*huma.MediaType{"text/plain": {Schema: &huma.Schema{Type: "string"}}}},
		},
	})
	s.served = append(s.served, "GET /healthz", "GET /metrics")
}
