package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentspace/agentspace/server/dashboard"
	"github.com/agentspace/agentspace/wire"
	"github.com/agentspace/agentspace/workspace"
)

// errTokenEnded is the cause of a request context cancelled because its
// token was revoked (or its record changed) while the request ran; a
// request that outlives its token's expiry ends with errTokenExpired.
var (
	errTokenEnded   = fmt.Errorf("%w: the token was revoked during the request", wire.ErrUnauthorized)
	errTokenExpired = fmt.Errorf("%w: the token expired during the request", wire.ErrUnauthorized)
)

// revoker ends what a token opened when the token ends. It follows the
// server's own workspace's event log: a token's record changes after its
// creation only when it is revoked, so any later event on it (a put past
// version 1, a delete) cancels every request bound to that token: event
// streams, long polls, the dashboard's streams, MCP requests; and the
// server closes the token's MCP sessions.
//
// Invariant: a request is bound (registered under its token id) before
// its token is verified, and the watcher's subscription starts before
// the first binding's verify reads the store. So a revocation the verify
// did not see commits after the watcher's start, and the watcher, which
// sees every event from its start in order, cancels the binding. An
// event stream delivers an event only once the watcher has examined it
// (waitPast), so a stream delivers no event after its token's revocation.
type revoker struct {
	s *Server

	mu       sync.Mutex
	started  bool
	pos      int64         // every event with seq <= pos has been examined
	advanced chan struct{} // closed and replaced each time pos moves
	binds    map[string]map[*binding]struct{}
	wg       sync.WaitGroup
}

type binding struct{ cancel context.CancelCauseFunc }

func newRevoker(s *Server) *revoker {
	return &revoker{s: s, advanced: make(chan struct{}), binds: map[string]map[*binding]struct{}{}}
}

// bind returns ctx cancelled (with cause errTokenEnded) when the token
// called id changes, and a release to call when the request ends.
func (v *revoker) bind(ctx context.Context, id string) (context.Context, func(), error) {
	if err := v.start(ctx); err != nil {
		return ctx, func() {}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	b := &binding{cancel: cancel}
	v.mu.Lock()
	set := v.binds[id]
	if set == nil {
		set = map[*binding]struct{}{}
		v.binds[id] = set
	}
	set[b] = struct{}{}
	v.mu.Unlock()
	return ctx, func() {
		v.mu.Lock()
		// set is still v.binds[id]: a set leaves the map only when empty.
		delete(set, b)
		if len(set) == 0 {
			delete(v.binds, id)
		}
		v.mu.Unlock()
		cancel(nil)
	}, nil
}

// start begins following the log from its head, once.
func (v *revoker) start(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.started {
		return nil
	}
	if v.s.drain.Err() != nil {
		return wire.NewProblem(wire.CodeUnavailable, "the server is shutting down")
	}
	head, err := v.s.ws.Events().Head(ctx)
	if err != nil {
		return err
	}
	sub, err := v.subscribe(head)
	if err != nil {
		return err
	}
	v.started, v.pos = true, head
	v.wg.Add(1)
	go v.watch(sub)
	return nil
}

func (v *revoker) subscribe(after int64) (*workspace.Subscription, error) {
	return v.s.ws.Events().Subscribe(v.s.drain, workspace.SubscribeRequest{
		Query: workspace.EventQuery{AfterSeq: after}, Heartbeat: time.Second,
	})
}

// watch examines every event in order until the server drains. A lost
// subscription resumes from pos; if the log was compacted past pos, every
// binding is cancelled (their clients reconnect and verify again).
func (v *revoker) watch(sub *workspace.Subscription) {
	defer v.wg.Done()
	for {
		for m := range sub.C() {
			if m.Progress {
				v.advance(m.Head)
				continue
			}
			e := m.Event
			if e.Subject.Kind == workspace.SubjectNote && strings.HasPrefix(e.Subject.ID, TokenKind+"/") &&
				(e.Type != workspace.EventNotePut || e.Version > 1) {
				v.end(e.Subject.Name)
			}
			v.advance(e.Seq)
		}
		err := sub.Err()
		_ = sub.Close()
		if v.s.drain.Err() != nil || errors.Is(err, workspace.ErrClosed) {
			// Drained, or the workspace handle closed under the server:
			// nothing is served any more.
			v.endAll()
			return
		}
		v.s.log.Warn("agentspace server: the token watcher lost its subscription; resuming", "err", v.s.opts.Redact(err))
		var ce *workspace.CompactedError
		if errors.As(err, &ce) {
			v.endAll()
		}
		for {
			select {
			case <-v.s.drain.Done():
				return
			case <-time.After(time.Second):
			}
			v.mu.Lock()
			from := v.pos
			v.mu.Unlock()
			if errors.As(err, &ce) {
				h, herr := v.s.ws.Events().Head(v.s.drain)
				if herr != nil {
					continue
				}
				from = h
				v.advance(h)
			}
			if sub, err = v.subscribe(from); err == nil {
				break
			}
			if errors.Is(err, workspace.ErrClosed) {
				v.endAll()
				return
			}
		}
	}
}

// end cancels every request bound to the token id and closes its MCP
// sessions.
func (v *revoker) end(id string) {
	v.mu.Lock()
	for b := range v.binds[id] {
		b.cancel(errTokenEnded)
	}
	v.mu.Unlock()
	if v.s.mcp != nil {
		v.s.mcp.EndSessions(id)
	}
}

func (v *revoker) endAll() {
	v.mu.Lock()
	ids := make([]string, 0, len(v.binds))
	for id := range v.binds {
		ids = append(ids, id)
	}
	v.mu.Unlock()
	for _, id := range ids {
		v.end(id)
	}
	if v.s.mcp != nil {
		v.s.mcp.EndSessions("")
	}
}

func (v *revoker) advance(seq int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if seq > v.pos {
		v.pos = seq
		close(v.advanced)
		v.advanced = make(chan struct{})
	}
}

// waitPast returns once the watcher has examined every event up to seq,
// or ctx's error (a revoked token's stream gets errTokenEnded).
func (v *revoker) waitPast(ctx context.Context, seq int64) error {
	for {
		v.mu.Lock()
		pos, ch := v.pos, v.advanced
		v.mu.Unlock()
		if pos >= seq {
			return context.Cause(ctx)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// close waits for the watcher, once the server's drain has stopped it.
func (v *revoker) close() { v.wg.Wait() }

// bindToken binds ctx to the token presented, before it is verified (see
// revoker); a string that is no token binds nothing (it fails to verify).
func (s *Server) bindToken(ctx context.Context, token string) (context.Context, func(), error) {
	m := tokenRE().FindStringSubmatch(token)
	if m == nil {
		return ctx, func() {}, nil
	}
	return s.revoke.bind(ctx, m[1])
}

// untilExpiry also ends ctx when the verified token t expires.
func untilExpiry(ctx context.Context, release func(), t Token) (context.Context, func()) {
	if t.ExpiresAt.IsZero() {
		return ctx, release
	}
	ctx, cancel := context.WithDeadlineCause(ctx, t.ExpiresAt, errTokenExpired)
	return ctx, func() { cancel(); release() }
}

type verifiedKey struct{}

// verified is a dashboard request's token as the middleware verified it.
type verified struct {
	token string
	t     Token
}

// bindDashboard binds a dashboard request that presents a valid token
// (bearer header or login cookie) to it, so that its page streams end
// when the token does; the dashboard's own check then reuses the
// verification. A request without a valid token passes unbound: the
// dashboard answers it as it answers any such request.
func (s *Server) bindDashboard(r *http.Request) (*http.Request, func()) {
	tok := ""
	if a := r.Header.Get("Authorization"); a != "" {
		if scheme, t, ok := strings.Cut(a, " "); ok && strings.EqualFold(scheme, "Bearer") {
			tok = strings.TrimSpace(t)
		}
	} else if c, err := r.Cookie(dashboard.CookieName); err == nil {
		tok = c.Value
	}
	if tokenRE().FindStringSubmatch(tok) == nil {
		return r, func() {}
	}
	ctx, release, err := s.bindToken(r.Context(), tok)
	if err != nil {
		return r, release
	}
	t, err := s.tokens.Verify(ctx, tok)
	if err != nil {
		release()
		return r, func() {}
	}
	ctx, release = untilExpiry(ctx, release, t)
	return r.WithContext(context.WithValue(ctx, verifiedKey{}, verified{tok, t})), release
}

// verifyDashboard is the dashboard's token check: the middleware's
// verification of this request when it made one, else a fresh one.
func (s *Server) verifyDashboard(ctx context.Context, token string) (Token, error) {
	if v, ok := ctx.Value(verifiedKey{}).(verified); ok && v.token == token {
		return v.t, nil
	}
	return s.tokens.Verify(ctx, token)
}

// tokenEnded returns the unauthorized error when ctx ended because its
// token was revoked or expired during the request, else nil.
func tokenEnded(ctx context.Context) error {
	if c := context.Cause(ctx); c != nil && errors.Is(c, wire.ErrUnauthorized) {
		return c
	}
	return nil
}
