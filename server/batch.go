package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

func (s *Server) batchRoutes() {
	huma.Register(s.api, s.op("commitBatch", http.MethodPost, "/v1/batch", "Apply writes all or nothing", "batch", 0),
		func(ctx context.Context, in *struct{ Body wire.BatchBody }) (*struct{ Body workspace.BatchResult }, error) {
			actor, err := actorFor(ctx, in.Body.Actor)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			b := workspace.Batch{Actor: actor, IdempotencyKey: in.Body.IdempotencyKey, Ops: make([]workspace.Op, 0, len(in.Body.Ops))}
			for i, o := range in.Body.Ops {
				op, err := o.WorkspaceOp()
				if err != nil {
					return nil, s.fail(ctx, &workspace.BatchError{Index: i, Op: op, Err: err})
				}
				b.Ops = append(b.Ops, op)
			}
			res, err := s.ws.Commit(ctx, b)
			return answer(s, ctx, &struct{ Body workspace.BatchResult }{res}, err)
		})
}
