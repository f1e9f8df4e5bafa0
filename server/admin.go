package server

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/workspace"
)

// GCBody is a garbage collection's policy (workspace.GCPolicy) on the
// wire. Zero fields keep everything of their kind.
type GCBody struct {
	Actor         string   `json:"actor,omitempty" doc:"Who runs it, recorded on its event. Behind a token: the token's actor or empty."`
	KeepEvents    int64    `json:"keep_events,omitempty" doc:"Keep the newest N events."`
	KeepEventsFor Duration `json:"keep_events_for,omitempty" doc:"Keep the events younger than this."`
	KeepVersions  int64    `json:"keep_versions,omitempty" doc:"Keep the newest N versions of each live artifact, plus pinned ones and those a task's result names."`
	KeepTasksFor  Duration `json:"keep_tasks_for,omitempty" doc:"Keep finished tasks updated within this long."`
	MinEvents     int64    `json:"min_events,omitempty" doc:"Remove no events unless at least this many would go."`
	Reclaim       bool     `json:"reclaim,omitempty" doc:"Give the freed space back to the file system (SQLite's incremental vacuum)."`
	DryRun        bool     `json:"dry_run,omitempty" doc:"Report what would go; remove nothing."`
	Batch         int64    `json:"batch,omitempty" doc:"The most records one transaction removes."`
	BatchTime     Duration `json:"batch_time,omitempty" doc:"How long one transaction should hold the store's write lock (default 10ms)."`
}

// policy returns the body as a workspace.GCPolicy run by actor. A
// duration that does not parse is an *InvalidError naming its field; a
// negative one is left for the engine to refuse, as it would in process.
func (b GCBody) policy(actor string) (workspace.GCPolicy, error) {
	p := workspace.GCPolicy{Actor: actor, KeepEvents: b.KeepEvents, KeepVersions: b.KeepVersions, MinEvents: b.MinEvents,
		Reclaim: b.Reclaim, DryRun: b.DryRun, Batch: b.Batch}
	for _, d := range []struct {
		field string
		in    Duration
		out   *time.Duration
	}{{"keep_events_for", b.KeepEventsFor, &p.KeepEventsFor}, {"keep_tasks_for", b.KeepTasksFor, &p.KeepTasksFor}, {"batch_time", b.BatchTime, &p.BatchTime}} {
		if d.in == "" {
			continue
		}
		v, err := time.ParseDuration(string(d.in))
		if err != nil {
			return p, &workspace.InvalidError{Field: d.field, Reason: "not a duration such as 30s or 5m"}
		}
		*d.out = v
	}
	return p, nil
}

// adminRoutes serves what the operator commands wsctl gc and wsctl verify
// do, for a client of the server (and wsctl --dsn http://…). The engine
// checks the rights: admin.compact for gc, admin.export for verify.
func (s *Server) adminRoutes() {
	huma.Register(s.api, s.op("gc", http.MethodPost, "/v1/admin/gc", "Remove what the retention policy given does not keep, in short transactions", "admin", 0),
		func(ctx context.Context, in *struct{ Body GCBody }) (*struct{ Body workspace.GCReport }, error) {
			actor, err := actorFor(ctx, in.Body.Actor)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			p, err := in.Body.policy(actor)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			r, err := workspace.GC(ctx, s.ws, p)
			return answer(s, ctx, &struct{ Body workspace.GCReport }{r}, err)
		})
	huma.Register(s.api, s.op("verify", http.MethodGet, "/v1/admin/verify", "Check the event log's hash chain and every artifact version's content", "admin", 0),
		func(ctx context.Context, _ *struct{}) (*struct{ Body workspace.VerifyReport }, error) {
			r, err := workspace.Verify(ctx, s.ws)
			return answer(s, ctx, &struct{ Body workspace.VerifyReport }{r}, err)
		})
}
