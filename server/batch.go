package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// batchOp is the workspace op o stands for. A note op of a kind the
// server reserves is refused as it is on the notes routes.
func batchOp(o wire.OpBody) (workspace.Op, error) {
	switch o.Op {
	case wire.OpPutNote, wire.OpDeleteNote:
		if o.Kind != nil {
			if err := guardKind(*o.Kind); err != nil {
				return nil, err
			}
		}
	}
	return o.WorkspaceOp()
}

func (s *Server) batchRoutes() {
	huma.Register(s.api, s.op("commitBatch", http.MethodPost, "/v1/batch", "Apply writes all or nothing", "batch", 0),
		func(ctx context.Context, in *struct{ Body wire.BatchBody }) (*struct{ Body workspace.BatchResult }, error) {
			actor, err := actorFor(ctx, in.Body.Actor)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			b := workspace.Batch{Actor: actor, IdempotencyKey: in.Body.IdempotencyKey, Ops: make([]workspace.Op, 0, len(in.Body.Ops))}
			for i, o := range in.Body.Ops {
				op, err := batchOp(o)
				if err != nil {
					return nil, s.fail(ctx, &workspace.BatchError{Index: i, Op: op, Err: err})
				}
				b.Ops = append(b.Ops, op)
			}
			res, err := s.ws.Commit(ctx, b)
			return answer(s, ctx, &struct{ Body workspace.BatchResult }{res}, err)
		})
}
