package remote

import (
	"context"
	"errors"
	"net/http"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// Commit sends the batch to /v1/batch. A failed op's error is a
// *workspace.BatchError whose Op is the caller's own b.Ops[Index].
func (c *Client) Commit(ctx context.Context, b workspace.Batch) (workspace.BatchResult, error) {
	var out workspace.BatchResult
	body := wire.BatchBody{Actor: b.Actor, IdempotencyKey: b.IdempotencyKey, Ops: make([]wire.OpBody, 0, len(b.Ops))}
	for i, op := range b.Ops {
		ob, err := wire.EncodeOp(op, c.checkContent)
		if err != nil {
			return out, &workspace.BatchError{Index: i, Op: op, Err: err}
		}
		body.Ops = append(body.Ops, ob)
	}
	err := c.callRetry(ctx, http.MethodPost, "/v1/batch", nil, body, &out, b.IdempotencyKey != "")
	var be *workspace.BatchError
	if errors.As(err, &be) && be.Index >= 0 && be.Index < len(b.Ops) {
		be.Op = b.Ops[be.Index]
	}
	return out, err
}
