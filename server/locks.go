package server

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// LockPath names a lock's resource.
type LockPath struct {
	Resource string `path:"resource" doc:"The resource, URL-escaped."`
}

type leaseOut struct {
	Body workspace.Lease
}

func (s *Server) lockRoutes() {
	acquire := s.op("acquireLock", http.MethodPost, "/v1/locks/{resource}/acquire", "Take (or extend) a lease; with wait, a long poll", "locks", 0)
	acquire.Description = "Answers 423 with code locked, the holder and the expiry, when another owner holds the lease (after waiting up to wait, if given)."
	huma.Register(s.api, acquire, func(ctx context.Context, in *struct {
		LockPath
		Body wire.AcquireBody
	}) (*leaseOut, error) {
		owner, err := actorFor(ctx, in.Body.Actor)
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		ttl, err := in.Body.TTL.Value("ttl")
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		wait, err := in.Body.Wait.Value("wait")
		if err != nil {
			return nil, s.fail(ctx, err)
		}
		req := workspace.AcquireRequest{Resource: in.Resource, Owner: owner, TTL: ttl, Message: in.Body.Message}
		if wait <= 0 {
			l, err := s.ws.Locks().Acquire(ctx, req)
			return answer(s, ctx, &leaseOut{l}, err)
		}
		wctx, cancel := s.waitContext(ctx, wait)
		defer cancel()
		req.Wait = true
		l, err := s.ws.Locks().Acquire(wctx, req)
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			// The wait ran out: one last try answers who holds it.
			req.Wait = false
			l, err = s.ws.Locks().Acquire(ctx, req)
		}
		return answer(s, ctx, &leaseOut{l}, err)
	})

	huma.Register(s.api, s.op("renewLock", http.MethodPost, "/v1/locks/{resource}/renew", "Extend a live lease by ttl from now", "locks", 0),
		func(ctx context.Context, in *struct {
			LockPath
			Body wire.LeaseBody
		}) (*leaseOut, error) {
			owner, err := actorFor(ctx, in.Body.Actor)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			ttl, err := in.Body.TTL.Value("ttl")
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			l, err := s.ws.Locks().Renew(ctx, workspace.Lease{Resource: in.Resource, Owner: owner, Token: in.Body.Token}, ttl)
			return answer(s, ctx, &leaseOut{l}, err)
		})

	huma.Register(s.api, s.op("releaseLock", http.MethodPost, "/v1/locks/{resource}/release", "Free a lease (its owner, with its token)", "locks", http.StatusNoContent),
		func(ctx context.Context, in *struct {
			LockPath
			Body wire.LeaseBody
		}) (*struct{}, error) {
			owner, err := actorFor(ctx, in.Body.Actor)
			if err != nil {
				return nil, s.fail(ctx, err)
			}
			err = s.ws.Locks().Release(ctx, workspace.Lease{Resource: in.Resource, Owner: owner, Token: in.Body.Token})
			return answer(s, ctx, &struct{}{}, err)
		})

	huma.Register(s.api, s.op("forceReleaseLock", http.MethodPost, "/v1/locks/{resource}/force-release", "Free a lease whoever holds it", "locks", http.StatusNoContent),
		func(ctx context.Context, in *struct {
			LockPath
			Body wire.WriteFields
		}) (*struct{}, error) {
			w, err := s.write(ctx, in.Body)
			if err != nil {
				return nil, err
			}
			return answer(s, ctx, &struct{}{}, s.ws.Locks().ForceRelease(ctx, w, in.Resource))
		})

	huma.Register(s.api, s.op("getLock", http.MethodGet, "/v1/locks/{resource}", "The live lease on a resource", "locks", 0),
		func(ctx context.Context, in *struct{ LockPath }) (*leaseOut, error) {
			l, err := s.ws.Locks().Get(ctx, in.Resource)
			return answer(s, ctx, &leaseOut{l}, err)
		})

	type leases struct {
		Locks []workspace.Lease `json:"locks"`
	}
	huma.Register(s.api, s.op("listLocks", http.MethodGet, "/v1/locks", "Every live lease, by resource", "locks", 0),
		func(ctx context.Context, _ *struct{}) (*struct{ Body leases }, error) {
			ls, err := s.ws.Locks().List(ctx)
			if ls == nil {
				ls = []workspace.Lease{}
			}
			return answer(s, ctx, &struct{ Body leases }{leases{ls}}, err)
		})
}
