package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/agentspace/agentspace/workspace/touch"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentspace/agentspace/agents"
	"github.com/agentspace/agentspace/gitwork"
	"github.com/agentspace/agentspace/internal/wsconn"
	"github.com/agentspace/agentspace/workspace"
)

// ArtifactURIPrefix begins the URI of every artifact resource:
// agentspace://artifact/NAME, NAME as stored (slashes kept).
const ArtifactURIPrefix = "agentspace://artifact/"

// ArtifactURI returns the resource URI of the artifact called name.
func ArtifactURI(name string) string { return ArtifactURIPrefix + name }

// Options configure a Server.
type Options struct {
	// Actor is who the tools act as when the request carries no identity
	// of its own: the agent behind a stdio server. Over HTTP the caller's
	// token (or, without one, its named actor) decides instead.
	Actor string
	// Version is reported to clients as the server's version.
	Version string
	// Logger receives warnings (default: discard).
	Logger *slog.Logger
	// Redact cleans an unexpected error's text before an agent sees it
	// (wsctl passes one that hides the DSN's password).
	Redact func(error) error
	// Worktrees, when set, lets task_claim make the claimed task's git
	// worktree too (worktree: true): wsctl mcp sets it when it runs in a
	// git repository. nil: such a claim is refused before claiming.
	Worktrees *gitwork.Manager
	// Touch, when set, makes each tool call a heartbeat of the actor it
	// acts as (touch.Toucher): wsctl mcp --touch-every sets it. Over
	// HTTP leave it nil: the server touches for every request.
	Touch *touch.Toucher
	// Agents are the thresholds of the agents' state rule for the agents
	// tool (zero fields: agents' defaults); an embedding server passes
	// its own, so that /v1/agents and the tool agree.
	Agents agents.Rule
}

// Server serves one workspace to MCP clients: the tools, the artifact
// resources and their change notifications. Every tool makes calls of the
// public workspace API and nothing else, so the rules an agent meets here
// are the library's, the CLI's and the HTTP API's.
type Server struct {
	ws   *workspace.Workspace
	opts Options
	sdk  *sdk.Server
	// sessions are the HTTP handler's sessions and who opened them.
	sessions *sessions

	// The watcher turns artifact events into resource-updated
	// notifications. It starts with the first subscription and runs
	// until Close; its subscription starts at the head read before the
	// subscribe call returns, so no change after a subscription is missed.
	mu       sync.Mutex
	watching bool
	closed   bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// NewServer builds the MCP server for ws. It does not close ws.
func NewServer(ws *workspace.Workspace, opts Options) *Server {
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Redact == nil {
		opts.Redact = func(err error) error { return err }
	}
	s := &Server{ws: ws, opts: opts}
	s.sessions = &sessions{s: s, max: DefaultMaxSessionsPerCaller, byID: map[string]*sessionRec{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: "agentspace", Title: "agentspace workspace", Version: opts.Version}, &sdk.ServerOptions{
		Instructions:       Instructions,
		Logger:             opts.Logger,
		SubscribeHandler:   s.subscribe,
		UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
		Capabilities: &sdk.ServerCapabilities{
			Tools:     &sdk.ToolCapabilities{},
			Resources: &sdk.ResourceCapabilities{Subscribe: true},
		},
	})
	s.addTools()
	s.sdk.AddResourceTemplate(&sdk.ResourceTemplate{
		Name:        "artifact",
		Title:       "Workspace artifact",
		Description: "The head version of an artifact. Subscribe to be notified when it changes.",
		URITemplate: ArtifactURIPrefix + "{+name}",
	}, s.readResource)
	return s
}

// MCP returns the SDK server, for transports this package does not wire.
func (s *Server) MCP() *sdk.Server { return s.sdk }

// Run serves one client over t (stdio, in-memory, a command's pipes)
// until the client goes or ctx ends.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.sdk.Run(ctx, t)
}

// Close stops the change watcher and waits for it. Sessions still open
// get no further resource notifications.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

type actorKey struct{}

// withActor records who a transport's requests act as (the HTTP
// handler's caller without a token).
func withActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// actor is who a tool call acts as: the verified token's actor, else the
// actor the transport recorded, else the server's.
func (s *Server) actor(ctx context.Context, extra *sdk.RequestExtra) string {
	if extra != nil && extra.TokenInfo != nil {
		if a, ok := extra.TokenInfo.Extra[tokenActor].(string); ok && a != "" {
			return a
		}
	}
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return s.opts.Actor
}

// as returns ctx acting as the request's actor, and the actor: reads
// leave out what it may not read. Behind the HTTP server the token's
// principal is already set.
func (s *Server) as(ctx context.Context, extra *sdk.RequestExtra) (context.Context, string) {
	actor := s.actor(ctx, extra)
	if _, ok := wsconn.PrincipalFrom(ctx); !ok && actor != "" {
		ctx = workspace.AsActor(ctx, actor)
	}
	return ctx, actor
}

// tool registers one tool whose input is In. The handler returns the
// value to send back or an error, which becomes a tool error through the
// one classification table.
func tool[In any](s *Server, name, title, description string, enums map[string][]any, h func(ctx context.Context, actor string, in In) (any, error)) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		// The inputs are this package's own types: a schema that cannot be
		// derived is a programming error found by every test.
		panic(fmt.Sprintf("mcp: schema of %s: %v", name, err))
	}
	for prop, values := range enums {
		p, ok := schema.Properties[prop]
		if !ok {
			panic(fmt.Sprintf("mcp: %s has no property %q", name, prop))
		}
		p.Enum = values
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema of %s: %v", name, err))
	}
	t := &sdk.Tool{Name: name, Title: title, Description: description, InputSchema: schema}
	// The low-level handler validates the arguments itself, so that bad
	// ones are tool errors of the same shape as the workspace's (class
	// invalid, naming the field), not the SDK's own text.
	s.sdk.AddTool(t, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		ctx, actor := s.as(ctx, req.Extra)
		out, err := func() (any, error) {
			in, err := decodeArgs[In](req.Params.Arguments, resolved)
			if err != nil {
				return nil, err
			}
			s.touched(ctx, actor)
			return h(ctx, actor, in)
		}()
		// Every result but the inbox's own says, in one line, that the
		// agent is paused or has messages: it learns at its next call.
		line := ""
		if name != "inbox" {
			line = s.notice(ctx, actor)
		}
		if err != nil {
			te := classify(err, s.opts.Redact)
			if te.Error == ClassInternal {
				s.opts.Logger.Warn("agentspace mcp: tool failed", "tool", name, "err", s.opts.Redact(err))
			}
			return withNotice(errorResult(te), line), nil
		}
		r, err := okResult(out)
		if err != nil {
			return nil, err
		}
		return withNotice(r, line), nil
	})
}

// decodeArgs checks a call's arguments against the tool's schema and
// decodes them. A failure is an *InvalidError naming the argument.
func decodeArgs[In any](raw json.RawMessage, schema *jsonschema.Resolved) (In, error) {
	var in In
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		return in, badArg("arguments", "not a JSON object: %v", err)
	}
	if err := schema.Validate(v); err != nil {
		return in, badArg(schemaField(err.Error()), "%v", err)
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		field := "arguments"
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			field = te.Field
		}
		return in, badArg(field, "%v", err)
	}
	return in, nil
}

// schemaField picks the argument a schema validation error is about: the
// last "/properties/NAME" of its path, else "arguments".
func schemaField(msg string) string {
	i := strings.LastIndex(msg, "/properties/")
	if i < 0 {
		return "arguments"
	}
	rest := msg[i+len("/properties/"):]
	if j := strings.IndexAny(rest, ":/ "); j >= 0 {
		rest = rest[:j]
	}
	if rest == "" {
		return "arguments"
	}
	return rest
}

// artifactName returns the artifact name a resource URI names.
func artifactName(uri string) (string, error) {
	rest, ok := strings.CutPrefix(uri, ArtifactURIPrefix)
	if !ok || rest == "" {
		return "", badArg("uri", "not an artifact URI (want %sNAME)", ArtifactURIPrefix)
	}
	name, err := url.PathUnescape(rest)
	if err != nil {
		return "", badArg("uri", "bad escape in the artifact name: %v", err)
	}
	return name, nil
}

func (s *Server) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	name, err := artifactName(req.Params.URI)
	if err != nil {
		return nil, err
	}
	// A resource read is the artifact_read tool's read: the same rights.
	ctx, _ = s.as(ctx, req.Extra)
	a, err := s.ws.Artifacts().Get(ctx, workspace.ByName(name))
	if errors.Is(err, workspace.ErrNotFound) {
		return nil, sdk.ResourceNotFoundError(req.Params.URI)
	}
	if err != nil {
		te := classify(err, s.opts.Redact)
		return nil, fmt.Errorf("%s: %s", te.Error, te.Message)
	}
	rc := &sdk.ResourceContents{URI: req.Params.URI, MIMEType: a.ContentType,
		Meta: sdk.Meta{"version": a.Version, "sha256": a.SHA256, "updated_by": a.UpdatedBy}}
	if isText(a.Content) {
		rc.Text = string(a.Content)
	} else {
		rc.Blob = a.Content
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{rc}}, nil
}

// subscribe accepts a subscription to an artifact (existing or not: a
// client may wait for one to be created) and makes sure the watcher runs.
// An artifact the actor may not read is refused, as its read would be: the
// watcher tells every session subscribed to a name that it changed.
func (s *Server) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	name, err := artifactName(req.Params.URI)
	if err != nil {
		return err
	}
	rctx, _ := s.as(ctx, req.Extra)
	if _, err := s.ws.Artifacts().Get(rctx, workspace.ByName(name)); err != nil && !errors.Is(err, workspace.ErrNotFound) {
		te := classify(err, s.opts.Redact)
		return fmt.Errorf("%s: %s", te.Error, te.Message)
	}
	return s.watch(ctx)
}

func (s *Server) watch(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return workspace.ErrClosed
	}
	if s.watching {
		return nil
	}
	head, err := s.ws.Events().Head(ctx)
	if err != nil {
		return err
	}
	sub, err := s.ws.Events().Subscribe(s.ctx, workspace.SubscribeRequest{
		Query:     workspace.EventQuery{AfterSeq: head, SubjectKind: workspace.SubjectArtifact},
		Heartbeat: -1,
	})
	if err != nil {
		return err
	}
	s.watching = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer sub.Close()
		for m := range sub.C() {
			if m.Progress || m.Event.Subject.Name == "" {
				continue
			}
			// The SDK sends this only to the sessions subscribed to this URI.
			_ = s.sdk.ResourceUpdated(s.ctx, &sdk.ResourceUpdatedNotificationParams{URI: ArtifactURI(m.Event.Subject.Name)})
		}
		if err := sub.Err(); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, workspace.ErrClosed) {
			s.opts.Logger.Warn("agentspace mcp: change watcher stopped", "err", s.opts.Redact(err))
			s.mu.Lock()
			s.watching = false
			s.mu.Unlock()
		}
	}()
	return nil
}

// touched renews actor's claims and leases when Options.Touch is set. A
// failure is logged, never the call's.
func (s *Server) touched(ctx context.Context, actor string) {
	if s.opts.Touch == nil || actor == "" {
		return
	}
	if _, err := s.opts.Touch.Touch(ctx, actor); err != nil && ctx.Err() == nil {
		s.opts.Logger.Warn("agentspace mcp: renewing on use failed", "actor", actor, "err", s.opts.Redact(err))
	}
}
