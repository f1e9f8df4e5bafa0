package engine

import (
	"context"
	"sync"
	"time"

	"github.com/agentspace/agentspace/workspace"
	"github.com/agentspace/agentspace/workspace/driver"
)

// Inbox long polls wait on inboxWake, keyed by recipient, not on the hub:
// a commit wakes only the polls of the inboxes it sent a message to. One
// dispatcher per core, running while any poll waits, reads the log's
// message.sent events past what it has dealt with once per advance of the
// hub, and wakes each poll waiting on a recipient of the message (its To
// and who owes it an ack: an expanded role member). A change to the
// policy (roles may change, and with them whose inbox a message is in),
// a log that went back, or a read that fails wakes every poll. Each poll
// also reads its inbox again every inboxRecheck: a wake missed costs
// latency, never a message.
//
// Invariant: a poll registers before it reads its inbox, and the
// dispatcher has dealt with every event at or below seen, which a read
// that starts after the registration sees; every message sent past seen
// is dealt with after the poll registered, so wakes it.
type inboxWake struct {
	mu      sync.Mutex
	waiters map[string]map[*inboxWaiter]struct{}
	count   int
	seen    int64 // the log's seq the dispatcher has dealt with
	running bool
	// dispatches counts the dispatcher's reads of the log (for the tests
	// and benchmarks).
	dispatches int64
}

// inboxRecheck is how often a waiting inbox poll reads its inbox again
// with no wake: the bound on the latency of a wake missed.
const inboxRecheck = 30 * time.Second

// dueRecheck is how often the dispatcher looks for a message deadline
// that passed (a passing deadline commits nothing to wake anyone on).
const dueRecheck = claimRecheck

type inboxWaiter struct {
	keys []string
	ch   chan struct{}
	once sync.Once
}

func (w *inboxWaiter) wake() { w.once.Do(func() { close(w.ch) }) }

// wait blocks until w is woken or inboxRecheck passes; only ctx's end
// and closed (the waiting handle's) are errors.
func (w *inboxWaiter) wait(ctx context.Context, closed <-chan struct{}) error {
	t := time.NewTimer(inboxRecheck)
	defer t.Stop()
	select {
	case <-w.ch:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return workspace.ErrClosed
	}
	return nil
}

// registerInbox adds a poll waiting on the inboxes of keys (an actor and
// its roles as role:NAME), and starts the dispatcher if none runs, from
// the store's head: the poll's read of its inbox, which comes after, sees
// every message the dispatcher does not wake it for.
func (h *handle) registerInbox(ctx context.Context, keys []string) (*inboxWaiter, error) {
	iw := &h.inboxes
	w := &inboxWaiter{keys: keys, ch: make(chan struct{})}
	iw.mu.Lock()
	if iw.waiters == nil {
		iw.waiters = map[string]map[*inboxWaiter]struct{}{}
	}
	for _, k := range keys {
		s := iw.waiters[k]
		if s == nil {
			s = map[*inboxWaiter]struct{}{}
			iw.waiters[k] = s
		}
		s[w] = struct{}{}
	}
	iw.count++
	running := iw.running
	iw.mu.Unlock()
	if running {
		return w, nil
	}
	var head int64
	err := h.storeView(ctx, nil, func(tx driver.ReadTx) error {
		var err error
		head, err = tx.Head(ctx)
		return err
	})
	if err != nil {
		h.unregisterInbox(w)
		return nil, err
	}
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if !iw.running {
		iw.running, iw.seen = true, head
		h.hub.wg.Add(1)
		go h.core.dispatchInboxes(h.hub.ctx)
	}
	return w, nil
}

// unregisterInbox removes w.
func (h *handle) unregisterInbox(w *inboxWaiter) {
	iw := &h.inboxes
	iw.mu.Lock()
	defer iw.mu.Unlock()
	for _, k := range w.keys {
		if s := iw.waiters[k]; s != nil {
			delete(s, w)
			if len(s) == 0 {
				delete(iw.waiters, k)
			}
		}
	}
	iw.count--
}

// wakeKeys wakes the polls waiting on any of keys; all wakes every poll.
func (iw *inboxWake) wakeKeys(keys []string, all bool) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if all {
		for _, s := range iw.waiters {
			for w := range s {
				w.wake()
			}
		}
		return
	}
	for _, k := range keys {
		for w := range iw.waiters[k] {
			w.wake()
		}
	}
}

// headNow is the head the hub has seen.
func (b *hub) headNow() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.head
}

// dispatchInboxes is the dispatcher: it runs until no poll waits (or the
// core stops), reading the log after each advance of the hub.
func (c *core) dispatchInboxes(ctx context.Context) {
	b, iw := c.hub, &c.inboxes
	defer b.wg.Done()
	h := &handle{core: c, ctx: ctx}
	nextDue := time.Now()
	for {
		wake := b.watch()
		iw.mu.Lock()
		if iw.count == 0 {
			iw.running = false
			iw.mu.Unlock()
			return
		}
		seen := iw.seen
		iw.mu.Unlock()
		if b.headNow() > seen {
			next, all := c.inboxChanges(ctx, h, seen)
			iw.mu.Lock()
			iw.dispatches++
			iw.seen = max(iw.seen, next)
			iw.mu.Unlock()
			if all {
				iw.wakeKeys(nil, true)
			}
		}
		if now := time.Now(); !now.Before(nextDue) {
			// A deadline that passed: the polls read again, and the
			// first escalates it (escalateIfDue), which sends.
			nextDue = now.Add(dueRecheck)
			if due, err := (messages{h}).due(ctx); err != nil || due {
				iw.wakeKeys(nil, true)
			}
		}
		if err := b.wait(ctx, nil, wake, nextDue); err != nil {
			iw.mu.Lock()
			iw.running = false
			iw.mu.Unlock()
			iw.wakeKeys(nil, true)
			return
		}
	}
}

// inboxChanges reads the log after seen, wakes the polls of the inboxes
// its messages were sent to, and returns the seq dealt with; all says
// every poll must read again.
func (c *core) inboxChanges(ctx context.Context, h *handle, seen int64) (int64, bool) {
	types := []string{workspace.EventMessageSent, workspace.EventArtifactCreated, workspace.EventArtifactUpdated,
		workspace.EventArtifactDeleted, workspace.EventArtifactRolledBack}
	all := false
	err := h.storeView(ctx, nil, func(tx driver.ReadTx) error {
		head, err := tx.Head(ctx)
		if err != nil {
			return err
		}
		if head < seen {
			// The log went back (a restore): read everything again.
			all, seen = true, head
			return nil
		}
		if floor, err := tx.Floor(ctx); err != nil {
			return err
		} else if floor > seen+1 {
			all, seen = true, head
			return nil
		}
		for seen < head {
			evs, err := tx.Events(ctx, workspace.EventQuery{AfterSeq: seen, Types: types, Limit: 1000})
			if err != nil {
				return err
			}
			for _, e := range evs {
				if e.Type != workspace.EventMessageSent {
					if e.Subject.Name == workspace.PolicyArtifact {
						all = true
					}
					continue
				}
				m, err := getMsg(ctx, tx, e.Subject.ID)
				if err != nil {
					continue // removed since: no inbox holds it
				}
				keys := append(append([]string(nil), m.To...), m.Pending...)
				c.inboxes.wakeKeys(keys, false)
			}
			if len(evs) < 1000 {
				seen = head
				break
			}
			seen = evs[len(evs)-1].Seq
		}
		return nil
	})
	if err != nil {
		return seen, true
	}
	return seen, all
}
