package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// longPoll is the wait a client asks of the server per request; the
// server caps it with its own --max-wait, and the client asks again until
// the caller's context ends.
const longPoll = time.Minute

type tasks struct{ c *Client }

func taskPath(id, action string) (string, error) {
	s, err := segment("id", id)
	if err != nil {
		return "", err
	}
	p := "/v1/tasks/" + s
	if action != "" {
		p += "/" + action
	}
	return p, nil
}

func (t tasks) Create(ctx context.Context, w workspace.Write, n workspace.NewTask) (workspace.Task, error) {
	var out workspace.Task
	body := wire.NewTaskBody{WriteFields: wire.WriteFieldsOf(w), Title: n.Title, Description: n.Description, ParentID: n.ParentID, DependsOn: n.DependsOn, Areas: n.Areas, Priority: n.Priority, Labels: n.Labels, Assignee: n.Assignee}
	err := t.c.callRetry(ctx, http.MethodPost, "/v1/tasks", nil, body, &out, w.IdempotencyKey != "")
	return out, err
}

func (t tasks) Get(ctx context.Context, id string) (workspace.Task, error) {
	var out workspace.Task
	p, err := taskPath(id, "")
	if err != nil {
		return out, err
	}
	err = t.c.call(ctx, http.MethodGet, p, nil, nil, &out)
	return out, err
}

func (t tasks) Update(ctx context.Context, w workspace.Write, id string, ch workspace.TaskChange) (workspace.Task, error) {
	var out workspace.Task
	p, err := taskPath(id, "")
	if err != nil {
		return out, err
	}
	body := wire.TaskChangeBody{WriteFields: wire.WriteFieldsOf(w), Status: ch.Status, Title: ch.Title, Description: ch.Description, Assignee: ch.Assignee, Priority: ch.Priority, Labels: ch.Labels, Result: ch.Result}
	err = t.c.callRetry(ctx, http.MethodPatch, p, nil, body, &out, w.IdempotencyKey != "")
	return out, err
}

// Claim takes the best ready task; with Wait, it long-polls until a task
// is ready or ctx ends.
func (t tasks) Claim(ctx context.Context, r workspace.ClaimRequest) (workspace.Task, error) {
	body := wire.ClaimBody{Actor: r.Actor, Lease: wire.DurationOf(r.Lease), Labels: r.Labels, ParentID: r.ParentID, AvoidOverlap: r.AvoidOverlap}
	if r.Wait {
		body.Wait = wire.DurationOf(longPoll)
	}
	for {
		var out workspace.Task
		err := t.c.call(ctx, http.MethodPost, "/v1/tasks/claim", nil, body, &out)
		if !r.Wait || !errors.Is(err, workspace.ErrNoTask) {
			return out, err
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
}

func (t tasks) Heartbeat(ctx context.Context, w workspace.Write, id string, lease time.Duration) (workspace.Task, error) {
	var out workspace.Task
	p, err := taskPath(id, "heartbeat")
	if err != nil {
		return out, err
	}
	body := wire.HeartbeatBody{WriteFields: wire.WriteFieldsOf(w), Lease: wire.DurationOf(lease)}
	err = t.c.callRetry(ctx, http.MethodPost, p, nil, body, &out, w.IdempotencyKey != "")
	return out, err
}

func (t tasks) Complete(ctx context.Context, w workspace.Write, id string, r workspace.TaskResult) (workspace.Task, error) {
	return t.finish(ctx, w, id, "complete", r)
}

func (t tasks) Fail(ctx context.Context, w workspace.Write, id string, r workspace.TaskResult) (workspace.Task, error) {
	return t.finish(ctx, w, id, "fail", r)
}

func (t tasks) finish(ctx context.Context, w workspace.Write, id, action string, r workspace.TaskResult) (workspace.Task, error) {
	var out workspace.Task
	p, err := taskPath(id, action)
	if err != nil {
		return out, err
	}
	body := wire.ResultBody{WriteFields: wire.WriteFieldsOf(w), Summary: r.Summary, Artifacts: r.Artifacts}
	err = t.c.callRetry(ctx, http.MethodPost, p, nil, body, &out, w.IdempotencyKey != "")
	return out, err
}

func (t tasks) Release(ctx context.Context, w workspace.Write, id string) (workspace.Task, error) {
	var out workspace.Task
	p, err := taskPath(id, "release")
	if err != nil {
		return out, err
	}
	err = t.c.callRetry(ctx, http.MethodPost, p, nil, wire.WriteFieldsOf(w), &out, w.IdempotencyKey != "")
	return out, err
}

func (t tasks) List(ctx context.Context, f workspace.TaskFilter) (workspace.TaskPage, error) {
	// The server checks the status against its schema; checked here, it
	// is refused with the library's own words.
	if f.Status != "" && !f.Status.Valid() {
		return workspace.TaskPage{}, &workspace.InvalidError{Field: "status", Reason: fmt.Sprintf("%q is not a task status", f.Status)}
	}
	q := url.Values{}
	setStr(q, "status", string(f.Status))
	setStr(q, "assignee", f.Assignee)
	setStr(q, "parent_id", f.ParentID)
	setStr(q, "after", f.After)
	setInt(q, "limit", int64(f.Limit))
	labelQuery(q, f.Labels)
	var out workspace.TaskPage
	err := t.c.call(ctx, http.MethodGet, "/v1/tasks", q, nil, &out)
	return out, err
}
