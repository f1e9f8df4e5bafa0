package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// adminRoutes serves what the operator commands wsctl gc and wsctl verify
// do, for a client of the server (and wsctl --dsn http://…). The engine
// checks the rights: admin.compact for gc, admin.export for verify.
func (s *Server) adminRoutes() {
	huma.Register(s.api, s.op("gc", http.MethodPost, "/v1/admin/gc", "Remove what the retention policy given does not keep, in short transactions", "admin", 0),
		func(ctx context.Context, in *struct{ Body wire.GCBody }) (*struct{ Body workspace.GCReport }, error) {
			actor, err := actorFor(ctx, in.Body.Actor)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			p, err := in.Body.Policy(actor)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			r, err := s.ws.GC(ctx, p)
			return answer(s, ctx, &struct{ Body workspace.GCReport }{r}, err)
		})
	huma.Register(s.api, s.op("verify", http.MethodGet, "/v1/admin/verify", "Check the event log's hash chain and every artifact version's content", "admin", 0),
		func(ctx context.Context, _ *struct{}) (*struct{ Body workspace.VerifyReport }, error) {
			r, err := s.ws.Verify(ctx)
			return answer(s, ctx, &struct{ Body workspace.VerifyReport }{r}, err)
		})
}
