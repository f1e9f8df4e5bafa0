package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

type taskOut struct {
	Body workspace.Task
}

// TaskPath names a task by id.
type TaskPath struct {
	ID string `path:"id" doc:"The task's id."`
}

func (s *Server) taskRoutes() {
	huma.Register(s.api, s.op("createTask", http.MethodPost, "/v1/tasks", "Add a pending task", "tasks", http.StatusCreated),
		func(ctx context.Context, in *struct{ Body wire.NewTaskBody }) (*taskOut, error) {
			w, err := s.write(ctx, in.Body.WriteFields)
			if err != nil {
				return nil, err
			}
			t, err := s.ws.Tasks().Create(ctx, w, in.Body.Task())
			return answer(s, ctx, &taskOut{t}, err)
		})

	huma.Register(s.api, s.op("listTasks", http.MethodGet, "/v1/tasks", "List tasks, oldest first", "tasks", 0),
		func(ctx context.Context, in *struct {
			Status   string   `query:"status" enum:"pending,in_progress,blocked,done,failed,cancelled"`
			Assignee string   `query:"assignee"`
			ParentID string   `query:"parent_id"`
			Label    []string `query:"label,explode" doc:"KEY=VALUE; repeat for more (every pair must match)."`
			Labels   string   `query:"labels" doc:"The pairs as a JSON object, for keys that hold an =."`
			After    string   `query:"after"`
			Limit    int      `query:"limit" minimum:"0" maximum:"1000"`
		}) (*struct{ Body workspace.TaskPage }, error) {
			labels, err := labelsQuery(in.Label, in.Labels)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			p, err := s.ws.Tasks().List(ctx, workspace.TaskFilter{Status: workspace.TaskStatus(in.Status), Assignee: in.Assignee, ParentID: in.ParentID, Labels: labels, After: in.After, Limit: in.Limit})
			return answer(s, ctx, &struct{ Body workspace.TaskPage }{p}, err)
		})

	huma.Register(s.api, s.op("getTask", http.MethodGet, "/v1/tasks/{id}", "Get a task", "tasks", 0),
		func(ctx context.Context, in *struct{ TaskPath }) (*taskOut, error) {
			t, err := s.ws.Tasks().Get(ctx, in.ID)
			return answer(s, ctx, &taskOut{t}, err)
		})

	huma.Register(s.api, s.op("updateTask", http.MethodPatch, "/v1/tasks/{id}", "Change a task's fields or status", "tasks", 0),
		func(ctx context.Context, in *struct {
			TaskPath
			Body wire.TaskChangeBody
		}) (*taskOut, error) {
			w, err := s.write(ctx, in.Body.WriteFields)
			if err != nil {
				return nil, err
			}
			t, err := s.ws.Tasks().Update(ctx, w, in.ID, in.Body.Change())
			return answer(s, ctx, &taskOut{t}, err)
		})

	claim := s.op("claimTask", http.MethodPost, "/v1/tasks/claim", "Claim the best ready task; with wait, a long poll", "tasks", 0)
	claim.Description = "Answers 404 with code no_task when no task is ready (after waiting up to wait, if given)."
	huma.Register(s.api, claim, func(ctx context.Context, in *struct{ Body wire.ClaimBody }) (*taskOut, error) {
		actor, err := actorFor(ctx, in.Body.Actor)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		lease, err := in.Body.Lease.Value("lease")
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		wait, err := in.Body.Wait.Value("wait")
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		req := workspace.ClaimRequest{Actor: actor, Lease: lease, Labels: in.Body.Labels, ParentID: in.Body.ParentID, AvoidOverlap: in.Body.AvoidOverlap}
		if wait <= 0 {
			t, err := s.ws.Tasks().Claim(ctx, req)
			return answer(s, ctx, &taskOut{t}, err)
		}
		wctx, cancel := s.waitContext(ctx, wait)
		defer cancel()
		req.Wait = true
		t, err := s.ws.Tasks().Claim(wctx, req)
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			// The wait ran out: one last look answers no_task (or the
			// task that became ready at that instant).
			req.Wait = false
			t, err = s.ws.Tasks().Claim(ctx, req)
		}
		return answer(s, ctx, &taskOut{t}, err)
	})

	huma.Register(s.api, s.op("heartbeatTask", http.MethodPost, "/v1/tasks/{id}/heartbeat", "Extend a claim's lease", "tasks", 0),
		func(ctx context.Context, in *struct {
			TaskPath
			Body wire.HeartbeatBody
		}) (*taskOut, error) {
			w, err := s.write(ctx, in.Body.WriteFields)
			if err != nil {
				return nil, err
			}
			lease, err := in.Body.Lease.Value("lease")
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			t, err := s.ws.Tasks().Heartbeat(ctx, w, in.ID, lease)
			return answer(s, ctx, &taskOut{t}, err)
		})

	for _, end := range []struct {
		id, path, summary string
		call              func(context.Context, workspace.Write, string, workspace.TaskResult) (workspace.Task, error)
	}{
		{"completeTask", "/v1/tasks/{id}/complete", "Mark a claimed task done with its result", s.ws.Tasks().Complete},
		{"failTask", "/v1/tasks/{id}/fail", "Mark a claimed task failed with its result", s.ws.Tasks().Fail},
	} {
		huma.Register(s.api, s.op(end.id, http.MethodPost, end.path, end.summary, "tasks", 0),
			func(ctx context.Context, in *struct {
				TaskPath
				Body wire.ResultBody
			}) (*taskOut, error) {
				w, err := s.write(ctx, in.Body.WriteFields)
				if err != nil {
					return nil, err
				}
				t, err := end.call(ctx, w, in.ID, workspace.TaskResult{Summary: in.Body.Summary, Artifacts: in.Body.Artifacts})
				return answer(s, ctx, &taskOut{t}, err)
			})
	}

	huma.Register(s.api, s.op("releaseTask", http.MethodPost, "/v1/tasks/{id}/release", "Return a claimed task to pending", "tasks", 0),
		func(ctx context.Context, in *struct {
			TaskPath
			Body wire.WriteFields
		}) (*taskOut, error) {
			w, err := s.write(ctx, in.Body)
			if err != nil {
				return nil, err
			}
			t, err := s.ws.Tasks().Release(ctx, w, in.ID)
			return answer(s, ctx, &taskOut{t}, err)
		})
}
