package remote

import (
	"context"
	"net/http"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// GC runs a garbage collection on the server's store (POST
// /v1/admin/gc): the server's engine checks the policy and the caller's
// admin.compact right, as it would in process.
func (c *Client) GC(ctx context.Context, p workspace.GCPolicy) (workspace.GCReport, error) {
	body := wire.GCBody{Actor: p.Actor, KeepEvents: p.KeepEvents, KeepEventsFor: wire.DurationOf(p.KeepEventsFor),
		KeepVersions: p.KeepVersions, KeepTasksFor: wire.DurationOf(p.KeepTasksFor), KeepMessagesFor: wire.DurationOf(p.KeepMessagesFor), MinEvents: p.MinEvents,
		Reclaim: p.Reclaim, DryRun: p.DryRun, Batch: p.Batch, BatchTime: wire.DurationOf(p.BatchTime)}
	var out workspace.GCReport
	err := c.call(ctx, http.MethodPost, "/v1/admin/gc", nil, body, &out)
	return out, err
}

// Verify checks the server's store (GET /v1/admin/verify), with the
// caller's admin.export right.
func (c *Client) Verify(ctx context.Context) (workspace.VerifyReport, error) {
	var out workspace.VerifyReport
	err := c.call(ctx, http.MethodGet, "/v1/admin/verify", nil, nil, &out)
	return out, err
}
