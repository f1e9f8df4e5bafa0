package server

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// routes registers every /v1 operation. Each handler decodes its request,
// makes one call of the public workspace API, and answers its result or
// its error through the one mapping of errors.go.
func (s *Server) routes() {
	s.artifactRoutes()
	s.taskRoutes()
	s.noteRoutes()
	s.lockRoutes()
	s.eventRoutes()
	s.batchRoutes()
	s.adminRoutes()
	s.agentRoutes()
	s.messageRoutes()

	type whoami struct {
		Actor string `json:"actor" doc:"The token's actor, or the X-Agentspace-Actor header's value without a token."`
		Role  string `json:"role"`
		Token string `json:"token" doc:"The token's public id; empty without a token."`
	}
	huma.Register(s.api, s.op("whoami", http.MethodGet, "/v1/whoami", "Who the request acts as", "meta", 0),
		func(ctx context.Context, _ *struct{}) (*struct{ Body whoami }, error) {
			p := principalFrom(ctx)
			return &struct{ Body whoami }{whoami{p.actor, p.role, p.token}}, nil
		})
	huma.Register(s.api, s.op("status", http.MethodGet, "/v1/status", "The dashboard: counts, active tasks, live locks, recent events", "meta", 0),
		func(ctx context.Context, _ *struct{}) (*struct{ Body workspace.Status }, error) {
			st, err := s.ws.Status(ctx)
			return answer(s, ctx, &struct{ Body workspace.Status }{st}, err)
		})
}

// op is the operation every route starts from: its body cap is one
// artifact's base64 content plus framing.
func (s *Server) op(id, method, path, summary, tag string, status int) huma.Operation {
	errs := []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict}
	if method != http.MethodGet {
		errs = append(errs, http.StatusRequestEntityTooLarge, http.StatusLocked)
	}
	s.served = append(s.served, method+" "+path)
	return huma.Operation{
		OperationID:     id,
		Method:          method,
		Path:            path,
		Summary:         summary,
		Tags:            []string{tag},
		DefaultStatus:   status,
		MaxBodyBytes:    s.maxBody(),
		BodyReadTimeout: 2 * time.Minute,
		Errors:          errs,
	}
}

func (s *Server) maxBody() int64 { return s.opts.MaxArtifactSize/3*4 + 4 + framing }

// write turns a request's write fields into the workspace's Write, with
// the actor the request may act as.
func (s *Server) write(ctx context.Context, f wire.WriteFields) (workspace.Write, error) {
	actor, err := actorFor(ctx, f.Actor)
	if err != nil {
		return workspace.Write{}, s.fail(ctx, err)
	}
	return workspace.Write{Actor: actor, IfVersion: f.IfVersion, Fence: f.Fence, Message: f.Message, IdempotencyKey: f.IdempotencyKey}, nil
}

// answer returns out, or err mapped to its problem.
func answer[T any](s *Server, ctx context.Context, out *T, err error) (*T, error) {
	if err != nil {
		return nil, s.fail(ctx, err)
	}
	return out, nil
}

// waitContext bounds a long poll by the wait asked (capped by MaxWait),
// the request, and the server's drain.
func (s *Server) waitContext(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	wait = min(wait, s.opts.MaxWait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	stop := context.AfterFunc(s.drain, cancel)
	return wctx, func() { stop(); cancel() }
}
