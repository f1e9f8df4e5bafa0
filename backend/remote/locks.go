package remote

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

type locks struct{ c *Client }

func lockPath(resource, action string) (string, error) {
	s, err := segment("resource", resource)
	if err != nil {
		return "", err
	}
	p := "/v1/locks/" + s
	if action != "" {
		p += "/" + action
	}
	return p, nil
}

// Acquire takes the lease; with Wait, it long-polls until the lease is
// free or ctx ends.
func (l locks) Acquire(ctx context.Context, r workspace.AcquireRequest) (workspace.Lease, error) {
	var out workspace.Lease
	p, err := lockPath(r.Resource, "acquire")
	if err != nil {
		return out, err
	}
	body := wire.AcquireBody{Actor: r.Owner, TTL: wire.DurationOf(r.TTL), Message: r.Message}
	if r.Wait {
		body.Wait = wire.DurationOf(longPoll)
	}
	for {
		err := l.c.call(ctx, http.MethodPost, p, nil, body, &out)
		if !r.Wait || !errors.Is(err, workspace.ErrLocked) {
			return out, err
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
	}
}

func (l locks) Renew(ctx context.Context, lease workspace.Lease, ttl time.Duration) (workspace.Lease, error) {
	var out workspace.Lease
	p, err := lockPath(lease.Resource, "renew")
	if err != nil {
		return out, err
	}
	err = l.c.call(ctx, http.MethodPost, p, nil, wire.LeaseBody{Actor: lease.Owner, Token: lease.Token, TTL: wire.DurationOf(ttl)}, &out)
	return out, err
}

func (l locks) Release(ctx context.Context, lease workspace.Lease) error {
	p, err := lockPath(lease.Resource, "release")
	if err != nil {
		return err
	}
	return l.c.call(ctx, http.MethodPost, p, nil, wire.LeaseBody{Actor: lease.Owner, Token: lease.Token}, nil)
}

func (l locks) ForceRelease(ctx context.Context, w workspace.Write, resource string) error {
	p, err := lockPath(resource, "force-release")
	if err != nil {
		return err
	}
	return l.c.callRetry(ctx, http.MethodPost, p, nil, wire.WriteFieldsOf(w), nil, w.IdempotencyKey != "")
}

func (l locks) Get(ctx context.Context, resource string) (workspace.Lease, error) {
	var out workspace.Lease
	p, err := lockPath(resource, "")
	if err != nil {
		return out, err
	}
	err = l.c.call(ctx, http.MethodGet, p, nil, nil, &out)
	return out, err
}

func (l locks) List(ctx context.Context) ([]workspace.Lease, error) {
	var out struct {
		Locks []workspace.Lease `json:"locks"`
	}
	err := l.c.call(ctx, http.MethodGet, "/v1/locks", nil, nil, &out)
	return out.Locks, err
}
