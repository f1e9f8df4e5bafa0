package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// principal is who a request acts as: bound to a token's actor, or (no
// token, where allowed) whoever the request names.
type principal struct {
	actor string // the token's actor, or the wire.ActorHeader value
	role  string
	token string // the token's public id; "" without a token
	// expires is when the token expires (zero: never).
	expires time.Time
}

func (p principal) bound() bool { return p.token != "" }

// workspacePrincipal is who the engine checks the request's operations
// for: the token's role when it names one (whatever actor the body names,
// a write acts as the token's actor), else the policy's roles of the actor.
func (p principal) workspacePrincipal() workspace.Principal {
	wp := workspace.Principal{Actor: p.actor, Bound: p.bound()}
	if p.role != "" {
		wp.Roles = []string{p.role}
	}
	return wp
}

type principalKey struct{}

func principalFrom(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// actorFor returns the actor a write acts as. named is the actor the
// request body gives, if any. Behind a token it must be the token's actor
// or empty; without one the body's actor wins, else the header's.
func actorFor(ctx context.Context, named string) (string, error) {
	p := principalFrom(ctx)
	if p.bound() {
		if err := otherActor(p.actor, named); err != nil {
			return "", err
		}
		return p.actor, nil
	}
	if named != "" {
		return named, nil
	}
	return p.actor, nil
}

// otherActor refuses a request whose token acts as tokenActor and which
// names another actor (named, from its body or its actor header; ""
// names none): a token acts as its own actor only, and a request that
// says otherwise is refused rather than quietly done as the token's.
func otherActor(tokenActor, named string) error {
	if named != "" && named != tokenActor {
		return fmt.Errorf("%w: the token acts as %q; a request cannot act as %q", wire.ErrForbidden, tokenActor, truncate(named, 64))
	}
	return nil
}

// authenticate finds the request's principal. A request that presents a
// token is bound to its actor whatever the server's mode; one with a bad
// token is refused even where tokens are not required, and so is a token
// whose request's actor header names another actor. The context it
// returns ends when the token is revoked or expires (revoke.go); release
// it when the request ends.
func (s *Server) authenticate(r *http.Request) (principal, context.Context, func(), error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		if s.opts.RequireToken {
			return principal{}, nil, nil, fmt.Errorf("%w: this server requires a bearer token (Authorization: Bearer ast_...)", wire.ErrUnauthorized)
		}
		return principal{actor: r.Header.Get(wire.ActorHeader)}, r.Context(), func() {}, nil
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return principal{}, nil, nil, fmt.Errorf("%w: the Authorization header must be \"Bearer <token>\"", wire.ErrUnauthorized)
	}
	tok = strings.TrimSpace(tok)
	ctx, release, err := s.bindToken(r.Context(), tok)
	if err != nil {
		return principal{}, nil, nil, err
	}
	t, err := s.tokens.Verify(ctx, tok)
	if err != nil {
		// The revoker caught up with a revocation during the check: the
		// token's own end, not an outage.
		if e := tokenEnded(ctx); e != nil {
			err = e
		}
		release()
		return principal{}, nil, nil, err
	}
	if err := otherActor(t.Actor, r.Header.Get(wire.ActorHeader)); err != nil {
		release()
		return principal{}, nil, nil, err
	}
	ctx, release = untilExpiry(ctx, release, t)
	return principal{actor: t.Actor, role: t.Role, token: t.ID, expires: t.ExpiresAt}, ctx, release, nil
}

// recorder keeps the status a handler wrote, for the log and the metrics.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.status, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

// Flush lets event streams flush through the recorder.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// middleware refuses a foreign Host or Origin on every route (hosts.go),
// authenticates /v1 and /mcp requests, then logs and counts every request. It logs the method, route, status, time and actor: never a
// header's value, so never a token.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		// No answer is to be read as anything but its declared type.
		rec.Header().Set("X-Content-Type-Options", "nosniff")
		var p principal
		if pr := s.checkHost(r); pr != nil {
			writeProblem(rec, pr)
			s.observe(r, rec, p, start, "refused host")
			return
		}
		// The API and its description need a principal; /healthz,
		// /metrics and the dashboard (which checks its own) do not.
		if strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == mcpRoute {
			var (
				err     error
				ctx     context.Context
				release func()
			)
			p, ctx, release, err = s.authenticate(r)
			if err != nil {
				pr, ok := wire.ProblemOf(err)
				if !ok {
					s.log.Error("agentspace server: token check failed", "err", s.opts.Redact(err))
					pr = wire.NewProblem(wire.CodeUnavailable, "could not check the token")
				}
				writeProblem(rec, pr)
				s.observe(r, rec, p, start, "unauthenticated")
				return
			}
			defer release()
			if pr := s.readOnly(r, p); pr != nil {
				writeProblem(rec, pr)
				s.observe(r, rec, p, start, "read-only")
				return
			}
			ctx = context.WithValue(ctx, principalKey{}, p)
			r = r.WithContext(workspace.WithPrincipal(ctx, p.workspacePrincipal()))
			s.touched(r.Context(), p.actor)
		} else if r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/ui/") {
			var release func()
			r, release = s.bindDashboard(r)
			defer release()
		}
		next.ServeHTTP(rec, r)
		s.observe(r, rec, p, start, r.Pattern)
	})
}

// readOnly is the refusal of a change asked for without a token on a
// ReadOnly server (Options.ReadOnly), or nil.
func (s *Server) readOnly(r *http.Request, p principal) *wire.Problem {
	if !s.opts.ReadOnly || p.bound() {
		return nil
	}
	if r.URL.Path == mcpRoute || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return wire.NewProblem(wire.CodeForbidden, "this server is read-only without a token (wsctl dashboard): "+
			"send a token (Authorization: Bearer ast_...), or write through a server with tokens ('wsctl serve --require-token', 'wsctl dashboard --require-token')")
	}
	return nil
}

func (s *Server) observe(r *http.Request, rec *recorder, p principal, start time.Time, route string) {
	if route == "" || route == "/" {
		route = "unmatched"
	}
	d := time.Since(start)
	rs := s.metrics.forRoute(route, rec.status, r.Method != http.MethodGet && rec.status < 300)
	rs.requests.Inc()
	if rs.latency != nil {
		rs.latency.Observe(d.Seconds())
	}
	if rs.writes != nil {
		rs.writes.Inc()
	}
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "agentspace server: request",
			slog.String("method", r.Method), slog.String("route", route), slog.Int("status", rec.status),
			slog.Duration("took", d), slog.String("actor", p.actor), slog.Bool("token", p.bound()),
			slog.String("remote", r.RemoteAddr))
	}
}
