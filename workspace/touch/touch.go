// Package touch makes an agent's use of a face its heartbeat: a served
// request or an MCP tool call renews the task claims and leases its actor
// holds, within a cap. The faces opt in (server.Options.TouchEvery,
// mcp.Options.Touch); nothing touches for in-process callers.
package touch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
)

// Toucher makes an agent's use of a face its heartbeat: Touch, called when
// the agent is seen working (a served request, an MCP tool call), renews
// the task claims and leases the agent holds, at most once per Every per
// actor. An agent that keeps calling keeps its claims without heartbeats of
// its own; one that stops calling loses them when their leases lapse, as
// without a Toucher. Nothing touches for in-process callers: a face opts
// in (server.Options.TouchEvery, mcp.Options.Touch).
//
// A renewal never grants more than the holder last asked for: a claim is
// extended by its own lease length (the length its last Claim or
// Heartbeat granted), a lease by its own TTL (Lease.TTL, what its last
// Acquire or Renew asked for, as the store keeps it), at most MaxLease.
// Both are read from the store at each touch, so any number of Touchers,
// in any number of processes, renew by the same span; and a claim changed,
// or a lease granted, less than Every ago (by the store's record: by this
// Toucher, another process's, or the holder itself) is not renewed, so the
// cap of one renewal per Every holds per actor however many servers it
// calls. The Toucher's own memory of its last touch of each actor only
// saves the reads. A lease stored
// without its TTL is left to its holder. A claim or lease that has lapsed
// is not revived.
type Toucher struct {
	ws   *workspace.Workspace
	opts Options
	mu   sync.Mutex
	last map[string]time.Time
}

// Options configure a Toucher.
type Options struct {
	// Every is the least time between two renewals for one actor
	// (default DefaultEvery).
	Every time.Duration
	// MaxLease caps how far a lease is renewed (default DefaultMaxLease).
	MaxLease time.Duration
	// Now is the Toucher's clock (default time.Now): it spaces an actor's
	// renewals by Every and decides which claims and leases have lapsed
	// (not revived) and which a renewal would extend. The store's own
	// clock sets the new expiry. Tests pass a controlled one.
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultEvery    = 10 * time.Second
	DefaultMaxLease = time.Hour
)

// New returns a Toucher renewing through ws.
func New(ws *workspace.Workspace, opts Options) *Toucher {
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.MaxLease <= 0 {
		opts.MaxLease = DefaultMaxLease
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Toucher{ws: ws, opts: opts, last: map[string]time.Time{}}
}

// Result says what one Touch renewed.
type Result struct {
	Claims int // task claims extended
	Leases int // leases extended
	// Skipped is set when the actor was touched less than Every ago:
	// nothing was read or written.
	Skipped bool
}

// Touch renews actor's live claims and leases, unless it did so less than
// Every ago. A claim or lease that changed meanwhile (finished, released,
// lapsed, taken) is left alone; other errors are returned after trying
// every claim and lease.
func (t *Toucher) Touch(ctx context.Context, actor string) (Result, error) {
	if actor == "" {
		return Result{Skipped: true}, nil
	}
	now := t.opts.Now()
	t.mu.Lock()
	if last, ok := t.last[actor]; ok && now.Sub(last) < t.opts.Every {
		t.mu.Unlock()
		return Result{Skipped: true}, nil
	}
	// Marked before the work: concurrent calls of one actor renew once.
	t.last[actor] = now
	t.mu.Unlock()

	var (
		res  Result
		errs []error
	)
	page, err := t.ws.Tasks().List(ctx, workspace.TaskFilter{Status: workspace.TaskInProgress, Assignee: actor, Limit: 1000})
	if err != nil {
		return res, err
	}
	for _, task := range page.Tasks {
		span := task.LeaseExpiresAt.Sub(task.UpdatedAt)
		if span <= 0 || !task.LeaseExpiresAt.After(now) || !now.Add(span).After(task.LeaseExpiresAt) ||
			now.Sub(task.UpdatedAt) < t.opts.Every {
			continue
		}
		_, err := t.ws.Tasks().Heartbeat(ctx, workspace.Write{Actor: actor}, task.ID, span)
		switch {
		case err == nil:
			res.Claims++
		case !changedMeanwhile(err):
			errs = append(errs, err)
		}
	}
	leases, err := t.ws.Locks().List(ctx)
	if err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	for _, l := range leases {
		span := min(l.TTL, t.opts.MaxLease)
		// Lapsed by the Toucher's clock (the store may not have reaped
		// it yet): not revived, as a claim is not.
		if l.Owner != actor || span <= 0 || !l.ExpiresAt.After(now) || !now.Add(span).After(l.ExpiresAt) ||
			now.Sub(l.ExpiresAt.Add(-span)) < t.opts.Every {
			continue
		}
		_, err := t.ws.Locks().Renew(ctx, l, span)
		switch {
		case err == nil:
			res.Leases++
		case !changedMeanwhile(err):
			errs = append(errs, err)
		}
	}
	return res, errors.Join(errs...)
}

// changedMeanwhile reports whether err says the claim or lease moved on
// between the listing and the renewal: nothing to renew, no failure.
func changedMeanwhile(err error) bool {
	return errors.Is(err, workspace.ErrConflict) || errors.Is(err, workspace.ErrLockLost) || errors.Is(err, workspace.ErrNotHolder) ||
		errors.Is(err, workspace.ErrNotFound)
}
